// Alert keys (collector/aggregate/alerts/alert_key.h): each kind renders the id sentineld has
// always used, every rendered id parses back to its key, and nothing else parses.
#include "collector/aggregate/alerts/alert_key.h"

#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sentinel::collector {
namespace {

TEST(AlertKey, RendersTheIdsOfEachKind) {
  EXPECT_EQ(AlertKey::Straggler(0xab, 3).Id(), "straggler-0x00000000000000ab-r3");
  EXPECT_EQ(AlertKey::Hang(0x1234abcd5678ef90ULL).Id(), "hang-0x1234abcd5678ef90");
  EXPECT_EQ(AlertKey::GuardVerdict(AlertKind::kTransport, 1).Id(), "transport-0x0000000000000001");
  EXPECT_EQ(AlertKey::GuardVerdict(AlertKind::kPlacement, 2).Id(), "placement-0x0000000000000002");
  EXPECT_EQ(AlertKey::GuardVerdict(AlertKind::kLinkDegraded, 3).Id(),
            "link_degraded-0x0000000000000003");
  EXPECT_EQ(AlertKey::NicErrors("mlx5_0", 1).Id(), "nic_errors-mlx5_0-1");
  EXPECT_EQ(AlertKey::NicLink("mlx5_1", 2).Id(), "link_degraded-nic-mlx5_1-2");
  EXPECT_EQ(AlertKey::NetLink(0xfeedULL).Id(), "link_degraded-net-000000000000feed");
  EXPECT_EQ(AlertKey::WaitRank(0xab, 3).Id(), "straggler-wait-0x00000000000000ab-r3");
  EXPECT_EQ(AlertKey::SlowNode("node-b").Id(), "straggler-node-node-b");
  EXPECT_EQ(AlertKey::SlowNetwork(0xabcdef).Id(), "link_degraded-slow-0x0000000000abcdef");
}

TEST(AlertKey, KindOfAlertEachKeyRaises) {
  EXPECT_EQ(AlertKey::Straggler(1, 0).alert_kind(), AlertKind::kStraggler);
  EXPECT_EQ(AlertKey::Hang(1).alert_kind(), AlertKind::kHang);
  EXPECT_EQ(AlertKey::GuardVerdict(AlertKind::kPlacement, 1).alert_kind(), AlertKind::kPlacement);
  EXPECT_EQ(AlertKey::NicErrors("d", 1).alert_kind(), AlertKind::kNicErrors);
  EXPECT_EQ(AlertKey::NicLink("d", 1).alert_kind(), AlertKind::kLinkDegraded);
  EXPECT_EQ(AlertKey::NetLink(1).alert_kind(), AlertKind::kLinkDegraded);
  EXPECT_TRUE(AlertKey::NicErrors("d", 1).is_nic());
  EXPECT_TRUE(AlertKey::NicLink("d", 1).is_nic());
  EXPECT_FALSE(AlertKey::NetLink(1).is_nic());
  EXPECT_FALSE(AlertKey::GuardVerdict(AlertKind::kLinkDegraded, 1).is_nic());
  EXPECT_EQ(AlertKey::WaitRank(1, 0).alert_kind(), AlertKind::kStraggler);
  EXPECT_EQ(AlertKey::SlowNode("h").alert_kind(), AlertKind::kStraggler);
  EXPECT_EQ(AlertKey::SlowNetwork(1).alert_kind(), AlertKind::kLinkDegraded);
  EXPECT_TRUE(AlertKey::WaitRank(1, 0).is_wait());
  EXPECT_TRUE(AlertKey::SlowNode("h").is_wait());
  EXPECT_FALSE(AlertKey::Straggler(1, 0).is_wait());
  EXPECT_FALSE(AlertKey::SlowNetwork(1).is_wait());
  EXPECT_FALSE(AlertKey::SlowNetwork(1).is_nic());
}

TEST(AlertKey, EveryRenderedIdParsesBackToItsKey) {
  const std::vector<AlertKey> keys = {
      AlertKey::Straggler(0, 0),
      AlertKey::Straggler(UINT64_MAX, 16777215),
      AlertKey::Hang(0xdeadbeefULL),
      AlertKey::GuardVerdict(AlertKind::kTransport, 7),
      AlertKey::GuardVerdict(AlertKind::kPlacement, 8),
      AlertKey::GuardVerdict(AlertKind::kLinkDegraded, 9),
      AlertKey::NicErrors("mlx5_0", 1),
      AlertKey::NicErrors("dev-with-dashes", 12),  // the port is after the last dash
      AlertKey::NicLink("", 3),
      AlertKey::NetLink(0),
      AlertKey::NetLink(UINT64_MAX),
      AlertKey::WaitRank(0, 0),
      AlertKey::WaitRank(UINT64_MAX, 16777215),
      AlertKey::SlowNode("node-a"),
      AlertKey::SlowNode("0x0000000000000001-r2"),  // any host name is the rest of the id
      AlertKey::SlowNode(""),
      AlertKey::SlowNetwork(0),
      AlertKey::SlowNetwork(UINT64_MAX),
  };
  for (const AlertKey& key : keys) {
    const std::string id = key.Id();
    const std::optional<AlertKey> back = ParseAlertKey(id);
    ASSERT_TRUE(back.has_value()) << id;
    EXPECT_TRUE(*back == key) << id;
    EXPECT_TRUE(AlertIdIs(id, key.kind)) << id;
  }
}

// A key of `kind`; the switch has no default, so a kind added to the enum without a case here
// fails the build (-Wswitch, warnings are errors) instead of going untested.
AlertKey SampleKeyOf(AlertKeyKind kind) {
  switch (kind) {
    case AlertKeyKind::kStraggler:
      return AlertKey::Straggler(0x5, 2);
    case AlertKeyKind::kHang:
      return AlertKey::Hang(0x6);
    case AlertKeyKind::kGuardVerdict:
      return AlertKey::GuardVerdict(AlertKind::kLinkDegraded, 0x7);
    case AlertKeyKind::kNicErrors:
      return AlertKey::NicErrors("mlx5_2", 1);
    case AlertKeyKind::kNicLink:
      return AlertKey::NicLink("mlx5_3", 2);
    case AlertKeyKind::kNetLink:
      return AlertKey::NetLink(0x8);
    case AlertKeyKind::kWaitRank:
      return AlertKey::WaitRank(0x9, 4);
    case AlertKeyKind::kSlowNode:
      return AlertKey::SlowNode("node-c");
    case AlertKeyKind::kSlowNetwork:
      return AlertKey::SlowNetwork(0xa);
  }
  return AlertKey();
}

TEST(AlertKey, EveryKindRoundTripsAndIsNoOtherKind) {
  const AlertKeyKind kinds[] = {
      AlertKeyKind::kStraggler, AlertKeyKind::kHang,     AlertKeyKind::kGuardVerdict,
      AlertKeyKind::kNicErrors, AlertKeyKind::kNicLink,  AlertKeyKind::kNetLink,
      AlertKeyKind::kWaitRank,  AlertKeyKind::kSlowNode, AlertKeyKind::kSlowNetwork};
  for (AlertKeyKind kind : kinds) {
    const AlertKey key = SampleKeyOf(kind);
    ASSERT_EQ(key.kind, kind);
    const std::string id = key.Id();
    const std::optional<AlertKey> back = ParseAlertKey(id);
    ASSERT_TRUE(back.has_value()) << id;
    EXPECT_TRUE(*back == key) << id;
    EXPECT_EQ(back->Id(), id);
    for (AlertKeyKind other : kinds) {
      EXPECT_EQ(AlertIdIs(id, other), other == kind) << id;
    }
  }
}

TEST(AlertKey, GuardLinkDegradedIsNotTakenForANicOrNetLink) {
  EXPECT_EQ(ParseAlertKey("link_degraded-0x0000000000000003")->kind, AlertKeyKind::kGuardVerdict);
  EXPECT_EQ(ParseAlertKey("link_degraded-nic-mlx5_0-1")->kind, AlertKeyKind::kNicLink);
  EXPECT_EQ(ParseAlertKey("link_degraded-net-000000000000feed")->kind, AlertKeyKind::kNetLink);
  EXPECT_FALSE(AlertIdIs("link_degraded-nic-mlx5_0-1", AlertKeyKind::kNicErrors));
  EXPECT_FALSE(AlertIdIs("nic_errors-mlx5_0-1", AlertKeyKind::kNicLink));
  EXPECT_EQ(ParseAlertKey("link_degraded-slow-0x0000000000000003")->kind,
            AlertKeyKind::kSlowNetwork);
}

// The wait evidence's ids extend the straggler prefix: each is read as its own kind, with its
// fields, never as a straggler key (nor a straggler id as theirs).
TEST(AlertKey, WaitAndNodeIdsAreNotTakenForAStraggler) {
  const std::optional<AlertKey> wait = ParseAlertKey("straggler-wait-0x00000000000000ab-r3");
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(wait->kind, AlertKeyKind::kWaitRank);
  EXPECT_EQ(wait->comm_hash, 0xabu);
  EXPECT_EQ(wait->rank, 3);
  const std::optional<AlertKey> node = ParseAlertKey("straggler-node-node-b");
  ASSERT_TRUE(node.has_value());
  EXPECT_EQ(node->kind, AlertKeyKind::kSlowNode);
  EXPECT_EQ(node->host, "node-b");
  EXPECT_EQ(ParseAlertKey("straggler-0x00000000000000ab-r3")->kind, AlertKeyKind::kStraggler);
  EXPECT_FALSE(AlertIdIs("straggler-wait-0x00000000000000ab-r3", AlertKeyKind::kStraggler));
  EXPECT_FALSE(AlertIdIs("straggler-0x00000000000000ab-r3", AlertKeyKind::kWaitRank));
}

TEST(AlertKey, OnlyRenderedIdsParse) {
  for (const char* id : {
           "",
           "straggler-",
           "straggler-0x00000000000000AB-r3",   // upper-case hex is never rendered
           "straggler-0x00000000000000ab-r03",  // nor a leading zero
           "straggler-0x00000000000000ab-r+3",
           "straggler-0x00000000000000ab",
           "straggler-0xab-r3",
           "hang-0x123",
           "hang-00000000000000000000",
           "hang-0x0000000000000001 ",
           "transport-0x000000000000000g",
           "nvlink-0x0000000000000001",
           "nic_errors-mlx5_0",
           "nic_errors-mlx5_0-x",
           "link_degraded-nic-mlx5_0",
           "link_degraded-net-feed",
           "link_degraded-net-000000000000FEED",
           "straggler-wait-0x00000000000000ab",
           "straggler-wait-0xab-r3",
           "straggler-wait-0x00000000000000ab-r03",
           "link_degraded-slow-",
           "link_degraded-slow-0x0000000000ABCDEF",
           "link_degraded-slow-0000000000abcdef",
           "something-else",
       }) {
    EXPECT_FALSE(ParseAlertKey(id).has_value()) << id;
  }
}

}  // namespace
}  // namespace sentinel::collector
