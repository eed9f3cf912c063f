// The alert builders (collector/aggregate/alerts/): pure functions from the aggregator's state to
// alerts. The golden files and the aggregator tests cover their texts end to end; these pin the
// decisions each builder makes on its own: which NIC changes a poll makes and in what order, how
// a guard verdict's wire kind and ranks are read, and a join-based hang's source.
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "collector/aggregate/alerts/guard_verdict_alert.h"
#include "collector/aggregate/alerts/join_hang_alert.h"
#include "collector/aggregate/alerts/nic_alerts.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

int FirstErrorCounter() {
  for (int c = 0; c < kNicCounterCount; ++c) {
    if (NicCounterIsError(c)) return c;
  }
  return -1;
}

NicPortState Port(const std::string& layer, double rate, bool active) {
  NicPortState p;
  p.last.link_layer = layer;
  p.last.rate_gbps = rate;
  p.last.active = active;
  return p;
}

TEST(NicAlerts, PortByPortErrorsThenLinkInOrder) {
  NicState nic;
  const int err = FirstErrorCounter();
  ASSERT_GE(err, 0);
  NicPortState slow = Port("InfiniBand", 200, true);
  slow.error_polls = 2;
  slow.delta[static_cast<size_t>(err)] = 7;
  NicPortState fast = Port("InfiniBand", 400, true);
  fast.clean_polls = 2;
  nic.ports[{"mlx5_0", 1}] = slow;
  nic.ports[{"mlx5_1", 1}] = fast;
  std::set<std::string> live;
  const std::vector<AlertUpdate> u = NicAlertUpdates(nic, "node", "rb/", &live);
  ASSERT_EQ(u.size(), 4u);
  EXPECT_TRUE(u[0].fire);
  EXPECT_EQ(u[0].alert.id, "nic_errors-mlx5_0-1");
  EXPECT_EQ(u[0].alert.kind, AlertKind::kNicErrors);
  EXPECT_EQ(u[0].alert.summary, absl::StrCat("mlx5_0 port 1: ", NicCounterName(err),
                                             " grew by 7 (2 consecutive polls)"));
  EXPECT_EQ(u[0].alert.runbook, "rb/alert-nic_errors");
  EXPECT_TRUE(u[1].fire);
  EXPECT_EQ(u[1].alert.id, "link_degraded-nic-mlx5_0-1");
  EXPECT_EQ(u[1].alert.summary,
            "mlx5_0 port 1 runs at 200 Gb/s, the node's fastest InfiniBand port at 400");
  EXPECT_FALSE(u[2].fire);
  EXPECT_EQ(u[2].resolve_id, "nic_errors-mlx5_1-1");
  EXPECT_FALSE(u[3].fire);
  EXPECT_EQ(u[3].resolve_id, "link_degraded-nic-mlx5_1-1");
  EXPECT_EQ(live, (std::set<std::string>{"nic_errors-mlx5_0-1", "link_degraded-nic-mlx5_0-1",
                                         "nic_errors-mlx5_1-1", "link_degraded-nic-mlx5_1-1"}));
}

TEST(NicAlerts, OneErrorPollNeitherFiresNorResolves) {
  NicState nic;
  NicPortState p = Port("Ethernet", 100, true);
  p.error_polls = 1;
  nic.ports[{"eth", 2}] = p;
  std::set<std::string> live;
  const std::vector<AlertUpdate> u = NicAlertUpdates(nic, "node", "", &live);
  ASSERT_EQ(u.size(), 1u);  // only the link: alone at its rate, it is the fastest
  EXPECT_FALSE(u[0].fire);
  EXPECT_EQ(u[0].resolve_id, "link_degraded-nic-eth-2");
}

TEST(NicAlerts, AnInactivePortIsNeverTheFastestNorSlow) {
  NicState nic;
  nic.ports[{"a", 1}] = Port("InfiniBand", 100, true);
  nic.ports[{"b", 1}] = Port("InfiniBand", 400, false);
  std::set<std::string> live;
  for (const AlertUpdate& u : NicAlertUpdates(nic, "node", "", &live)) EXPECT_FALSE(u.fire);
}

SentinelWireVerdict Verdict(uint16_t kind, uint16_t outcome, int32_t rank) {
  SentinelWireVerdict v = testing::MakeVerdict(0xab, rank, 8, kind, outcome);
  std::snprintf(v.expected, sizeof(v.expected), "%s", "NET/IB");
  std::snprintf(v.found, sizeof(v.found), "%s", "NET/Socket");
  std::snprintf(v.evidence, sizeof(v.evidence), "%s", "line one\n\nline two\n");
  return v;
}

TEST(GuardVerdictAlert, WireKindsAndNothingElse) {
  AlertKind kind = AlertKind::kHang;
  EXPECT_TRUE(GuardVerdictKind(kSentinelVerdictTransport, &kind));
  EXPECT_EQ(kind, AlertKind::kTransport);
  EXPECT_TRUE(GuardVerdictKind(kSentinelVerdictPlacement, &kind));
  EXPECT_EQ(kind, AlertKind::kPlacement);
  EXPECT_TRUE(GuardVerdictKind(kSentinelVerdictLinkDegraded, &kind));
  EXPECT_EQ(kind, AlertKind::kLinkDegraded);
  EXPECT_FALSE(GuardVerdictKind(0, &kind));
  EXPECT_FALSE(GuardVerdictKind(4, &kind));
  // The wire field is 16 bits: 257 is no kind, not transport (1) cut to a byte.
  const SentinelWireVerdict v = Verdict(257, kSentinelOutcomeFail, 0);
  EXPECT_FALSE(GuardVerdictKind(v.kind, &kind));
}

TEST(GuardVerdictAlert, ListsOwnedRanksOnceSortedAndKeepsTheStart) {
  Alert existing;
  existing.id = "transport-0x00000000000000ab";
  existing.ranks = {5};
  existing.started_real_ns = 111;
  Alert a = GuardVerdictAlert(Verdict(kSentinelVerdictTransport, kSentinelOutcomeFail, 2),
                              AlertKind::kTransport, &existing, /*rank_owned=*/true, "node", 3,
                              "rb/", 999);
  EXPECT_EQ(a.id, "transport-0x00000000000000ab");
  EXPECT_EQ(a.ranks, (std::vector<int>{2, 5}));
  EXPECT_EQ(a.started_real_ns, 111);
  EXPECT_EQ(a.severity, AlertSeverity::kCritical);
  EXPECT_EQ(a.source, 3);
  EXPECT_EQ(a.host, "node");
  EXPECT_EQ(a.summary,
            "transport mismatch on comm 0x00000000000000ab (2 rank(s)): expected 'NET/IB', found "
            "'NET/Socket'");
  EXPECT_EQ(a.evidence["lines"], nlohmann::json::array({"line one", "line two"}));
  EXPECT_EQ(a.evidence["outcome"], "fail");
  EXPECT_EQ(a.runbook, "rb/alert-transport");

  // A rank the client does not own is not listed; a new alert starts now; warn is a warning.
  Alert b = GuardVerdictAlert(Verdict(kSentinelVerdictPlacement, kSentinelOutcomeWarn, 4),
                              AlertKind::kPlacement, nullptr, /*rank_owned=*/false, "node", 3,
                              "rb/", 999);
  EXPECT_EQ(b.id, "placement-0x00000000000000ab");
  EXPECT_TRUE(b.ranks.empty());
  EXPECT_EQ(b.started_real_ns, 999);
  EXPECT_EQ(b.severity, AlertSeverity::kWarning);
  EXPECT_EQ(b.evidence["outcome"], "warn");

  // An outcome the wire does not define is shown as such, never read past a table.
  const Alert c = GuardVerdictAlert(Verdict(kSentinelVerdictTransport, 9, 0), AlertKind::kTransport,
                                    nullptr, /*rank_owned=*/true, "node", 3, "rb/", 999);
  EXPECT_EQ(c.evidence["outcome"], "unknown");
}

TEST(JoinHangAlert, WithoutItsCommunicatorItHasNoSource) {
  HangSuspect h;
  h.comm_hash = 0x1;
  h.func = 0;
  h.seq = 9;
  h.arrived = {0, 1};
  h.missing = {2, 3};
  h.waiting_ns = 31000000000;
  Config config;
  config.hang_timeout_ns = 30000000000;
  config.runbook_base = "rb/";
  const Alert a = JoinHangAlert(h, nullptr, "node", config, 77);
  EXPECT_EQ(a.id, "hang-0x0000000000000001");
  EXPECT_EQ(a.source, -1);
  EXPECT_EQ(a.ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(a.started_real_ns, 77);
  EXPECT_EQ(a.evidence["source"], "join");
  EXPECT_EQ(a.summary.find(" on comm 0x0000000000000001: 2 local rank(s) arrived and rank(s) 2,3 "
                           "have not, for 31 s") != std::string::npos,
            true)
      << a.summary;
}

}  // namespace
}  // namespace sentinel::collector
