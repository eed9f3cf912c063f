// The /metrics families by group, internal to export/: RenderPrometheus (prometheus_text.cc) calls
// them in the exposition order and each appends its families through PromFamily.
#pragma once

#include <string>
#include <vector>

#include "collector/aggregate/metrics_snapshot.h"

namespace sentinel::collector {

// What the per-communicator, per-rank and per-process families list: the exported ones (the
// series budget, metrics_select.h), each in its listing order.
struct MetricsRows {
  const MetricsSnapshot* snap = nullptr;
  bool by_size = false;                                    // --metrics-detail size
  std::vector<const MetricsSnapshot::Comm*> comms;         // by hash
  std::vector<const MetricsSnapshot::Rank*> ranks;         // RankListedBefore
  std::vector<const MetricsSnapshot::Process*> processes;  // connected with a primary rank
};

// prometheus_ranks.cc
void AppendCommFamilies(const MetricsRows& rows, std::string* out);
void AppendRankProgressFamilies(const MetricsRows& rows, std::string* out);
void AppendInFlightFamilies(const MetricsRows& rows, std::string* out);
void AppendRankTimingFamilies(const MetricsRows& rows, std::string* out);
// prometheus_processes.cc
void AppendProcessFamilies(const MetricsRows& rows, std::string* out);
void AppendGpuFamilies(const MetricsRows& rows, std::string* out);

}  // namespace sentinel::collector
