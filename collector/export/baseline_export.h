// The fabric baseline beside the job's own figures: the job's bus bandwidth per message-size
// bucket (what sentinel-baseline sweeps and compares with) and the latest baseline run, as JSON
// for /v1/telemetry and as Prometheus samples. Pure functions of a BaselineSnapshot
// (metrics_snapshot.h, TakeBaselineSnapshot), called after the aggregator's lock is released.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "collector/aggregate/metrics_snapshot.h"

namespace sentinel::collector {

// /v1/telemetry "busbw_by_size": per (function, size bucket) of the snapshot's collectives: p50
// message bytes, count, p50 bus bandwidth (GB/s), bucket bounds.
nlohmann::json JobBusbwBySizeJson(const BaselineSnapshot& snap);
// /v1/telemetry "baseline": the latest sentinel-baseline run with, per size, the job's bus
// bandwidth in the same bucket over the snapshot's window and both ratios; null when no run
// arrived.
nlohmann::json BaselineJson(const BaselineSnapshot& snap);
// Appends the sentinel_baseline_* and sentinel_job_busbw_* families (Prometheus text 0.0.4).
void AppendBaselinePrometheus(const BaselineSnapshot& snap, std::string* out);

}  // namespace sentinel::collector
