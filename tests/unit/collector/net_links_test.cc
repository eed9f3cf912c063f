// collector/aggregate/net_links: joining both ends of a link, the degraded-link detection (one slow
// pair among links of the same size class, named by both ends), and the bounded exports.
#include "collector/aggregate/net_links.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "collector/aggregate/aggregator.h"
#include "collector/export/net_links_export.h"

namespace sentinel::collector {
namespace {

SentinelWireNetConnStats Conn(uint64_t link, int is_send, uint32_t pid, uint64_t requests,
                              uint64_t mean_ns, int size_class = 3) {
  SentinelWireNetConnStats s;
  memset(&s, 0, sizeof(s));
  s.link_id = link;
  s.is_send = is_send;
  s.pid = pid;
  s.dev = 0;
  s.requests = requests;
  s.bytes = requests * 100000;
  s.latency_ns_sum = requests * mean_ns;
  s.latency_ns_max = mean_ns * 2;
  s.class_requests[size_class] = requests;
  s.class_latency_ns_sum[size_class] = requests * mean_ns;
  return s;
}

// Four links host-a -> host-b..e; link 4 (to host-e) is `slow_ns` per send.
NetLinks FourLinks(uint64_t slow_ns, uint64_t requests = 20) {
  NetLinks n;
  const char* peers[] = {"host-b", "host-c", "host-d", "host-e"};
  for (uint64_t l = 1; l <= 4; ++l) {
    uint64_t mean = l == 4 ? slow_ns : 100000 + l * 5000;
    n.OnConnStats("host-a", Conn(l, 1, 100, requests, mean), 1);
    n.OnConnStats(peers[l - 1], Conn(l, 0, 200 + static_cast<uint32_t>(l), requests, mean), 1);
  }
  return n;
}

TEST(NetLinks, JoinsBothEndsByLinkId) {
  NetLinks n = FourLinks(110000);
  ASSERT_EQ(n.links().size(), 4u);
  const NetLink& l = n.links().at(2);
  EXPECT_EQ(l.send.host, "host-a");
  EXPECT_EQ(l.recv.host, "host-c");
  EXPECT_EQ(l.recv.pid, 202u);
  EXPECT_EQ(l.send.stats.requests, 20u);
}

TEST(NetLinks, SlowPairIsDetectedAndNamed) {
  NetLinks n = FourLinks(2000000);  // 2 ms vs ~110 us
  auto degraded = n.DetectDegraded(NetLinkPolicy{});
  ASSERT_EQ(degraded.size(), 1u);
  EXPECT_EQ(degraded[0].link_id, 4u);
  EXPECT_EQ(degraded[0].send_host, "host-a");
  EXPECT_EQ(degraded[0].recv_host, "host-e");
  EXPECT_EQ(degraded[0].size_class, 3);
  EXPECT_EQ(degraded[0].links_compared, 4);
  auto alerts = LinkDegradedAlerts(degraded, "https://runbook/");
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].kind, AlertKind::kLinkDegraded);
  EXPECT_EQ(alerts[0].id, "link_degraded-net-0000000000000004");
  EXPECT_NE(alerts[0].summary.find("host-a (pid 100) -> host-e (pid 204)"), std::string::npos)
      << alerts[0].summary;
  EXPECT_EQ(alerts[0].evidence["recv_host"], "host-e");
}

TEST(NetLinks, NothingWhenLinksAgreeOrDataIsThin) {
  EXPECT_TRUE(FourLinks(130000).DetectDegraded(NetLinkPolicy{}).empty());
  // Too few requests of the class to take part.
  EXPECT_TRUE(FourLinks(2000000, 3).DetectDegraded(NetLinkPolicy{}).empty());
  // Different size classes are never compared with each other.
  NetLinks n;
  for (uint64_t l = 1; l <= 4; ++l) {
    n.OnConnStats("host-a", Conn(l, 1, 100, 20, l == 4 ? 4000000 : 100000, l == 4 ? 6 : 3), 1);
  }
  EXPECT_TRUE(n.DetectDegraded(NetLinkPolicy{}).empty());
}

TEST(NetLinks, ExportsAreBounded) {
  NetLinks n = FourLinks(2000000);
  SentinelWireNetDevice d;
  memset(&d, 0, sizeof(d));
  d.pid = 100;
  d.ptr_support = 0x3;
  d.speed_mbps = 400000;
  snprintf(d.name, sizeof(d.name), "mlx5_0");
  n.OnDevice("host-a", d);
  n.OnDevice("host-a", d);  // the same device again: one entry
  std::string prom;
  AppendNetLinksPrometheus(n, &prom);
  EXPECT_NE(prom.find("sentinel_net_send_requests_total{src_host=\"host-a\",dst_host=\"host-e\""),
            std::string::npos)
      << prom;
  EXPECT_NE(prom.find("sentinel_net_device_info{host=\"host-a\",dev=\"mlx5_0\",gdr=\"1\""),
            std::string::npos);
  EXPECT_EQ(prom.find("link_id"), std::string::npos);  // no per-link label
  nlohmann::json j = n.ToJson();
  EXPECT_EQ(j["devices"].size(), 1u);
  EXPECT_EQ(j["devices"][0]["gdr_offered"], true);
  EXPECT_EQ(j["links"].size(), 4u);
  EXPECT_EQ(j["links"][3]["recv"]["host"], "host-e");
}

}  // namespace
}  // namespace sentinel::collector
