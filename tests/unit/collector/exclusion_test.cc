// Node exclusion (collector/aggregate/exclusion.h) on a hand-built alert book: which kinds count,
// the hold after resolution, both ends of a degraded link, merging per host, the JSON and the
// Prometheus lines, and the config keys.
#include "collector/aggregate/exclusion.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "collector/aggregate/alert_book.h"
#include "collector/config/config.h"
#include "collector/export/prometheus_text.h"

namespace sentinel::collector {
namespace {

constexpr int64_t kSec = 1000000000LL;
constexpr int64_t kT0 = 1700000000LL * kSec;  // a real-time instant

Alert MakeAlert(const std::string& id, AlertKind kind, const std::string& host) {
  Alert a;
  a.id = id;
  a.kind = kind;
  a.host = host;
  a.summary = id;
  return a;
}

ExcludePolicy DefaultPolicy(int64_t hold_ns = 600 * kSec) {
  ExcludePolicy p;
  p.kinds = ParseExcludeKinds(kDefaultExcludeKinds).value();
  p.hold_ns = hold_ns;
  return p;
}

TEST(ExclusionTest, KindsParseAndPrint) {
  EXPECT_EQ(ExcludeKindsText(ParseExcludeKinds(kDefaultExcludeKinds).value()),
            "straggler,link_degraded,nic_errors");
  EXPECT_EQ(ParseExcludeKinds("none").value(), 0u);
  EXPECT_EQ(ExcludeKindsText(0), "none");
  EXPECT_EQ(
      ParseExcludeKinds(" hang , straggler ").value(),
      (1u << static_cast<int>(AlertKind::kHang)) | (1u << static_cast<int>(AlertKind::kStraggler)));
  EXPECT_FALSE(ParseExcludeKinds("straggler,slow").ok());
  EXPECT_FALSE(ParseExcludeKinds("").ok());
  EXPECT_FALSE(ParseExcludeKinds("straggler,").ok());
}

TEST(ExclusionTest, FiringAlertsOfCountedKindsListTheirHosts) {
  AlertBook book(3600 * kSec, 1024);
  ASSERT_TRUE(book.Fire(MakeAlert("straggler/c/3", AlertKind::kStraggler, "node-b"), kT0));
  ASSERT_TRUE(book.Fire(MakeAlert("nic/mlx5_0/1", AlertKind::kNicErrors, "node-a"), kT0));
  ASSERT_TRUE(book.Fire(MakeAlert("hang/c", AlertKind::kHang, "node-c"), kT0));  // not counted
  ASSERT_TRUE(book.Fire(MakeAlert("transport/c", AlertKind::kTransport, "node-d"), kT0));
  const auto hosts = DeriveExclusions(book, DefaultPolicy(), kT0 + kSec);
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].host, "node-a");
  EXPECT_EQ(hosts[0].reasons, std::vector<std::string>{"nic_errors"});
  EXPECT_EQ(hosts[0].alert_ids, std::vector<std::string>{"nic/mlx5_0/1"});
  EXPECT_TRUE(hosts[0].firing);
  EXPECT_EQ(hosts[1].host, "node-b");
  EXPECT_EQ(hosts[1].reasons, std::vector<std::string>{"straggler"});

  // A policy that counts hangs lists node-c too; "none" lists nobody.
  ExcludePolicy with_hang = DefaultPolicy();
  with_hang.kinds = ParseExcludeKinds("hang").value();
  const auto hang_hosts = DeriveExclusions(book, with_hang, kT0 + kSec);
  ASSERT_EQ(hang_hosts.size(), 1u);
  EXPECT_EQ(hang_hosts[0].host, "node-c");
  ExcludePolicy none = DefaultPolicy();
  none.kinds = 0;
  EXPECT_TRUE(DeriveExclusions(book, none, kT0 + kSec).empty());
}

TEST(ExclusionTest, ResolvedAlertHoldsTheHostForTheHoldOnly) {
  AlertBook book(3600 * kSec, 1024);
  ASSERT_TRUE(book.Fire(MakeAlert("straggler/c/1", AlertKind::kStraggler, "node-a"), kT0));
  ASSERT_TRUE(book.Resolve("straggler/c/1", ResolveReason::kCleared, kT0 + 10 * kSec));
  const ExcludePolicy p = DefaultPolicy(/*hold_ns=*/60 * kSec);
  auto hosts = DeriveExclusions(book, p, kT0 + 69 * kSec);
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_FALSE(hosts[0].firing);
  EXPECT_EQ(hosts[0].until_real_ns, kT0 + 70 * kSec);
  EXPECT_TRUE(DeriveExclusions(book, p, kT0 + 70 * kSec).empty());
  // Hold 0: gone as soon as it resolved.
  EXPECT_TRUE(DeriveExclusions(book, DefaultPolicy(0), kT0 + 11 * kSec).empty());
}

TEST(ExclusionTest, DegradedLinkListsBothEndsAndMergesPerHost) {
  AlertBook book(3600 * kSec, 1024);
  Alert link = MakeAlert("netlink/00000000000000ab", AlertKind::kLinkDegraded, "node-a");
  link.evidence = {{"send_host", "node-a"}, {"recv_host", "node-b"}};
  ASSERT_TRUE(book.Fire(link, kT0));
  Alert unknown_end = MakeAlert("netlink/00000000000000cd", AlertKind::kLinkDegraded, "node-c");
  unknown_end.evidence = {{"send_host", "node-c"}, {"recv_host", "?"}};
  ASSERT_TRUE(book.Fire(unknown_end, kT0));
  ASSERT_TRUE(book.Fire(MakeAlert("straggler/c/5", AlertKind::kStraggler, "node-b"), kT0));
  ASSERT_TRUE(book.Resolve("straggler/c/5", ResolveReason::kCleared, kT0 + kSec));
  const auto hosts = DeriveExclusions(book, DefaultPolicy(), kT0 + 2 * kSec);
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].host, "node-a");
  EXPECT_EQ(hosts[1].host, "node-b");
  EXPECT_EQ(hosts[1].reasons, (std::vector<std::string>{"link_degraded", "straggler"}));
  EXPECT_EQ(hosts[1].alert_ids,
            (std::vector<std::string>{"netlink/00000000000000ab", "straggler/c/5"}));
  EXPECT_TRUE(hosts[1].firing);  // the link alert still fires
  EXPECT_EQ(hosts[1].until_real_ns, 0);
  EXPECT_EQ(hosts[2].host, "node-c");  // "?" is not a host
}

TEST(ExclusionTest, JsonAndPrometheus) {
  AlertBook book(3600 * kSec, 1024);
  ASSERT_TRUE(book.Fire(MakeAlert("straggler/c/1", AlertKind::kStraggler, "node\"x"), kT0));
  ASSERT_TRUE(book.Fire(MakeAlert("nic/m/1", AlertKind::kNicErrors, "node-y"), kT0));
  ASSERT_TRUE(book.Resolve("nic/m/1", ResolveReason::kCleared, kT0));
  const ExcludePolicy p = DefaultPolicy(90 * kSec);
  const auto hosts = DeriveExclusions(book, p, kT0 + kSec);
  const nlohmann::json j = ExcludeJson(hosts, p);
  EXPECT_EQ(j["policy"]["kinds"], nlohmann::json({"straggler", "link_degraded", "nic_errors"}));
  EXPECT_EQ(j["policy"]["hold_s"], 90.0);
  ASSERT_EQ(j["hosts"].size(), 2u);
  EXPECT_EQ(j["hosts"][0]["host"], "node\"x");
  EXPECT_TRUE(j["hosts"][0]["until"].is_null());
  EXPECT_EQ(j["hosts"][1]["until"], "2023-11-14T22:14:50.000Z");
  EXPECT_EQ(j["hosts"][1]["alert_ids"], nlohmann::json({"nic/m/1"}));
  const std::string prom = ExcludePrometheus(hosts);
  EXPECT_NE(prom.find("# TYPE sentinel_exclude_host gauge\n"), std::string::npos);
  EXPECT_NE(prom.find("sentinel_exclude_host{host=\"node\\\"x\",reason=\"straggler\"} 1\n"),
            std::string::npos)
      << prom;
  EXPECT_NE(prom.find("sentinel_exclude_host{host=\"node-y\",reason=\"nic_errors\"} 1\n"),
            std::string::npos)
      << prom;
}

TEST(ExclusionTest, ConfigKeys) {
  Config c;
  EXPECT_EQ(c.exclude_kinds, kDefaultExcludeKinds);
  EXPECT_EQ(c.exclude_hold_ns, 1800 * kSec);
  EXPECT_TRUE(c.Set("exclude-kinds", "straggler,hang").ok());
  EXPECT_EQ(c.exclude_kinds, "straggler,hang");
  EXPECT_TRUE(c.Set("exclude_hold", "5m").ok());
  EXPECT_EQ(c.exclude_hold_ns, 300 * kSec);
  const absl::Status bad = c.Set("exclude-kinds", "stragler");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.message()).find("stragler"), std::string::npos);
  EXPECT_FALSE(c.Set("exclude-hold", "soon").ok());
}

}  // namespace
}  // namespace sentinel::collector
