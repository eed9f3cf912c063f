// See slow_network_alert.h.
#include "collector/aggregate/alerts/slow_network_alert.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "collector/aggregate/alerts/alert_key.h"
#include "collector/aggregate/slow_span_text.h"
#include "collector/aggregate/snapshot.h"
#include "collector/aggregate/stats.h"

namespace sentinel::collector {

Alert SlowNetworkAlert(const SlowSpan& s, const std::string& host,
                       const std::string& runbook_base) {
  const double n = std::max<double>(s.windows, 1);
  const double usual_ms = static_cast<double>(s.usual_ns) / 1e6;
  const double mean_ms = static_cast<double>(s.duration_ns) / 1e6 / n;
  Alert a;
  a.id = AlertKey::SlowNetwork(s.comm_hash).Id();
  a.kind = AlertKind::kLinkDegraded;
  a.severity = AlertSeverity::kWarning;
  a.comm = CommLabel(s.comm_hash);
  a.owner_uid = s.uid;
  a.host = host;
  a.summary = absl::StrFormat(
      "comm %s: %d %s collectives (seq %d-%d) took %.0f%% longer than its usual %.3f ms "
      "(%.3f ms each): %s; waiting for late ranks %.3f ms of the %.3f ms excess, so not a "
      "rank",
      a.comm, s.windows, FuncName(s.func), s.first_seq, s.last_seq,
      usual_ms > 0 ? (mean_ms - usual_ms) / usual_ms * 100 : 0.0, usual_ms, mean_ms,
      SlowSpanVerdict(s), static_cast<double>(s.late_ns) / 1e6,
      static_cast<double>(s.excess_ns) / 1e6);
  a.evidence = SlowSpanJson(s);
  if (!s.nics.empty()) {
    a.evidence["device"] = s.nics[0].device;
    a.evidence["port"] = s.nics[0].port;
    a.evidence["counter"] = s.nics[0].counter;
    a.evidence["delta"] = s.nics[0].delta;
  }
  a.runbook = absl::StrCat(runbook_base, "alert-link_degraded");
  return a;
}

bool IsSlowNetworkAlert(const Alert& alert) {
  return AlertIdIs(alert.id, AlertKeyKind::kSlowNetwork);
}

}  // namespace sentinel::collector
