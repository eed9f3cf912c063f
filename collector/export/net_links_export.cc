// The net plugin links' /metrics families: see net_links_export.h.
#include "collector/export/net_links_export.h"

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"

#include "collector/export/prometheus_family.h"

namespace sentinel::collector {
namespace {

std::string BoundedName(const char* s, size_t n) { return std::string(s, strnlen(s, n)); }

// The send ends summed per (src_host, dst_host, dev), keyed by their rendered labels.
struct LinkSums {
  double bytes = 0;
  double requests = 0;
  double errors = 0;
  double latency_ns = 0;
};

std::map<std::string, LinkSums> SumsByHostPair(const NetLinks& net) {
  std::map<std::string, LinkSums> by_pair;
  for (const auto& [id, l] : net.links()) {
    if (!l.send.present) continue;
    LinkSums& s = by_pair[PromLabels(
        {{"src_host", l.send.host}, {"dst_host", l.recv.host}, {"dev", l.send.dev_name}})];
    s.bytes += static_cast<double>(l.send.stats.bytes);
    s.requests += static_cast<double>(l.send.stats.requests);
    s.errors += static_cast<double>(l.send.stats.errors);
    s.latency_ns += static_cast<double>(l.send.stats.latency_ns_sum);
  }
  return by_pair;
}

void AppendDeviceInfo(const NetLinks& net, std::string* out) {
  PromFamily f(out, "sentinel_net_device_info", PromType::kGauge,
               "Devices the net plugin offers (value 1).");
  std::map<std::string, int> seen;  // one series per label set
  for (const NetDeviceInfo& info : net.devices()) {
    const SentinelWireNetDevice& d = info.device;
    const std::string labels = PromLabels({{"host", info.host},
                                           {"dev", BoundedName(d.name, sizeof(d.name))},
                                           {"gdr", (d.ptr_support & 0x2) != 0 ? "1" : "0"},
                                           {"speed_mbps", absl::StrCat(d.speed_mbps)}});
    if (seen[labels]++ == 0) f.Add(labels, 1);
  }
}

}  // namespace

void AppendNetLinksPrometheus(const NetLinks& net, std::string* out) {
  const std::map<std::string, LinkSums> by_pair = SumsByHostPair(net);
  struct Sum {
    const char* name;
    const char* help;
    double (*value)(const LinkSums& s);
  };
  static constexpr Sum kSums[] = {
      {"sentinel_net_send_bytes_total", "Bytes sent through the wrapped net plugin.",
       [](const LinkSums& s) { return s.bytes; }},
      {"sentinel_net_send_requests_total", "Completed send requests.",
       [](const LinkSums& s) { return s.requests; }},
      {"sentinel_net_send_latency_seconds_total", "Sum of isend-to-completion latencies.",
       [](const LinkSums& s) { return s.latency_ns / 1e9; }},
      {"sentinel_net_errors_total", "Errors the real net plugin returned.",
       [](const LinkSums& s) { return s.errors; }},
  };
  for (const Sum& sum : kSums) {
    PromFamily f(out, sum.name, PromType::kCounter, sum.help);
    for (const auto& [labels, s] : by_pair) f.AddSixDigits(labels, sum.value(s));
  }
  AppendDeviceInfo(net, out);
}

}  // namespace sentinel::collector
