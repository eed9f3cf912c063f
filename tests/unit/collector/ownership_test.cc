// The aggregator's ownership rules and per-peer bounds: a rank belongs to the client (SO_PEERCRED
// pid, uid) that announced it, a communicator to its uid; rank indices against the communicator's
// size; guard verdicts only for a communicator the client owns; firing alerts, ranks per alert and
// per-uid state bounded and handed back; a late rank that is busy outside NCCL is not acted on.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "collector/aggregate/aggregator.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

using testing::FakeClock;
using testing::MakeColl;
using testing::MakeCommInit;

constexpr uint64_t kComm = 0xC0FFEE0000000001ULL;
constexpr uint64_t kOther = 0xC0FFEE0000000002ULL;
constexpr int64_t kSec = 1000000000;
constexpr uint32_t kRogueUid = 4242;

class OwnershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.hang_timeout_ns = 30 * kSec;
    agg_ = std::make_unique<Aggregator>(config_, &clock_);
  }
  // A client: kernel pid 500 + client, the given uid; its hello claims pid 9 and host evil.
  void Accept(int client, uint32_t uid = 0) {
    agg_->NoteAccepted(client, static_cast<uint32_t>(500 + client), uid);
    SentinelWireHello hello = testing::MakeHello(9);
    std::strcpy(hello.host, "evil");
    agg_->OnHello(client, hello);
  }
  template <typename T>
  void Control(int client, uint16_t type, const T& body) {
    testing::DeliverControl(agg_.get(), client, type, body);
  }
  // The job: ranks 0..n-1 of kComm, rank r on client r + 1 (uid 0).
  void Job(int n) {
    for (int r = 0; r < n; ++r) {
      Accept(r + 1);
      Control(r + 1, kSentinelWireCommInit, MakeCommInit(kComm, r, n));
    }
  }
  void InFlight(int client, uint64_t comm, int rank, int nranks, uint64_t enq, uint64_t gpu,
                uint64_t done, int64_t since) {
    Control(client, kSentinelWireInFlight,
            testing::MakeInFlight(comm, rank, nranks, enq, gpu, done, since, clock_.MonoNs()));
  }
  // Rank `rank` of `uid`'s communicator `comm` (the job's uid 0 by default).
  const RankState* Rank(uint64_t comm, int rank, uint32_t uid = 0) {
    const RankState* out = nullptr;
    agg_->Read([&](const State& s) {
      auto it = s.ranks.find(RankKey{CommKey{uid, comm}, rank});
      out = it == s.ranks.end() ? nullptr : it->second.get();
    });
    return out;
  }
  Counters Count() {
    Counters c;
    agg_->Read([&](const State& s) { c = s.counters; });
    return c;
  }
  std::string Host() {
    std::string h;
    agg_->Read([&](const State& s) { h = s.host; });
    return h;
  }
  const Alert* Find(const std::string& id) {
    const Alert* out = nullptr;
    agg_->Read([&](const State& s) { out = s.alerts.Find(id); });
    return out;
  }
  UidUsage Usage(uint32_t uid) {
    UidUsage u;
    agg_->Read([&](const State& s) {
      auto it = s.uid_usage.find(uid);
      if (it != s.uid_usage.end()) u = it->second;
    });
    return u;
  }
  static SentinelWireVerdict Verdict(uint64_t comm, int rank) {
    SentinelWireVerdict v =
        testing::MakeVerdict(comm, rank, 4, kSentinelVerdictPlacement, kSentinelOutcomeFail);
    std::strcpy(v.found, "wrong NUMA node");
    return v;
  }

  FakeClock clock_;
  Config config_;
  std::unique_ptr<Aggregator> agg_;
};

TEST_F(OwnershipTest, IdentityIsTheKernelsAndHostIsThisNode) {
  Job(1);
  agg_->Read([&](const State& s) {
    const ProcessState& p = *s.processes.at(1);
    EXPECT_EQ(p.pid, 501u);
    EXPECT_EQ(p.claimed_pid, 9u);
    EXPECT_EQ(p.uid, 0u);
    EXPECT_EQ(p.host, s.host);
  });
  EXPECT_EQ(Rank(kComm, 0)->pid, 501u);
}

// An InFlight (or CommInit, or record) for rank 7 of a 4-rank communicator, carrying its own
// nranks 8, is checked against the communicator's size, even from the job's own uid.
TEST_F(OwnershipTest, RankIndexIsCheckedAgainstTheCommunicatorsSize) {
  Job(4);
  Accept(9);
  InFlight(9, kComm, 7, 8, 12, 12, 11, clock_.MonoNs() - 100 * kSec);
  Control(9, kSentinelWireCommInit, MakeCommInit(kComm, 7, 8));
  Control(9, kSentinelWireCommInit, MakeCommInit(kComm, 7, 4));
  const auto rec = MakeColl(kComm, 7, 8, 1, 1000, 10);
  agg_->OnRecords(9, &rec, 1);
  EXPECT_EQ(Rank(kComm, 7), nullptr);
  EXPECT_EQ(Count().refused_rank_index, 3u);  // the fourth fails its own check (7 >= 4)
  EXPECT_EQ(Count().records_invalid, 1u);
  agg_->Read([&](const State& s) { EXPECT_EQ(s.comms.at(CommKey{0, kComm})->nranks, 4); });
}

// CommEnd, records and InFlight for a rank come only from its client, even of the same uid; a
// gone client's rank may be taken over by the same uid (a reconnect), never by another.
TEST_F(OwnershipTest, OnlyItsClientWritesARank) {
  Job(2);
  Accept(9);              // same uid, another process
  Accept(10, kRogueUid);  // another user
  SentinelWireCommEnd end{};
  end.comm_hash = kComm;
  end.rank = 0;
  Control(9, kSentinelWireCommEnd, end);
  Control(10, kSentinelWireCommEnd, end);
  EXPECT_TRUE(Rank(kComm, 0)->active);
  EXPECT_FALSE(Rank(kComm, 0)->ended);
  InFlight(9, kComm, 0, 2, 5, 5, 4, clock_.MonoNs());
  EXPECT_FALSE(Rank(kComm, 0)->inflight.has_state);
  // The other user's CommEnd names rank 0 of its own uid's communicator of that hash: none.
  EXPECT_EQ(Count().refused_not_owner, 2u);
  Control(1, kSentinelWireCommEnd, end);  // its own client
  EXPECT_TRUE(Rank(kComm, 0)->ended);
  // Rank 1's process goes; another user cannot take the rank (its announcement makes a
  // communicator of its own), the same user can.
  agg_->OnDisconnect(2);
  Control(10, kSentinelWireCommInit, MakeCommInit(kComm, 1, 2));
  EXPECT_EQ(Rank(kComm, 1)->client, -1);
  EXPECT_EQ(Rank(kComm, 1, kRogueUid)->client, 10);
  Control(9, kSentinelWireCommInit, MakeCommInit(kComm, 1, 2));
  EXPECT_EQ(Rank(kComm, 1)->client, 9);
  // Another user's communicator of its own is fine, and is its own.
  Control(10, kSentinelWireCommInit, MakeCommInit(kOther, 0, 2));
  agg_->Read([&](const State& s) {
    EXPECT_EQ(s.comms.at(CommKey{kRogueUid, kOther})->uid, kRogueUid);
  });
}

// A guard verdict needs a communicator the client announced: one that overtook its CommInit
// waits for it; one for somebody else's communicator never fires. The alert names this node.
TEST_F(OwnershipTest, VerdictsNeedTheirClientsCommunicator) {
  Job(2);
  Accept(9, kRogueUid);
  Control(9, kSentinelWireVerdict, Verdict(kComm, 0));   // the job's communicator
  Control(3, kSentinelWireVerdict, Verdict(kOther, 0));  // before its CommInit
  Accept(3);
  Control(3, kSentinelWireVerdict, Verdict(kOther, 0));
  const std::string id = "placement-" + CommLabel(kOther);
  EXPECT_EQ(Find(id), nullptr) << "fired before the client announced the communicator";
  Control(3, kSentinelWireCommInit, MakeCommInit(kOther, 0, 4));
  const Alert* a = Find(id);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->firing());
  EXPECT_EQ(a->host, Host());
  EXPECT_EQ(a->ranks, std::vector<int>{0});
  EXPECT_EQ(Find("placement-" + CommLabel(kComm)), nullptr);
  agg_->OnDisconnect(9);  // its pending verdict is dropped with it
  EXPECT_EQ(Find("placement-" + CommLabel(kComm)), nullptr);
}

TEST(AlertBookBoundsTest, FiringAlertsAndRanksPerAlertAreBounded) {
  AlertBook book(3600 * kSec, 16, /*max_firing=*/40, /*max_firing_per_source=*/8);
  for (int i = 0; i < 20; ++i) {
    Alert a;
    a.id = "a" + std::to_string(i);
    a.source = 1;
    book.Fire(a, kSec);
  }
  EXPECT_EQ(book.FiringOf(1), 8u);
  EXPECT_EQ(book.refused(), 12u);
  book.Resolve("a0", ResolveReason::kCleared, 2 * kSec);
  EXPECT_EQ(book.FiringOf(1), 7u);
  Alert again;
  again.id = "a19";
  again.source = 1;
  EXPECT_TRUE(book.Fire(again, 3 * kSec)) << "room again after a resolution";
  for (int i = 0; i < 60; ++i) {  // sentineld's own (source -1): only the total bound
    Alert a;
    a.id = "own" + std::to_string(i);
    book.Fire(a, kSec);
  }
  EXPECT_EQ(book.FiringCount(), 40);
  Alert wide;
  wide.id = "a0";
  wide.source = 2;
  for (int r = 0; r < 100; ++r) wide.ranks.push_back(r);
  book.Resolve("own0", ResolveReason::kCleared, kSec);
  ASSERT_TRUE(book.Fire(wide, kSec));
  EXPECT_EQ(book.Find("a0")->ranks.size(), AlertBook::kMaxRanksPerAlert);
  EXPECT_EQ(book.Find("a0")->evidence["ranks_omitted"], 100 - AlertBook::kMaxRanksPerAlert);
}

// A communicator evicted for the uid's budget takes its alerts with it (resolved, ended): they
// would otherwise fire for good and hold the firing bounds.
TEST_F(OwnershipTest, EvictedCommunicatorsAlertsResolve) {
  config_.max_comms = 8;  // 4 per uid
  agg_ = std::make_unique<Aggregator>(config_, &clock_);
  Accept(1, kRogueUid);
  for (uint64_t k = 0; k < 12; ++k) {
    Control(1, kSentinelWireCommInit, MakeCommInit(0xAB00 + k, 0, 2));
    Control(1, kSentinelWireVerdict, Verdict(0xAB00 + k, 0));
  }
  int firing = 0;
  agg_->Read([&](const State& s) { firing = s.alerts.FiringCount(); });
  EXPECT_EQ(firing, 4) << "one per communicator it still holds";
  // Which communicators go is the eviction's choice (hash order); each one evicted took its alert
  // with it as `ended` (or the alert was then dropped by the bound on resolved alerts per client).
  int ended = 0;
  for (uint64_t k = 0; k < 12; ++k) {
    const Alert* a = Find("placement-" + CommLabel(0xAB00 + k));
    if (a == nullptr || a->firing()) continue;
    EXPECT_EQ(a->resolve_reason, ResolveReason::kEnded) << CommLabel(0xAB00 + k);
    ++ended;
  }
  EXPECT_GE(ended, 1);
}

TEST(AlertBookBoundsTest, ResolvedAlertsPerSourceAreBounded) {
  AlertBook book(3600 * kSec, 1024);
  for (int i = 0; i < 20; ++i) {
    Alert a;
    a.id = "s" + std::to_string(i);
    a.source = 7;
    book.Fire(a, kSec);
    book.Resolve(a.id, ResolveReason::kEnded, 2 * kSec);
  }
  EXPECT_EQ(book.all().size(), AlertBook::kMaxResolvedPerSource);
  EXPECT_NE(book.Find("s19"), nullptr);  // the newest are kept
  EXPECT_EQ(book.Find("s0"), nullptr);
  EXPECT_EQ(book.evicted(), 20 - AlertBook::kMaxResolvedPerSource);
}

// One uid's state is charged to it; what an ended communicator held comes back (its join windows
// at once, the communicator itself beyond the per-uid bound of ended ones).
TEST_F(OwnershipTest, UidBudgetIsChargedAndEndedStateComesBack) {
  for (int c = 1; c <= 40; ++c) {
    Accept(c, kRogueUid);
    const uint64_t comm = 0xF000 + static_cast<uint64_t>(c);
    Control(c, kSentinelWireCommInit, MakeCommInit(comm, 0, 2));
    const auto rec = MakeColl(comm, 0, 2, 1, 1000, 10);
    agg_->OnRecords(c, &rec, 1);
  }
  const UidUsage live = Usage(kRogueUid);
  EXPECT_EQ(live.ranks, 40);
  EXPECT_EQ(live.comms, 40);
  EXPECT_GT(live.bytes, 40 * config_.history_per_rank * static_cast<int64_t>(sizeof(RankSample)));
  for (int c = 1; c <= 40; ++c) agg_->OnDisconnect(c);
  agg_->Tick();
  const UidUsage ended = Usage(kRogueUid);
  EXPECT_EQ(ended.comms, Aggregator::kEndedCommsPerUid);
  EXPECT_LT(ended.bytes, live.bytes / 20) << "ended state kept " << ended.bytes << " bytes";
  agg_->Read([&](const State& s) {
    for (const auto& [hash, comm] : s.comms) {
      for (const auto& ring : comm->rings) EXPECT_EQ(ring, nullptr);
      EXPECT_EQ(comm->members[0]->history.capacity(), 1u);  // the one sample it holds
    }
  });
}

TEST_F(OwnershipTest, UidBudgetRefusesRanksBeyondItsShare) {
  config_.max_ranks = 64;
  config_.max_ranks_per_client = 16;
  agg_ = std::make_unique<Aggregator>(config_, &clock_);
  for (int c = 1; c <= 4; ++c) {
    Accept(10 + c, kRogueUid);
    for (int r = 0; r < 16; ++r) {
      Control(10 + c, kSentinelWireCommInit, MakeCommInit(kOther, (c - 1) * 16 + r, 64));
    }
  }
  EXPECT_EQ(Usage(kRogueUid).ranks, 32);  // half of --max-ranks
  EXPECT_EQ(Count().refused_budget, 32u);
  Job(4);  // another user's job still gets every rank
  for (int r = 0; r < 4; ++r) EXPECT_NE(Rank(kComm, r), nullptr) << r;
}

// A rank that has not reached the stuck collective but whose process keeps working outside NCCL
// (records on its other communicator) is busy_outside_nccl, not never_launched, and nobody is told
// to abort for it; once its progress stops it is never_launched and the hang is acted on.
TEST_F(OwnershipTest, BusyOutsideNcclIsNamedAndNotActedOn) {
  Job(4);
  Control(4, kSentinelWireCommInit, MakeCommInit(kOther, 0, 1));  // rank 3's process, comm 2
  const int64_t since = clock_.MonoNs();
  uint64_t seq = 0;
  auto second = [&](bool rank3_busy) {
    for (int r = 0; r < 3; ++r) InFlight(r + 1, kComm, r, 4, 12, 12, 11, since);
    InFlight(4, kComm, 3, 4, 11, 11, 11, 0);
    if (rank3_busy) {
      const auto rec = MakeColl(kOther, 0, 1, seq++, clock_.MonoNs(), 1000);
      agg_->OnRecords(4, &rec, 1);
    }
    clock_.Advance(kSec);
    agg_->Tick();
  };
  for (int s = 0; s < 40; ++s) second(true);
  const Alert* a = Find("hang-" + CommLabel(kComm));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->evidence["ranks"][3]["role"], "busy_outside_nccl");
  EXPECT_NE(a->summary.find("busy_outside_nccl"), std::string::npos) << a->summary;
  EXPECT_TRUE(agg_->TakeOutbound().empty()) << "told to abort for a rank that is alive";
  for (int s = 0; s < 10; ++s) second(false);
  EXPECT_EQ(Find("hang-" + CommLabel(kComm))->evidence["ranks"][3]["role"], "never_launched");
  EXPECT_EQ(agg_->TakeOutbound().size(), 3u) << "the 3 waiting ranks are told";
}

}  // namespace
}  // namespace sentinel::collector
