// The "why a collective is slow" exports (aggregate/slow_cause.h): the /metrics families, bounded
// per communicator (never per collective), and the /v1/telemetry "slow_windows" list.
//
// /metrics, for each exported communicator:
//   sentinel_comm_slow_seconds_total{comm,cause}  excess over the communicator's usual duration,
//       by cause: late_rank (waiting for late ranks), network (slower transfer while a NIC or
//       link moved), transfer (slower transfer, no counter moved)
//   sentinel_comm_slow_windows_total{comm,cause}  slow collectives, by their span's cause
//   sentinel_comm_slow_last_info{comm,cause,late_rank,nic}  1, for the latest settled span: its
//       cause, the first late rank named ("" when none) and the first NIC port ("mlx5_0:1") or
//       link device named ("" when none)
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/container/flat_hash_set.h"

#include "collector/aggregate/metrics_snapshot.h"  // SlowCauseSnapshot (slow_cause.h)

namespace sentinel::collector {

// The families above, in Prometheus text (0.0.4), for the communicators in `exported`.
std::string SlowCausePrometheusText(const SlowCauseSnapshot& snap,
                                    const absl::flat_hash_set<uint64_t>& exported);

// The /v1/telemetry "slow_windows" value: {"spans": [SlowSpanJson..., newest first, those that
// ended at or after `since_ns` (node clock)], "by_comm": [{comm, <cause>_s..., windows}]}.
nlohmann::json SlowWindowsJson(const SlowCauseSnapshot& snap, int64_t since_ns);

}  // namespace sentinel::collector
