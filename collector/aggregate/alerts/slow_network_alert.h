// The slow-network finding: a link_degraded alert for a communicator whose latest settled span of
// slow collectives (slow_cause.h) was slowed by the network. No rank: the NIC port or link that
// moved is named, and the waiting for late ranks quoted (so not a rank).
#pragma once

#include <string>

#include "collector/aggregate/alert_book.h"
#include "collector/aggregate/slow_cause_types.h"

namespace sentinel::collector {

// The alert for settled span `s` of cause kNetwork (key AlertKey::SlowNetwork of its
// communicator).
Alert SlowNetworkAlert(const SlowSpan& s, const std::string& host, const std::string& runbook_base);

// True for an alert SlowNetworkAlert builds.
bool IsSlowNetworkAlert(const Alert& alert);

}  // namespace sentinel::collector
