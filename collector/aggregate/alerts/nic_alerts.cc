// See nic_alerts.h.
#include "collector/aggregate/alerts/nic_alerts.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "collector/aggregate/alerts/alert_key.h"

namespace sentinel::collector {
namespace {

AlertUpdate FireUpdate(Alert a) {
  AlertUpdate u;
  u.fire = true;
  u.alert = std::move(a);
  return u;
}

AlertUpdate ResolveUpdate(const std::string& id) {
  AlertUpdate u;
  u.resolve_id = id;
  return u;
}

}  // namespace

std::vector<AlertUpdate> NicAlertUpdates(const NicState& nic, const std::string& host,
                                         const std::string& runbook_base,
                                         std::set<std::string>* live) {
  std::vector<AlertUpdate> out;
  std::map<std::string, double> fastest;  // link layer -> fastest ACTIVE rate
  for (const auto& [key, p] : nic.ports) {
    if (p.last.active && p.last.rate_gbps > 0) {
      double& f = fastest[p.last.link_layer];
      f = std::max(f, p.last.rate_gbps);
    }
  }
  for (const auto& [key, p] : nic.ports) {
    const std::string err_id = AlertKey::NicErrors(key.first, key.second).Id();
    const std::string link_id = AlertKey::NicLink(key.first, key.second).Id();
    live->insert(err_id);
    live->insert(link_id);
    if (p.error_polls >= 2) {
      nlohmann::json deltas = nlohmann::json::object();
      std::string counter;
      uint64_t delta = 0;
      for (int c = 0; c < kNicCounterCount; ++c) {
        const uint64_t d = p.delta[static_cast<size_t>(c)];
        if (d == 0 || !NicCounterIsError(c)) continue;
        deltas[NicCounterName(c)] = d;
        if (d > delta) {
          delta = d;
          counter = NicCounterName(c);
        }
      }
      Alert a;
      a.id = err_id;
      a.kind = AlertKind::kNicErrors;
      a.severity = AlertSeverity::kCritical;
      a.host = host;
      a.summary = absl::StrFormat("%s port %d: %s grew by %d (%d consecutive polls)", key.first,
                                  key.second, counter, delta, p.error_polls);
      a.evidence = {{"device", key.first}, {"port", key.second}, {"counter", counter},
                    {"delta", delta},      {"deltas", deltas},   {"polls", p.error_polls},
                    {"resets", p.resets}};
      a.runbook = absl::StrCat(runbook_base, "alert-nic_errors");
      out.push_back(FireUpdate(std::move(a)));
    } else if (p.clean_polls >= 2) {
      out.push_back(ResolveUpdate(err_id));
    }
    auto f = fastest.find(p.last.link_layer);
    if (p.last.active && p.last.rate_gbps > 0 && f != fastest.end() &&
        p.last.rate_gbps < f->second) {
      Alert a;
      a.id = link_id;
      a.kind = AlertKind::kLinkDegraded;
      a.severity = AlertSeverity::kWarning;
      a.host = host;
      a.summary =
          absl::StrFormat("%s port %d runs at %g Gb/s, the node's fastest %s port at %g", key.first,
                          key.second, p.last.rate_gbps, p.last.link_layer, f->second);
      a.evidence = {{"device", key.first},
                    {"port", key.second},
                    {"counter", "rate"},
                    {"rate_gbps", p.last.rate_gbps},
                    {"expected_gbps", f->second},
                    {"delta", p.last.rate_gbps - f->second},
                    {"link_layer", p.last.link_layer}};
      a.runbook = absl::StrCat(runbook_base, "alert-link_degraded");
      out.push_back(FireUpdate(std::move(a)));
    } else {
      out.push_back(ResolveUpdate(link_id));
    }
  }
  return out;
}

}  // namespace sentinel::collector
