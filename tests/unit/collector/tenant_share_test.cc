// Several users on one aggregator: a communicator is (owner uid, hash), so a second user
// announcing the same hash gets a communicator of its own; the firing-alert table is shared per
// uid (client verdicts hold at most half of it, a uid below an equal share takes room from the
// uid holding the most); and the API's snapshots keep only what their viewer may see.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/api_viewer.h"
#include "collector/aggregate/snapshot_source.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

using testing::FakeClock;
using testing::MakeColl;
using testing::MakeCommInit;

constexpr uint64_t kHash = 0xC411D00000000001ULL;
constexpr int64_t kSec = 1000000000;
constexpr int64_t kMs = 1000000;
constexpr uint32_t kVictim = 4242;
constexpr uint32_t kOther = 4243;

class TenantShareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.hang_timeout_ns = 1 * kSec;
    agg_ = std::make_unique<Aggregator>(config_, &clock_);
  }
  void Accept(int client, uint32_t uid) {
    agg_->NoteAccepted(client, static_cast<uint32_t>(500 + client), uid);
    agg_->OnHello(client, testing::MakeHello(9));
  }
  template <typename T>
  void Control(int client, uint16_t type, const T& body) {
    testing::DeliverControl(agg_.get(), client, type, body);
  }
  // Ranks 0 and 1 of kHash on clients `first` and `first + 1`, of `uid`; 8 collectives, rank 1
  // arriving `late_ms` after rank 0 in each.
  void Job(int first, uint32_t uid, int64_t late_ms) {
    for (int r = 0; r < 2; ++r) {
      Accept(first + r, uid);
      Control(first + r, kSentinelWireCommInit, MakeCommInit(kHash, r, 2));
    }
    const int64_t base = clock_.MonoNs();
    for (uint64_t seq = 0; seq < 8; ++seq) {
      for (int r = 0; r < 2; ++r) {
        const int64_t start = base + static_cast<int64_t>(seq) * 100 * kMs;
        const int64_t at = start + (r == 1 ? late_ms * kMs : 0);
        const auto rec = MakeColl(kHash, r, 2, seq, at, start + 50 * kMs - at);
        agg_->OnRecords(first + r, &rec, 1);
      }
    }
  }

  FakeClock clock_;
  Config config_;
  std::unique_ptr<Aggregator> agg_;
};

// Before, the first announcement made the hash its uid's: the second user's CommInit and records
// were refused as not_owner and its job went unjudged.
TEST_F(TenantShareTest, SameHashOfTwoUsersIsTwoCommunicators) {
  Job(1, kOther, 0);    // announced first, balanced
  Job(3, kVictim, 40);  // rank 1 late by 40 ms
  agg_->Read([&](const State& s) {
    EXPECT_EQ(s.counters.refused_not_owner, 0u);
    ASSERT_EQ(s.comms.size(), 2u);
    for (uint32_t uid : {kVictim, kOther}) {
      auto it = s.comms.find(CommKey{uid, kHash});
      ASSERT_NE(it, s.comms.end()) << uid;
      EXPECT_EQ(it->second->uid, uid);
      EXPECT_EQ(it->second->members.size(), 2u);
      EXPECT_EQ(it->second->joined, 8u) << "each user's records joined with its own only";
      for (const RankState* m : it->second->members) EXPECT_EQ(m->uid, uid);
    }
    const RankState* late = s.ranks.at(RankKey{CommKey{kVictim, kHash}, 1}).get();
    const RankState* even = s.ranks.at(RankKey{CommKey{kOther, kHash}, 1}).get();
    ASSERT_GT(late->lateness.count, 0u);
    EXPECT_GT(late->lateness.sum / static_cast<double>(late->lateness.count), 0.030);
    EXPECT_LT(even->lateness.sum, 0.001);
  });
}

// A hang in the victim's communicator fires with the victim's uid; the other user's communicator
// of the same hash (healthy) neither hides it nor resolves it.
TEST_F(TenantShareTest, HangAlertsOfOneHashAreTheOwners) {
  Job(1, kOther, 0);
  Job(3, kVictim, 0);
  for (int r = 0; r < 2; ++r) {  // the other user's job goes on
    const auto rec = MakeColl(kHash, r, 2, 8, clock_.MonoNs(), kMs);
    agg_->OnRecords(1 + r, &rec, 1);
  }
  const auto rec = MakeColl(kHash, 0, 2, 8, clock_.MonoNs(), kMs);  // the victim's rank 1: never
  agg_->OnRecords(3, &rec, 1);
  clock_.Advance(2 * kSec);
  agg_->Tick();
  agg_->Read([&](const State& s) {
    const Alert* a = s.alerts.Find(kVictim, "hang-0xc411d00000000001");
    ASSERT_NE(a, nullptr);
    EXPECT_TRUE(a->firing());
    EXPECT_EQ(a->owner_uid, kVictim);
    EXPECT_EQ(s.alerts.Find(kOther, "hang-0xc411d00000000001"), nullptr);
  });
}

Alert Verdict(int i, uint32_t uid, int source) {
  Alert a;
  a.id = "placement-" + std::to_string(i);
  a.owner_uid = uid;
  a.source_uid = uid;
  a.source = source;
  a.client_verdict = true;
  return a;
}

// One uid's verdicts from many connections: before, they took all 1,024 rows and a hang alert of
// another user's (sentineld's own judgement) was refused.
TEST(AlertShareTest, VerdictsHoldHalfTheTableAndNeverKeepJudgedAlertsOut) {
  AlertBook book(3600 * kSec, 64);
  for (int i = 0; i < 1280; ++i) book.Fire(Verdict(i, kOther, i / 32), kSec);
  EXPECT_EQ(book.FiringOfUid(kOther), AlertBook::kMaxFiring / 2);
  // Judged alerts of the same user fill the rest ...
  for (int i = 0; i < 600; ++i) {
    Alert a;
    a.id = "straggler-" + std::to_string(i);
    a.owner_uid = kOther;
    a.source_uid = kOther;
    a.source = 100 + i / 32;
    book.Fire(a, kSec);
  }
  EXPECT_EQ(book.FiringCount(), static_cast<int>(AlertBook::kMaxFiring));
  // ... and the victim's hang still fires: it takes a verdict's room first.
  Alert hang;
  hang.id = "hang-0x1";
  hang.kind = AlertKind::kHang;
  hang.owner_uid = kVictim;
  hang.source_uid = kVictim;
  hang.source = 999;
  ASSERT_TRUE(book.Fire(hang, 2 * kSec));
  EXPECT_TRUE(book.IsFiring(kVictim, "hang-0x1"));
  EXPECT_EQ(book.FiringOfUid(kOther), AlertBook::kMaxFiring - 1);
  EXPECT_EQ(book.FiringCount(), static_cast<int>(AlertBook::kMaxFiring));
}

// The victim's own verdict, with the verdicts' half full of another user's: below an equal share,
// it takes room from the uid holding the most; the heavy uid gets no more room than it has.
TEST(AlertShareTest, AUidBelowItsShareTakesRoomFromTheHeaviest) {
  AlertBook book(3600 * kSec, 64);
  for (int i = 0; i < 600; ++i) book.Fire(Verdict(i, kOther, i / 32), kSec);
  ASSERT_EQ(book.FiringOfUid(kOther), AlertBook::kMaxFiring / 2);
  EXPECT_FALSE(book.Fire(Verdict(9999, kOther, 500), kSec)) << "the heaviest takes nothing";
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(book.Fire(Verdict(i, kVictim, 900), 2 * kSec));
  EXPECT_EQ(book.FiringOfUid(kVictim), 3u);
  EXPECT_EQ(book.FiringOfUid(kOther), AlertBook::kMaxFiring / 2 - 3);
  // The same id for two owners: two alerts.
  EXPECT_TRUE(book.IsFiring(kVictim, "placement-0"));
  EXPECT_TRUE(book.IsFiring(kOther, "placement-5"));
}

// The API's data filter: a viewer of one uid sees its own processes, ranks, collectives, hang
// suspects and alerts only; node-level figures stay; a viewer who sees all sees both.
TEST_F(TenantShareTest, SnapshotsKeepOnlyWhatTheViewerMaySee) {
  Job(1, kOther, 0);
  Job(3, kVictim, 0);
  for (int client : {1, 3}) {  // one hang suspect each: rank 0 reached collective 8, rank 1 not
    const auto rec = MakeColl(kHash, 0, 2, 8, clock_.MonoNs(), kMs);
    agg_->OnRecords(client, &rec, 1);
  }
  clock_.Advance(2 * kSec);
  agg_->Tick();
  const ApiViewer victim = ApiViewer::OfUid(kVictim);
  const RanksSnapshot ranks = agg_->SnapshotRanks(victim);
  ASSERT_EQ(ranks.processes.size(), 2u);
  for (const auto& p : ranks.processes) {
    EXPECT_EQ(p.uid, kVictim);
    for (const auto& c : p.comms) EXPECT_EQ(c.uid, kVictim);
  }
  EXPECT_EQ(agg_->SnapshotRanks(ApiViewer::Everything()).processes.size(), 4u);
  EXPECT_EQ(agg_->SnapshotRanks(ApiViewer()).processes.size(), 0u) << "an unknown viewer";

  const TelemetrySnapshot tel = agg_->SnapshotTelemetry(3600 * kSec, clock_.MonoNs(), victim);
  ASSERT_EQ(tel.collectives.size(), 8u);
  for (const auto& c : tel.collectives) EXPECT_EQ(c.uid, kVictim);
  ASSERT_EQ(tel.hang_suspects.size(), 1u);
  EXPECT_EQ(tel.hang_suspects[0].uid, kVictim);
  EXPECT_GT(tel.counters.records, 32u) << "node-level counters stay";

  const TraceSnapshot trace = agg_->SnapshotTrace(0, victim);
  ASSERT_EQ(trace.ranks.size(), 2u);
  for (const auto& r : trace.ranks) EXPECT_EQ(r.uid, kVictim);
  for (const auto& p : trace.processes) EXPECT_EQ(p.uid, kVictim);
  ASSERT_EQ(trace.hangs.size(), 1u);
  for (const Alert& a : trace.alerts) EXPECT_EQ(a.owner_uid, kVictim) << a.id;

  const std::vector<Alert> alerts = agg_->SnapshotAlerts(victim);
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].owner_uid, kVictim);
  EXPECT_EQ(agg_->SnapshotAlerts(ApiViewer::Everything()).size(), 2u);
  EXPECT_EQ(agg_->SnapshotAlerts(ApiViewer::OfUid(1)).size(), 0u);
  // A node-level alert from sentineld's own measurements is everyone's.
  Alert nic;
  nic.id = "nic_errors-mlx5_0-1";
  EXPECT_TRUE(ViewerSeesAlert(victim, nic));
  nic.source = 7;
  nic.source_uid = kOther;
  EXPECT_FALSE(ViewerSeesAlert(victim, nic)) << "raised on another user's client's data";
}

}  // namespace
}  // namespace sentinel::collector
