// The detection units alone: the hang detector's culprit classification, the alert book's
// lifecycle (resolve reasons, retention, change queue), and the aggregator's in-flight path.
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/alert_book.h"
#include "collector/aggregate/hang_detector.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

constexpr int64_t kSec = 1000000000LL;
constexpr uint64_t kComm = 0x1234ULL;

InFlightView View(int rank, uint64_t enq, uint64_t gpu, uint64_t done, int64_t since, int64_t now) {
  InFlightView v;
  v.rank = rank;
  v.has_state = true;
  v.last_update_ns = now;
  v.enqueued = enq;
  v.gpu_started = gpu;
  v.completed = done;
  v.oldest_since_ns = enq > done ? since : 0;
  v.oldest_seq = 7;
  v.oldest_func = kSentinelFuncAllReduce;
  return v;
}

TEST(HangDetectorTest, NamesEachCulpritKind) {
  const int64_t now = 100 * kSec;
  HangParams p;
  p.timeout_ns = 30 * kSec;
  std::vector<InFlightView> ranks = {
      View(0, 10, 10, 9, now - 31 * kSec, now),                            // waiting inside #10
      View(1, 10, 10, 9, now - 31 * kSec, now), View(2, 9, 9, 9, 0, now),  // never launched #10
      View(3, 10, 9, 9, now - 31 * kSec, now),  // launched, kernel not started
      View(4, 9, 9, 8, now - 40 * kSec, now),   // gone
  };
  ranks[4].connected = false;
  const HangVerdict v = EvaluateHang(ranks, 5, now, p);
  ASSERT_TRUE(v.hung);
  EXPECT_EQ(v.ordinal, 10u);
  EXPECT_EQ(v.seq, 7u);
  EXPECT_EQ(v.culprits, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(v.waiting, (std::vector<int>{0, 1}));
  EXPECT_EQ(v.ranks[2].role, HangRole::kNeverLaunched);
  EXPECT_EQ(v.ranks[3].role, HangRole::kLaunchedKernelNotStarted);
  EXPECT_EQ(v.ranks[4].role, HangRole::kGone);
  EXPECT_EQ(v.ranks[4].completed, 8u);
  EXPECT_FALSE(v.outside_node);
}

// The verdict names the collective as most stuck ranks issued it, whatever order the ranks come
// in: here the odd one (rank 2, AllGather seq 0) comes first.
TEST(HangDetectorTest, TheCollectiveIsTheOneMostStuckRanksIssued) {
  const int64_t now = 100 * kSec;
  HangParams p;
  p.timeout_ns = 30 * kSec;
  std::vector<InFlightView> ranks;
  for (int r : {2, 0, 1, 3}) {
    ranks.push_back(View(r, 4, 4, 3, now - 31 * kSec, now));
    ranks.back().oldest_seq = r == 2 ? 0 : 3;
    ranks.back().oldest_func = r == 2 ? kSentinelFuncAllGather : kSentinelFuncAllReduce;
  }
  HangVerdict v = EvaluateHang(ranks, 4, now, p);
  ASSERT_TRUE(v.hung);
  EXPECT_EQ(v.seq, 3u);
  EXPECT_EQ(v.func, kSentinelFuncAllReduce);
  // Two against two: the lowest rank's.
  ranks[2].oldest_seq = 0;  // rank 1
  ranks[2].oldest_func = kSentinelFuncAllGather;
  v = EvaluateHang(ranks, 4, now, p);
  EXPECT_EQ(v.seq, 3u);
  EXPECT_EQ(v.func, kSentinelFuncAllReduce);
}

TEST(HangDetectorTest, NotBeforeTheTimeoutAndSilentRankIsGone) {
  const int64_t now = 100 * kSec;
  HangParams p;
  p.timeout_ns = 30 * kSec;
  p.silent_ns = 5 * kSec;
  std::vector<InFlightView> ranks = {View(0, 3, 3, 2, now - 29 * kSec, now),
                                     View(1, 2, 2, 2, 0, now - 6 * kSec)};
  EXPECT_FALSE(EvaluateHang(ranks, 2, now, p).hung);
  const HangVerdict v = EvaluateHang(ranks, 2, now + 2 * kSec, p);
  ASSERT_TRUE(v.hung);
  EXPECT_EQ(v.culprits, std::vector<int>{1});
  EXPECT_EQ(v.ranks[1].role, HangRole::kGone);
}

TEST(HangDetectorTest, AllLocalRanksStuckMeansARankOutsideThisNode) {
  const int64_t now = 100 * kSec;
  HangParams p;
  std::vector<InFlightView> ranks = {View(0, 5, 5, 4, now - 31 * kSec, now),
                                     View(1, 5, 5, 4, now - 31 * kSec, now)};
  HangVerdict v = EvaluateHang(ranks, 16, now, p);
  ASSERT_TRUE(v.hung);
  EXPECT_TRUE(v.culprits.empty());
  EXPECT_TRUE(v.outside_node);
  v = EvaluateHang(ranks, 2, now, p);  // the whole communicator is here: not outside
  EXPECT_FALSE(v.outside_node);
}

TEST(AlertBookTest, ResolveReasonsRetentionAndChanges) {
  AlertBook book(10 * kSec, 100);
  Alert a;
  a.id = "x";
  a.kind = AlertKind::kHang;
  a.comm = "c";
  EXPECT_TRUE(book.Fire(a, 1 * kSec));
  EXPECT_FALSE(book.Fire(a, 2 * kSec)) << "refresh, not a new alert";
  EXPECT_EQ(book.Find("x")->started_real_ns, 1 * kSec);
  a.id = "y";
  book.Fire(a, 3 * kSec);
  EXPECT_TRUE(book.Resolve("x", ResolveReason::kCleared, 4 * kSec));
  EXPECT_FALSE(book.Resolve("x", ResolveReason::kCleared, 4 * kSec));
  EXPECT_EQ(book.ResolveIf([](const Alert& al) { return al.comm == "c"; }, ResolveReason::kEnded,
                           5 * kSec),
            1);
  EXPECT_EQ(book.Find("y")->resolve_reason, ResolveReason::kEnded);
  EXPECT_EQ(book.FiringCount(), 0);
  EXPECT_EQ(book.TakeChanges().size(), 4u);  // fired x, fired y, resolved x, resolved y
  EXPECT_TRUE(book.TakeChanges().empty());
  EXPECT_EQ(book.Expire(13 * kSec), 0u) << "x resolved 9 s ago: kept";
  EXPECT_EQ(book.Expire(14 * kSec), 1u);
  EXPECT_EQ(book.Find("x"), nullptr);
  EXPECT_NE(book.Find("y"), nullptr);
  EXPECT_EQ(book.Expire(15 * kSec), 1u);
  EXPECT_EQ(book.evicted(), 2u);
  EXPECT_STREQ(ResolveReasonName(ResolveReason::kEnded), "ended");
  EXPECT_STREQ(AlertKindName(AlertKind::kLinkDegraded), "link_degraded");
}

TEST(AlertBookTest, CountBoundEvictsOldestResolved) {
  AlertBook book(3600 * kSec, 2);
  for (int i = 0; i < 4; ++i) {
    Alert a;
    a.id = std::to_string(i);
    book.Fire(a, kSec);
    book.Resolve(a.id, ResolveReason::kCleared, kSec);
  }
  EXPECT_EQ(book.all().size(), 2u);
  EXPECT_EQ(book.Find("0"), nullptr);
  EXPECT_EQ(book.evicted(), 2u);
}

// The aggregator's in-flight path: frames in, hang alert out, cleared and ended.
class InFlightAggregatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.hang_timeout_ns = 30 * kSec;
    agg_ = std::make_unique<Aggregator>(config_, &clock_);
    for (int r = 0; r < 4; ++r) {
      agg_->NoteAccepted(r + 1, static_cast<uint32_t>(1000 + r), 0);
      agg_->OnHello(r + 1, testing::MakeHello(static_cast<uint32_t>(1000 + r)));
    }
  }
  void InFlight(int rank, uint64_t enq, uint64_t gpu, uint64_t done, int64_t since,
                int nranks = 4) {
    SentinelWireInFlight in =
        testing::MakeInFlight(kComm, rank, nranks, enq, gpu, done, since, clock_.MonoNs());
    in.oldest_seq = 41;
    in.oldest_func = kSentinelFuncAllGather;
    testing::DeliverControl(agg_.get(), rank + 1, kSentinelWireInFlight, in);
  }
  // Every rank reports each second for `seconds`; rank 3 as given.
  void Hang(int seconds, uint64_t r3_enq, uint64_t r3_gpu, bool r3_reports = true) {
    if (since_ == 0) since_ = clock_.MonoNs();
    for (int s = 0; s < seconds; ++s) {
      for (int r = 0; r < 3; ++r) InFlight(r, 12, 12, 11, since_);
      if (r3_reports) InFlight(3, r3_enq, r3_gpu, 11, since_);
      clock_.Advance(kSec);
      agg_->Tick();
    }
  }
  const Alert* HangAlert() {
    const Alert* out = nullptr;
    agg_->Read([&](const State& s) { out = s.alerts.Find("hang-" + CommLabel(kComm)); });
    return out;
  }
  testing::FakeClock clock_;
  Config config_;
  std::unique_ptr<Aggregator> agg_;
  int64_t since_ = 0;  // when the stuck collective was enqueued
};

TEST_F(InFlightAggregatorTest, NeverLaunchedRankIsNamedWithinTheTimeout) {
  Hang(29, 11, 11);
  EXPECT_EQ(HangAlert(), nullptr) << "not before the timeout";
  Hang(1, 11, 11);
  const Alert* a = HangAlert();
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->firing());
  EXPECT_EQ(a->ranks, std::vector<int>{3});
  EXPECT_EQ(a->evidence["ranks"][3]["role"], "never_launched");
  EXPECT_EQ(a->evidence["func"], "AllGather");
  EXPECT_EQ(a->evidence["seq"], 41);
  EXPECT_EQ(a->evidence["waiting_ranks"], nlohmann::json({0, 1, 2}));
  EXPECT_NE(a->summary.find("rank 3 never_launched"), std::string::npos) << a->summary;
  // The collective completes everywhere: cleared.
  for (int r = 0; r < 4; ++r) InFlight(r, 12, 12, 12, 0);
  agg_->Tick();
  EXPECT_EQ(HangAlert()->resolve_reason, ResolveReason::kCleared);
}

TEST_F(InFlightAggregatorTest, KernelNotStartedAndGoneAreNamed) {
  Hang(32, 12, 11);
  ASSERT_NE(HangAlert(), nullptr);
  EXPECT_EQ(HangAlert()->evidence["ranks"][3]["role"], "launched_kernel_not_started");
  agg_->OnDisconnect(4);  // rank 3's process dies
  agg_->Tick();
  EXPECT_EQ(HangAlert()->evidence["ranks"][3]["role"], "gone");
  EXPECT_EQ(HangAlert()->evidence["ranks"][3]["enqueued"], 12);
  EXPECT_EQ(HangAlert()->evidence["ranks"][3]["gpu_started"], 11);
  // Every process gone: the communicator ended.
  for (int c = 1; c <= 3; ++c) agg_->OnDisconnect(c);
  agg_->Tick();
  EXPECT_FALSE(HangAlert()->firing());
  EXPECT_EQ(HangAlert()->resolve_reason, ResolveReason::kEnded);
}

TEST_F(InFlightAggregatorTest, SilentRankIsGone) {
  Hang(3, 11, 11);
  Hang(30, 11, 11, /*r3_reports=*/false);
  ASSERT_NE(HangAlert(), nullptr);
  EXPECT_EQ(HangAlert()->evidence["ranks"][3]["role"], "gone");
}

TEST_F(InFlightAggregatorTest, WaitingOnARankOutsideThisNode) {
  const int64_t since = clock_.MonoNs();
  for (int s = 0; s < 32; ++s) {
    for (int r = 0; r < 4; ++r) InFlight(r, 12, 12, 11, since, /*nranks=*/8);
    clock_.Advance(kSec);
    agg_->Tick();
  }
  ASSERT_NE(HangAlert(), nullptr);
  EXPECT_TRUE(HangAlert()->ranks.empty());
  EXPECT_EQ(HangAlert()->evidence["outside_node"], true);
  EXPECT_NE(HangAlert()->summary.find("waiting on a rank outside this node"), std::string::npos);
}

}  // namespace
}  // namespace sentinel::collector
