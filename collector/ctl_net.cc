// `sentinelctl net` tables; see ctl_net.h.
#include "collector/ctl_net.h"

#include <set>

#include "absl/strings/str_format.h"

#include "collector/ctl_text.h"

namespace sentinel::ctl {
namespace {

// Link ids of firing link_degraded alerts (evidence.link_id, the same hex as the telemetry's).
std::set<std::string> DegradedLinks(const nlohmann::json& alerts) {
  std::set<std::string> out;
  if (!alerts.contains("alerts") || !alerts["alerts"].is_array()) return out;
  for (const auto& a : alerts["alerts"]) {
    if (a.value("kind", "") != "link_degraded" || a.value("state", "") != "firing") continue;
    const auto ev = a.value("evidence", nlohmann::json::object());
    if (ev.contains("link_id") && ev["link_id"].is_string()) out.insert(ev["link_id"]);
  }
  return out;
}

std::string End(const nlohmann::json& e) {
  if (e.is_null()) return "?";
  return absl::StrFormat("%s:%s/%s", Shown(e, "host", "?"), Shown(e, "pid", "0"),
                         Shown(e, "dev_name", "?"));
}

std::string Bytes(double b) {
  if (b >= 1e9) return absl::StrFormat("%.2fG", b / 1e9);
  if (b >= 1e6) return absl::StrFormat("%.2fM", b / 1e6);
  if (b >= 1e3) return absl::StrFormat("%.1fK", b / 1e3);
  return absl::StrFormat("%.0f", b);
}

std::string Us(double ns) { return absl::StrFormat("%.1fus", ns / 1e3); }

}  // namespace

nlohmann::json NetJson(const nlohmann::json& telemetry, const nlohmann::json& alerts) {
  nlohmann::json net = telemetry.value("net", nlohmann::json::object());
  std::set<std::string> degraded = DegradedLinks(alerts);
  if (net.contains("links") && net["links"].is_array()) {
    for (auto& l : net["links"]) l["degraded"] = degraded.count(l.value("link_id", "")) > 0;
  }
  return net;
}

std::string NetTables(const nlohmann::json& telemetry, const nlohmann::json& alerts) {
  nlohmann::json net = NetJson(telemetry, alerts);
  const nlohmann::json devices = net.value("devices", nlohmann::json::array());
  const nlohmann::json links = net.value("links", nlohmann::json::array());
  if (devices.empty() && links.empty()) {
    return "no net plugin data (is NCCL_NET_PLUGIN=sentinel set with SENTINEL_NET_WRAP?)\n";
  }
  std::string out =
      absl::StrFormat("DEVICES (%d)\n%-16s %-8s %-4s %-12s %-10s %-5s %-9s %s\n", devices.size(),
                      "HOST", "PID", "DEV", "NAME", "PLUGIN", "GDR", "SPEED", "PCI");
  for (const auto& d : devices) {
    out += absl::StrFormat("%-16s %-8s %-4s %-12s %-10s %-5s %-9s %s\n", Shown(d, "host"),
                           Shown(d, "pid", "0"), Shown(d, "dev", "0"), Shown(d, "name"),
                           Shown(d, "plugin"), d.value("gdr_offered", false) ? "yes" : "no",
                           absl::StrFormat("%gGb/s", d.value("speed_mbps", 0) / 1000.0),
                           Shown(d, "pci_path"));
  }
  int ndegraded = 0;
  for (const auto& l : links) ndegraded += l.value("degraded", false) ? 1 : 0;
  out += absl::StrFormat(
      "\nLINKS (%d, %d degraded)\n%-16s %-28s %-28s %-9s %-6s %-10s %-10s %-10s %-4s %s\n",
      links.size(), ndegraded, "LINK", "SEND (host:pid/dev)", "RECV (host:pid/dev)", "BYTES",
      "REQS", "LAT_MEAN", "LAT_MAX", "RATE", "ERR", "STATE");
  for (const auto& l : links) {
    const nlohmann::json s = l.value("send", nlohmann::json());
    const nlohmann::json r = l.value("recv", nlohmann::json());
    const nlohmann::json& side = s.is_null() ? r : s;  // the send side times the link
    double bytes = side.value("bytes", 0.0);
    double reqs = side.value("requests", 0.0);
    double mean = side.value("mean_latency_ns", 0.0);
    // Effective rate while requests were in flight: bytes over the summed request latency.
    std::string rate = reqs > 0 && mean > 0 ? absl::StrFormat("%.2fGb/s", bytes * 8 / (reqs * mean))
                                            : std::string("-");
    uint64_t errors = (s.is_null() ? 0 : s.value("errors", uint64_t{0})) +
                      (r.is_null() ? 0 : r.value("errors", uint64_t{0}));
    out += absl::StrFormat("%-16s %-28s %-28s %-9s %-6.0f %-10s %-10s %-10s %-4d %s\n",
                           Shown(l, "link_id"), End(s), End(r), Bytes(bytes), reqs, Us(mean),
                           Us(side.value("max_latency_ns", 0.0)), rate, errors,
                           l.value("degraded", false) ? "DEGRADED" : "ok");
  }
  return out;
}

}  // namespace sentinel::ctl
