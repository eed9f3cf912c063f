// The fabric baseline beside the job's own figures: the job's bus bandwidth per message-size
// bucket (what sentinel-baseline sweeps and compares with) and the latest baseline run, as JSON
// for /v1/telemetry and as Prometheus samples. Pure functions of a State snapshot, called under
// the aggregator's reader lock.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "collector/aggregate/aggregator.h"

namespace sentinel::collector {

// /v1/telemetry "busbw_by_size": per (function, size bucket) of the collectives that ended after
// `since_mono_ns`: p50 message bytes, count, p50 bus bandwidth (GB/s), bucket bounds.
nlohmann::json JobBusbwBySizeJson(const State& state, int64_t since_mono_ns);
// /v1/telemetry "baseline": the latest sentinel-baseline run with, per size, the job's bus
// bandwidth in the same bucket over the window and both ratios; null when no run arrived.
nlohmann::json BaselineJson(const State& state, int64_t since_mono_ns);
// Appends the sentinel_baseline_* and sentinel_job_busbw_* families (Prometheus text 0.0.4).
void AppendBaselinePrometheus(const State& state, int64_t since_mono_ns, std::string* out);

}  // namespace sentinel::collector
