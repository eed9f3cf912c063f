// `sentinelctl slow`: the /v1/telemetry "slow_windows" section (aggregate/slow_cause.h) as a table:
// one row per span of slow collectives with its excess over the communicator's usual duration
// and its verdict, "late rank N" or "network (mlx5_0 port 1: port_xmit_wait +X)" or "transfer",
// then the seconds by cause per communicator.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sentinel::ctl {

// `telemetry` = GET /v1/telemetry. Pure; every string from the answer is escaped.
std::string SlowTable(const nlohmann::json& telemetry);

}  // namespace sentinel::ctl
