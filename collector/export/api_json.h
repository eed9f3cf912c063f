// The JSON payloads of sentineld's HTTP API (schemas/api/api.md and its JSON schemas), rendered
// from snapshots after the aggregator's lock is released: /v1/healthz and /v1/alerts from
// snapshot.h's, /v1/ranks and /v1/telemetry from api_snapshot.h's.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collector/aggregate/api_snapshot.h"
#include "collector/aggregate/snapshot.h"

namespace sentinel::collector {

nlohmann::json HealthzJson(const HealthSnapshot& snap, int64_t now_real_ns, int64_t now_mono_ns);
nlohmann::json AlertsJson(const std::vector<Alert>& alerts);  // TakeAlerts
nlohmann::json AlertJson(const Alert& alert);
nlohmann::json ErrorJson(int code, const std::string& message);
// /v1/ranks and /v1/telemetry from their snapshots (api_snapshot.h), after the lock.
nlohmann::json RanksJson(const RanksSnapshot& snap);
nlohmann::json TelemetryJson(const TelemetrySnapshot& snap);
// A rank's in-flight state at `now_mono_ns` (the last tick), null when it never sent any.
nlohmann::json InFlightJson(int64_t now_mono_ns, const InFlightView& v);

}  // namespace sentinel::collector
