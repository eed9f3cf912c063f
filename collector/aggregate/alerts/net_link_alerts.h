// The net plugin's link alerts: link_degraded (net) for a link of the wrapping net plugin
// (net_links.h) whose sends take far longer than its peers'. Node-level, raised from the sending
// process's reports.
#pragma once

#include <string>
#include <vector>

#include "collector/aggregate/alert_book.h"
#include "collector/aggregate/net_links.h"

namespace sentinel::collector {

// The alerts to fire now: one per degraded link (NetLinkPolicy's defaults).
std::vector<Alert> NetLinkAlerts(const NetLinks& net, const std::string& runbook_base);

// True for a net link alert (the ones NetLinkAlerts raises, resolved when no longer degraded).
bool IsNetLinkAlert(const Alert& alert);

}  // namespace sentinel::collector
