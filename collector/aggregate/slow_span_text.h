// A settled span of slow windows (slow_cause_types.h) for people and for JSON: the `cause` label,
// the one-line verdict and the evidence object (/v1/telemetry "slow_windows", alerts' evidence).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "collector/aggregate/slow_cause_types.h"

namespace sentinel::collector {

// "late_rank", "network", "transfer" (the `cause` label: bounded).
const char* SlowCauseName(SlowCauseKind kind);

// A span as JSON (the /v1/telemetry "slow_windows" entries, alerts' evidence).
nlohmann::json SlowSpanJson(const SlowSpan& s);
// One line for people: "late rank 5 (12.3 ms)" or "network (mlx5_0 port 1: port_xmit_wait
// +48213)" or "transfer (no counter moved; or a rank on another node)" or, for a communicator
// whose ranks are all on this node, "transfer (inside the node: no NIC)".
std::string SlowSpanVerdict(const SlowSpan& s);

}  // namespace sentinel::collector
