// See net_link_alerts.h.
#include "collector/aggregate/alerts/net_link_alerts.h"

#include "collector/aggregate/alerts/alert_key.h"

namespace sentinel::collector {

std::vector<Alert> NetLinkAlerts(const NetLinks& net, const std::string& runbook_base) {
  return LinkDegradedAlerts(net.DetectDegraded(NetLinkPolicy{}), runbook_base);
}

bool IsNetLinkAlert(const Alert& alert) { return AlertIdIs(alert.id, AlertKeyKind::kNetLink); }

}  // namespace sentinel::collector
