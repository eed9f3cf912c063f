// `sentinelctl breakdown`: where each rank's time went, from GET /v1/ranks ("time" per rank and
// "breakdown" per job; collector/aggregate/time_breakdown.h): a table per communicator and rank
// of compute / communication / wait / host in ms per step and % of the rank's time, then per job
// the share lost to waiting and the verdict (one bad rank or a few named, the distribution
// widened, or not enough data).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sentinel::ctl {

// `ranks` = GET /v1/ranks. Pure; every string from the answer is escaped, a field of another type
// shows as unknown.
std::string BreakdownTable(const nlohmann::json& ranks);
// --json: {"ranks": [{comm, rank, pid, time}], "breakdown": [...]} as sentineld sent them.
nlohmann::json BreakdownJson(const nlohmann::json& ranks);

}  // namespace sentinel::ctl
