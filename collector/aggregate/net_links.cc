// Net plugin links and their degraded-link detection: see net_links.h.
#include "collector/aggregate/net_links.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/alerts/alert_key.h"

namespace sentinel::collector {
namespace {

std::string Bounded(const char* s, size_t n) { return std::string(s, strnlen(s, n)); }

const char* const kClassNames[SENTINEL_WIRE_NET_SIZE_CLASSES] = {"lt4K", "lt16K", "lt64K", "lt256K",
                                                                 "lt1M", "lt4M",  "lt16M", "ge16M"};

double ClassMean(const SentinelWireNetConnStats& s, int c) {
  return s.class_requests[c] == 0 ? 0.0
                                  : static_cast<double>(s.class_latency_ns_sum[c]) /
                                        static_cast<double>(s.class_requests[c]);
}

}  // namespace

void NetLinks::OnDevice(const std::string& host, const SentinelWireNetDevice& d) {
  for (NetDeviceInfo& info : devices_) {
    if (info.host == host && info.device.pid == d.pid && info.device.dev == d.dev) {
      info.device = d;
      return;
    }
  }
  if (devices_.size() >= kMaxDevices) {
    ++evicted_;
    return;
  }
  devices_.push_back({host, d});
}

bool NetLinks::OnConnStats(const std::string& host, const SentinelWireNetConnStats& s,
                           int64_t now_mono_ns, int client) {
  auto it = links_.find(s.link_id);
  if (it != links_.end()) {
    const NetEnd& e = s.is_send != 0 ? it->second.send : it->second.recv;
    if (e.present && e.client != client) return false;
  }
  if (it == links_.end()) {
    if (links_.size() >= kMaxLinks) {
      // Drop the link updated longest ago.
      auto oldest =
          std::min_element(links_.begin(), links_.end(), [](const auto& a, const auto& b) {
            return a.second.last_update_mono_ns < b.second.last_update_mono_ns;
          });
      links_.erase(oldest);
      ++evicted_;
    }
    it = links_.emplace(s.link_id, NetLink{}).first;
    it->second.link_id = s.link_id;
  }
  NetLink& link = it->second;
  NetEnd& end = s.is_send != 0 ? link.send : link.recv;
  end.client = client;
  end.host = host;
  end.pid = s.pid;
  end.dev = s.dev;
  end.stats = s;
  end.present = true;
  end.dev_name.clear();
  for (const NetDeviceInfo& info : devices_) {
    if (info.host == host && info.device.pid == s.pid && info.device.dev == s.dev) {
      end.dev_name = Bounded(info.device.name, sizeof(info.device.name));
    }
  }
  link.last_update_mono_ns = now_mono_ns;
  return true;
}

std::vector<DegradedLink> NetLinks::DetectDegraded(const NetLinkPolicy& policy) const {
  std::map<uint64_t, DegradedLink> worst;  // link -> its worst class
  for (int c = 0; c < SENTINEL_WIRE_NET_SIZE_CLASSES; ++c) {
    std::vector<std::pair<double, const NetLink*>> means;
    for (const auto& [id, link] : links_) {
      if (!link.send.present || link.send.stats.class_requests[c] < policy.min_requests) continue;
      means.emplace_back(ClassMean(link.send.stats, c), &link);
    }
    if (static_cast<int>(means.size()) < policy.min_links) continue;
    std::vector<double> sorted;
    for (const auto& m : means) sorted.push_back(m.first);
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    const double median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    for (const auto& [mean, link] : means) {
      if (mean <= policy.factor * median || mean - median < policy.min_excess_ns) continue;
      DegradedLink d;
      d.link_id = link->link_id;
      d.send_client = link->send.client;
      d.send_host = link->send.host;
      d.send_pid = link->send.pid;
      d.recv_host = link->recv.present ? link->recv.host : "?";
      d.recv_pid = link->recv.pid;
      d.size_class = c;
      d.mean_latency_ns = mean;
      d.median_of_links_ns = median;
      d.links_compared = static_cast<int>(n);
      auto w = worst.find(d.link_id);
      if (w == worst.end() ||
          mean / median > w->second.mean_latency_ns / w->second.median_of_links_ns) {
        worst[d.link_id] = d;
      }
    }
  }
  std::vector<DegradedLink> out;
  for (auto& [id, d] : worst) out.push_back(d);
  return out;
}

nlohmann::json NetLinks::ToJson() const {
  nlohmann::json devices = nlohmann::json::array();
  for (const NetDeviceInfo& info : devices_) {
    const SentinelWireNetDevice& d = info.device;
    devices.push_back({{"host", info.host},
                       {"pid", d.pid},
                       {"dev", d.dev},
                       {"name", Bounded(d.name, sizeof(d.name))},
                       {"pci_path", Bounded(d.pci_path, sizeof(d.pci_path))},
                       {"plugin", Bounded(d.plugin_name, sizeof(d.plugin_name))},
                       {"net_api_version", d.wrapped_version},
                       {"gdr_offered", (d.ptr_support & 0x2) != 0},
                       {"ptr_support", d.ptr_support},
                       {"speed_mbps", d.speed_mbps},
                       {"port", d.port},
                       {"max_comms", d.max_comms}});
  }
  nlohmann::json links = nlohmann::json::array();
  for (const auto& [id, l] : links_) {
    auto end = [](const NetEnd& e) {
      nlohmann::json by_class = nlohmann::json::object();
      for (int c = 0; c < SENTINEL_WIRE_NET_SIZE_CLASSES; ++c) {
        if (e.stats.class_requests[c] == 0) continue;
        by_class[kClassNames[c]] = {{"requests", e.stats.class_requests[c]},
                                    {"mean_latency_ns", ClassMean(e.stats, c)}};
      }
      return nlohmann::json{
          {"host", e.host},
          {"pid", e.pid},
          {"dev", e.dev},
          {"dev_name", e.dev_name},
          {"bytes", e.stats.bytes},
          {"requests", e.stats.requests},
          {"errors", e.stats.errors},
          {"mean_latency_ns", e.stats.requests == 0 ? 0.0
                                                    : static_cast<double>(e.stats.latency_ns_sum) /
                                                          static_cast<double>(e.stats.requests)},
          {"max_latency_ns", e.stats.latency_ns_max},
          {"by_size", by_class}};
    };
    nlohmann::json j = {{"link_id", absl::StrFormat("%016x", id)}};
    if (l.send.present) j["send"] = end(l.send);
    if (l.recv.present) j["recv"] = end(l.recv);
    links.push_back(j);
  }
  return {{"devices", devices}, {"links", links}, {"evicted", evicted_}};
}

std::vector<Alert> LinkDegradedAlerts(const std::vector<DegradedLink>& degraded,
                                      const std::string& runbook_base) {
  std::vector<Alert> out;
  for (const DegradedLink& d : degraded) {
    Alert a;
    a.id = AlertKey::NetLink(d.link_id).Id();
    a.kind = AlertKind::kLinkDegraded;
    a.severity = AlertSeverity::kWarning;
    a.host = d.send_host;
    a.source = d.send_client;
    a.summary = absl::StrFormat(
        "net link %s (pid %u) -> %s (pid %u): sends of %s take %.0f us on average, %.1fx the "
        "median of %d links (%.0f us)",
        d.send_host, d.send_pid, d.recv_host, d.recv_pid, kClassNames[d.size_class],
        d.mean_latency_ns / 1e3, d.mean_latency_ns / d.median_of_links_ns, d.links_compared,
        d.median_of_links_ns / 1e3);
    a.evidence = {{"link_id", absl::StrFormat("%016x", d.link_id)},
                  {"send_host", d.send_host},
                  {"send_pid", d.send_pid},
                  {"recv_host", d.recv_host},
                  {"recv_pid", d.recv_pid},
                  {"size_class", kClassNames[d.size_class]},
                  {"mean_latency_ns", d.mean_latency_ns},
                  {"median_of_links_ns", d.median_of_links_ns},
                  {"links_compared", d.links_compared}};
    a.runbook = absl::StrCat(runbook_base, "alert-link_degraded");
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace sentinel::collector
