// Node exclusion: see exclusion.h.
#include "collector/aggregate/exclusion.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

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

std::vector<ExcludedHost> DeriveExclusions(const AlertBook& book, const ExcludePolicy& policy,
                                           int64_t now_real_ns) {
  struct Acc {
    std::set<std::string> reasons;
    std::set<std::string> ids;
    bool firing = false;
    int64_t until = 0;
  };
  std::map<std::string, Acc> by_host;
  for (const auto& [id, alert] : book.all()) {
    if (!policy.Counts(alert.kind)) continue;
    const int64_t until = alert.firing() ? 0 : alert.resolved_real_ns + policy.hold_ns;
    if (!alert.firing() && until <= now_real_ns) continue;  // resolved longer ago than the hold
    for (const std::string& host : AlertHosts(alert)) {
      Acc& acc = by_host[host];
      acc.reasons.insert(AlertKindName(alert.kind));
      acc.ids.insert(id);
      acc.firing = acc.firing || alert.firing();
      acc.until = std::max(acc.until, until);
    }
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

std::string ExcludePrometheus(const std::vector<ExcludedHost>& hosts) {
  std::string out =
      "# HELP sentinel_exclude_host Hosts a restart should avoid (GET /v1/exclude), by reason.\n"
      "# TYPE sentinel_exclude_host gauge\n";
  for (const ExcludedHost& h : hosts) {
    const std::string host =
        absl::StrReplaceAll(h.host, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}});
    for (const std::string& reason : h.reasons) {
      absl::StrAppend(&out, "sentinel_exclude_host{host=\"", host, "\",reason=\"", reason,
                      "\"} 1\n");
    }
  }
  return out;
}

}  // namespace sentinel::collector
