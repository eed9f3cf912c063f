// Renders the aggregator's state for the outside world: Prometheus text exposition (0.0.4) and
// the JSON payloads of design.md's HTTP API (schemas in schemas/api/). Pure functions of a State
// snapshot, called under the aggregator's reader lock.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "collector/aggregate/aggregator.h"
#include "collector/export/metrics_select.h"

namespace sentinel::collector {

inline constexpr const char* kSentinelVersion = "0.1.0";

// The default series budget (MetricsOptions{}), or the given one (metrics_select.h).
std::string RenderPrometheus(const State& state);
std::string RenderPrometheus(const State& state, const MetricsOptions& options);
nlohmann::json HealthzJson(const State& state, int64_t now_real_ns, int64_t now_mono_ns);
nlohmann::json RanksJson(const State& state, int64_t now_mono_ns);
nlohmann::json TelemetryJson(const State& state, int64_t window_ns, int64_t now_mono_ns);
nlohmann::json AlertsJson(const State& state);
nlohmann::json AlertJson(const Alert& alert);
// Chrome/Perfetto trace of every kept sample that started within the last `window_ns`.
nlohmann::json TraceJson(const State& state, int64_t window_ns, int64_t now_mono_ns);
nlohmann::json ErrorJson(int code, const std::string& message);
// A rank's in-flight state for /v1/ranks (null when it never sent any), and the age of its
// oldest incomplete collective as of the last tick.
nlohmann::json InFlightJson(const State& state, const InFlightView& v);
double InFlightAgeSeconds(const State& state, const InFlightView& v);
// RFC 3339 UTC with milliseconds.
std::string FormatRealTime(int64_t real_ns);
// The rank a process is best known by: its rank in the largest communicator it joined.
const RankState* PrimaryRank(const State& state, const ProcessState& process);

}  // namespace sentinel::collector
