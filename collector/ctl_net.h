// `sentinelctl net`: the /v1/telemetry "net" section (wrapping net plugin, plugin/net) as tables:
// the devices offered to NCCL, then one row per connection with both ends, bytes, requests,
// latency, effective rate and a DEGRADED mark from firing link_degraded alerts.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sentinel::ctl {

// `telemetry` = GET /v1/telemetry, `alerts` = GET /v1/alerts. Pure.
std::string NetTables(const nlohmann::json& telemetry, const nlohmann::json& alerts);

// The JSON form: the "net" section with "degraded": true|false added to every link.
nlohmann::json NetJson(const nlohmann::json& telemetry, const nlohmann::json& alerts);

}  // namespace sentinel::ctl
