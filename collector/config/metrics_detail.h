// The --metrics-detail value: which opt-in dimensions /metrics carries beyond the default
// per-rank summaries (collector/README.md "Metrics: series budget").
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sentinel::collector {

struct MetricsDetail {
  bool comm = false;  // every communicator, not only each rank's primary one
  bool size = false;  // by message-size bucket
};

// "none", or a comma list of "comm", "size" (spaces allowed). Anything else: InvalidArgument.
absl::StatusOr<MetricsDetail> ParseMetricsDetail(absl::string_view text);

}  // namespace sentinel::collector
