// Which communicators /metrics carries (the series budget). By default each rank exports its
// primary communicator only (PrimaryRank: one spanning other nodes first, then the largest it
// joined), without size buckets, so a rank's series do not grow with its communicators, message
// sizes or past jobs; --metrics-detail comm,size and the --metrics-comms allow-list opt into the
// rest. A communicator with no live local rank leaves /metrics --series-retention after it ended.
// The JSON API and traces are not filtered.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"

#include "collector/aggregate/metrics_snapshot.h"
#include "collector/config/config.h"
#include "collector/config/metrics_detail.h"

namespace sentinel::collector {

struct MetricsOptions {
  MetricsDetail detail;
  std::vector<std::string> comms;  // allow-list: "0x..." hashes or communicator names
  int64_t retention_ns = 5LL * 60 * 1000000000;
};

// From a validated Config (metrics-detail, metrics-comms, series-retention).
MetricsOptions MetricsOptionsFrom(const Config& config);

// True once no local rank of `comm` is active and it ended at least `retention_ns` before `now`.
bool CommSeriesExpired(const MetricsSnapshot::Comm& comm, int64_t now_mono_ns,
                       int64_t retention_ns);

// The communicators whose series /metrics carries under `options`.
absl::flat_hash_set<uint64_t> ExportedComms(const MetricsSnapshot& snap,
                                            const MetricsOptions& options);

}  // namespace sentinel::collector
