// The node's own job-wide straggler alerts, from its communicators' wait evidence
// (wait_evidence.h): a slow node (every process of the node with a judged rank in a communicator
// spanning other nodes stopped waiting) or the slow ranks, where the local straggler detector
// cannot see them (the rank is its communicator's only local rank, or every local rank of the
// communicator is flagged). Rebuilt every tick: the alerts that should fire now, with their
// figures as of now.
#pragma once

#include <string>
#include <vector>

#include "collector/aggregate/alert_book.h"

namespace sentinel::collector {

struct State;

// The alerts to fire now (keys AlertKey::SlowNode and AlertKey::WaitRank, alerts/alert_key.h).
// Call with the aggregator's lock held.
std::vector<Alert> WaitAlerts(const State& state, const std::string& runbook_base);
// True for an alert WaitAlerts builds (AlertKey::is_wait).
bool IsWaitAlert(const Alert& alert);

}  // namespace sentinel::collector
