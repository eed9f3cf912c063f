// Node exclusion: see exclusion.h.
#include "collector/aggregate/exclusion.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_split.h"

#include "collector/aggregate/aggregator.h"
#include "collector/base/real_time.h"

namespace sentinel::collector {

std::vector<std::string> AlertHosts(const Alert& alert) {
  std::vector<std::string> hosts;
  auto add = [&](const std::string& h) {
    if (h.empty() || h == "?") return;
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  };
  add(alert.host);
  if (alert.kind == AlertKind::kLinkDegraded && alert.evidence.is_object()) {
    for (const char* key : {"send_host", "recv_host"}) {
      const auto it = alert.evidence.find(key);
      if (it != alert.evidence.end() && it->is_string()) add(it->get<std::string>());
    }
  }
  return hosts;
}

namespace {

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Whether `text` names `device` port `port`: "mlx5_0:1", or the bare device ("mlx5_0 at ...").
bool NamesPort(const std::string& text, const std::string& device, int port) {
  if (device.empty()) return false;
  for (size_t at = text.find(device); at != std::string::npos; at = text.find(device, at + 1)) {
    if (at > 0 && NameChar(text[at - 1])) continue;
    size_t end = at + device.size();
    if (end < text.size() && NameChar(text[end])) continue;  // a longer name ("mlx5_01")
    if (end + 1 < text.size() && text[end] == ':' && text[end + 1] >= '0' && text[end + 1] <= '9') {
      int named = 0;
      for (++end; end < text.size() && text[end] >= '0' && text[end] <= '9' && named < 100000;
           ++end) {
        named = named * 10 + (text[end] - '0');
      }
      if (named != port) continue;
    }
    return true;
  }
  return false;
}

}  // namespace

NodeEvidence NodeEvidenceOf(const State& state) {
  NodeEvidence node;
  if (!state.nic.enabled) return node;
  // The same standard as sentineld's own nic_errors and link_degraded alerts (aggregator.cc).
  std::map<std::string, double> fastest;  // link layer -> fastest ACTIVE rate
  for (const auto& [key, p] : state.nic.ports) {
    if (p.last.active && p.last.rate_gbps > 0) {
      double& f = fastest[p.last.link_layer];
      f = std::max(f, p.last.rate_gbps);
    }
  }
  for (const auto& [key, p] : state.nic.ports) {
    const auto f = fastest.find(p.last.link_layer);
    const bool slow =
        p.last.active && p.last.rate_gbps > 0 && f != fastest.end() && p.last.rate_gbps < f->second;
    if (slow || p.error_polls >= 2) node.degraded_ports.push_back(key);
  }
  return node;
}

bool VerdictNamesDegradedPort(const Alert& alert, const NodeEvidence& node) {
  if (!alert.evidence.is_object()) return false;
  const auto it = alert.evidence.find("found");
  if (it == alert.evidence.end() || !it->is_string()) return false;
  const std::string& found = it->get_ref<const std::string&>();
  for (const auto& [device, port] : node.degraded_ports) {
    if (NamesPort(found, device, port)) return true;
  }
  return false;
}

std::vector<ExcludedHost> DeriveExclusions(const AlertBook& book, const ExcludePolicy& policy,
                                           int64_t now_real_ns, const NodeEvidence& node) {
  struct Acc {
    std::set<std::string> reasons;
    std::set<std::string> ids;
    bool firing = false;
    int64_t until = 0;
  };
  std::map<std::string, Acc> by_host;
  auto list = [&](const std::string& host, const Alert& alert, int64_t until) {
    Acc& acc = by_host[host];
    acc.reasons.insert(AlertKindName(alert.kind));
    acc.ids.insert(alert.id);
    acc.firing = acc.firing || alert.firing();
    acc.until = std::max(acc.until, until);
  };
  auto until_of = [&](const Alert& alert) {
    return alert.firing() ? 0 : alert.resolved_real_ns + policy.hold_ns;
  };
  // Alerts raised from clients' data wait for corroboration; the kernel uids behind them, per host.
  std::vector<const Alert*> from_clients;
  std::map<std::string, std::set<uint32_t>> uids_by_host;
  for (const auto& [id, alert] : book.all()) {
    if (!policy.Counts(alert.kind)) continue;
    const int64_t until = until_of(alert);
    if (!alert.firing() && until <= now_real_ns) continue;  // resolved longer ago than the hold
    if (alert.source < 0) {                                 // sentineld's own measurement
      for (const std::string& host : AlertHosts(alert)) list(host, alert, until);
      continue;
    }
    if (alert.host.empty() || alert.host == "?") continue;
    from_clients.push_back(&alert);
    if (alert.source_uid != UINT32_MAX) uids_by_host[alert.host].insert(alert.source_uid);
  }
  for (const Alert* alert : from_clients) {
    const bool by_uids = uids_by_host[alert->host].size() >= kExcludeCorroboratingUids;
    const bool by_own_port =
        alert->kind == AlertKind::kLinkDegraded && VerdictNamesDegradedPort(*alert, node);
    if (by_uids || by_own_port) list(alert->host, *alert, until_of(*alert));
  }
  std::vector<ExcludedHost> out;
  for (auto& [host, acc] : by_host) {
    ExcludedHost h;
    h.host = host;
    h.reasons.assign(acc.reasons.begin(), acc.reasons.end());
    h.alert_ids.assign(acc.ids.begin(), acc.ids.end());
    h.firing = acc.firing;
    h.until_real_ns = acc.firing ? 0 : acc.until;
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<ExcludedHost> DeriveExclusions(const State& state, const ExcludePolicy& policy,
                                           int64_t now_real_ns) {
  return DeriveExclusions(state.alerts, policy, now_real_ns, NodeEvidenceOf(state));
}

nlohmann::json ExcludeJson(const std::vector<ExcludedHost>& hosts, const ExcludePolicy& policy) {
  nlohmann::json list = nlohmann::json::array();
  for (const ExcludedHost& h : hosts) {
    list.push_back({{"host", h.host},
                    {"reasons", h.reasons},
                    {"alert_ids", h.alert_ids},
                    {"firing", h.firing},
                    {"until", h.firing ? nlohmann::json(nullptr)
                                       : nlohmann::json(FormatRealTime(h.until_real_ns))}});
  }
  std::vector<std::string> kinds = absl::StrSplit(ExcludeKindsText(policy.kinds), ',');
  if (policy.kinds == 0) kinds.clear();
  return {{"hosts", list},
          {"policy", {{"kinds", kinds}, {"hold_s", static_cast<double>(policy.hold_ns) / 1e9}}}};
}

}  // namespace sentinel::collector
