// Two users on one sentineld (the .deb set-up: --allow-group), against the REAL daemon: clients
// connect from child processes dropped to uids 4242 (the victim) and 4243 (another user). A
// communicator is the (owner uid, hash) pair, so the other user announcing the victim's split
// children first takes nothing of them; and the firing-alert table is shared per uid, so the
// other user's guard verdicts never keep the victim's hang alert out. Skips unless run as root.
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "tests/integration/collector/cross_uid_util.h"
#include "tests/integration/collector/daemon_fixture.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::testing {
namespace {

constexpr int64_t kMs = 1000000;
// A split child's hash, as the other user computes it from the parent's (public on /v1/ranks).
constexpr uint64_t kChild = 0xC411D00000000001ULL;

class TenantOwnerTest : public DaemonFixture {
 protected:
  void SetUp() override { SetUpForOtherUsers("to connect clients as uids 4242 and 4243"); }
  // The firing alerts of `kind`, of communicator `comm` when not empty.
  static int Firing(const nlohmann::json& alerts, const std::string& kind,
                    const std::string& comm = "") {
    int n = 0;
    for (const auto& a : alerts["alerts"]) {
      n += a["state"] == "firing" && a["kind"] == kind && (comm.empty() || a["comm"] == comm);
    }
    return n;
  }

  std::vector<std::unique_ptr<WireClient>> clients_;
};

// The other user announces both ranks of the victim's split child first and streams balanced
// records on it. The victim's own job on that hash then runs as the victim's communicator: its
// records are joined (none refused as not_owner), its late rank 1 is alerted with the victim's
// uid, and nothing of the other user's records is mixed into it. Before, the child belonged to
// whoever announced it first: every frame of the victim's was refused and nothing was judged.
TEST_F(TenantOwnerTest, PreannouncedSplitChildIsStillTheVictimsAndJudged) {
  StartAllowingGroup({"--straggler-learn", "4", "--straggler-evidence", "0"});
  for (int r = 0; r < 2; ++r) {
    clients_.push_back(ClientAsUser(static_cast<int>(kAttacker), static_cast<uint32_t>(5000 + r)));
    ASSERT_TRUE(clients_.back()->Send(Frame(kSentinelWireCommInit, MakeCommInit(kChild, r, 2))));
  }
  // Balanced records: were they joined with the victim's, rank 1 would look less late.
  const int64_t base = MonoNow() - 60000 * kMs;
  for (int r = 0; r < 2; ++r) {
    Bytes b;
    for (uint64_t seq = 0; seq < 12; ++seq) {
      const int64_t at = base + static_cast<int64_t>(seq) * 100 * kMs;
      const auto rec = MakeColl(kChild, r, 2, seq, at, 50 * kMs);
      AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
    }
    ASSERT_TRUE(clients_[static_cast<size_t>(r)]->Send(b));
  }
  WaitFor("/v1/ranks", [](const nlohmann::json& j) {
    int n = 0;
    for (const auto& p : j["ranks"]) {
      for (const auto& c : p["comms"]) n += c["collectives"] == 12 ? 1 : 0;
    }
    return n == 2;
  });
  StreamStragglerJob(&clients_, kChild, static_cast<int>(kVictim));
  const std::string id = "straggler-" + std::string("0xc411d00000000001") + "-r1";
  const nlohmann::json alerts =
      WaitFor("/v1/alerts", [&](const nlohmann::json& j) { return Firing(j, "straggler") > 0; });
  ASSERT_EQ(Firing(alerts, "straggler"), 1)
      << "the victim's late rank is unseen: " << alerts.dump();
  for (const auto& a : alerts["alerts"]) {
    if (a["kind"] != "straggler") continue;
    EXPECT_EQ(a["id"], id);
    EXPECT_EQ(a["uid"], kVictim) << "the alert is the victim's communicator's";
  }
  // Each user's two ranks of the hash, each with its own 12 collectives joined.
  const nlohmann::json ranks = GetJson("/v1/ranks");
  int victim_ranks = 0;
  int other_ranks = 0;
  for (const auto& p : ranks["ranks"]) {
    for (const auto& c : p["comms"]) {
      if (c["comm"] != "0xc411d00000000001") continue;
      EXPECT_EQ(c["uid"], p["uid"]) << p.dump();
      EXPECT_EQ(c["collectives"], 12) << p.dump();
      (p["uid"] == kVictim ? victim_ranks : other_ranks) += 1;
    }
  }
  EXPECT_EQ(victim_ranks, 2) << ranks.dump();
  EXPECT_EQ(other_ranks, 2) << ranks.dump();
  EXPECT_EQ(Metric("sentinel_frames_refused_total{reason=\"not_owner\"}"), 0);
  // /metrics keeps the two apart: one series per (comm, uid, rank), a scrape without duplicates.
  for (uint32_t uid : {kVictim, kAttacker}) {
    EXPECT_EQ(Metric("sentinel_rank_up{comm=\"0xc411d00000000001\",uid=\"" + std::to_string(uid) +
                     "\",rank=\"1\"}"),
              1)
        << "uid " << uid;
  }
}

// The other user raises failing guard verdicts of the 3 kinds on 512 of its own communicators
// (its share of --max-comms) from 32 connections: 1,536 alerts, 32 firing per connection (the
// per-connection bound). Then the victim's job hangs: rank 2 of 3 never
// reaches collective 5. The victim's hang alert fires (in /v1/alerts and /metrics), and the other
// user's verdicts hold at most half of the table. Before, the verdicts filled all 1,024 rows and
// the hang alert was refused (frames_refused{reason="alert_bound"}).
TEST_F(TenantOwnerTest, AnotherUsersVerdictsNeverKeepTheVictimsHangAlertOut) {
  StartAllowingGroup({"--hang-timeout", "500ms"});
  constexpr int kConnections = 32;
  constexpr int kPerConnection = 16;
  for (int c = 0; c < kConnections; ++c) {
    clients_.push_back(ClientAsUser(static_cast<int>(kAttacker), static_cast<uint32_t>(6000 + c)));
    Bytes b;
    for (int k = 0; k < kPerConnection; ++k) {
      const uint64_t comm = 0xBAD0000000000000ULL + static_cast<uint64_t>(c * kPerConnection + k);
      const auto init = MakeCommInit(comm, 0, 2);
      AppendFrame(&b, kSentinelWireCommInit, &init, sizeof(init));
      for (uint16_t kind :
           {kSentinelVerdictPlacement, kSentinelVerdictTransport, kSentinelVerdictLinkDegraded}) {
        SentinelWireVerdict v = MakeVerdict(comm, 0, 2, kind, kSentinelOutcomeFail);
        std::snprintf(v.found, sizeof(v.found), "%s", "wrong");
        AppendFrame(&b, kSentinelWireVerdict, &v, sizeof(v));
      }
    }
    ASSERT_TRUE(clients_.back()->Send(b));
  }
  // Every verdict was taken or refused: the table is as full as the other user can make it.
  auto verdicts = [](const nlohmann::json& j) {
    return Firing(j, "placement") + Firing(j, "transport") + Firing(j, "link_degraded");
  };
  WaitFor("/v1/alerts", [&](const nlohmann::json& j) { return verdicts(j) >= 512; });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the last connections' frames
  const int others = verdicts(GetJson("/v1/alerts"));
  EXPECT_LE(others, 512) << "client verdicts hold at most half of the firing table";
  // The victim's job: 3 ranks, 0 and 1 reach collective 5, rank 2 never does.
  constexpr uint64_t kJob = 0x5EED000000000033ULL;
  for (int r = 0; r < 3; ++r) {
    clients_.push_back(ClientAsUser(static_cast<int>(kVictim), static_cast<uint32_t>(7000 + r)));
    ASSERT_TRUE(clients_.back()->Send(Frame(kSentinelWireCommInit, MakeCommInit(kJob, r, 3))));
  }
  const size_t first = clients_.size() - 3;
  const int64_t now = MonoNow();
  for (int r = 0; r < 2; ++r) {
    const auto rec = MakeColl(kJob, r, 3, 5, now - 10 * kMs, kMs);
    ASSERT_TRUE(clients_[first + static_cast<size_t>(r)]->Send(Frame(kSentinelWireColl, rec)));
  }
  const std::string job = "0x5eed000000000033";
  const nlohmann::json alerts =
      WaitFor("/v1/alerts", [&](const nlohmann::json& j) { return Firing(j, "hang", job) == 1; });
  ASSERT_EQ(Firing(alerts, "hang", job), 1) << "the victim's hang is unseen";
  for (const auto& a : alerts["alerts"]) {
    if (a["kind"] == "hang") {
      EXPECT_EQ(a["uid"], kVictim) << a.dump();
    }
  }
  EXPECT_GE(Metric("sentinel_alerts_firing{kind=\"hang\"}"), 1);
}

}  // namespace
}  // namespace sentinel::testing
