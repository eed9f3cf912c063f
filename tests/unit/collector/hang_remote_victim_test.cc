// A hang whose culprit is on another node, as this node sees it. In the usual layout (tensor
// parallel inside the node, data parallel across nodes) the rank that waits in a data-parallel
// collective for a rank of another node never reaches the next tensor-parallel collective, and
// its node's other ranks wait there for it. That rank is a victim: the tensor-parallel alert must
// name no local culprit (and so never act), and say the wait is on a rank outside this node.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/hang_detector.h"
#include "collector/aggregate/metrics_snapshot.h"
#include "collector/aggregate/snapshot.h"
#include "collector/export/metrics_select.h"
#include "collector/export/prometheus_text.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

using testing::FakeClock;
using testing::MakeCommInit;

constexpr uint64_t kTp = 0x7E0500000000000AULL;  // 4 ranks, all on this node
constexpr uint64_t kDp = 0xD90500000000000BULL;  // 2 ranks: local rank 0 here, its peer elsewhere
constexpr int kTpRanks = 4;
constexpr int64_t kSec = 1000000000;

class HangRemoteVictimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.hang_timeout_ns = 30 * kSec;
    agg_ = std::make_unique<Aggregator>(config_, &clock_);
    for (int r = 0; r < kTpRanks; ++r) {
      agg_->NoteAccepted(r + 1, static_cast<uint32_t>(700 + r), 0);
      agg_->OnHello(r + 1, testing::MakeHello(static_cast<uint32_t>(700 + r)));
      Control(r + 1, kSentinelWireCommInit, MakeCommInit(kTp, r, kTpRanks));
    }
    Control(1, kSentinelWireCommInit, MakeCommInit(kDp, 0, 2));
  }
  template <typename T>
  void Control(int client, uint16_t type, const T& body) {
    testing::DeliverControl(agg_.get(), client, type, body);
  }
  void InFlight(int client, uint64_t comm, int rank, int nranks, uint64_t enq, uint64_t gpu,
                uint64_t done, int64_t since) {
    Control(client, kSentinelWireInFlight,
            testing::MakeInFlight(comm, rank, nranks, enq, gpu, done, since, clock_.MonoNs()));
  }

  // Local rank 0 sits in data-parallel collective #8 from t0 (its kernel started when
  // `dp_kernel_started`), so it never enqueues tensor-parallel collective #21, where ranks 1-3
  // wait from t0 + 0.2 s. Runs 40 s of one-second ticks; returns the last firing hang alert of
  // the tensor-parallel communicator.
  Alert Run(bool dp_kernel_started) {
    const int64_t t0 = clock_.MonoNs();
    Alert tp_alert;
    outbound_ = 0;
    for (int s = 0; s < 40; ++s) {
      InFlight(1, kDp, 0, 2, 8, dp_kernel_started ? 8 : 7, 7, t0);
      InFlight(1, kTp, 0, kTpRanks, 20, 20, 20, 0);
      for (int r = 1; r < kTpRanks; ++r) {
        InFlight(r + 1, kTp, r, kTpRanks, 21, 21, 20, t0 + kSec / 5);
      }
      clock_.Advance(kSec);
      agg_->Tick();
      outbound_ += agg_->TakeOutbound().size();
      for (const Alert& a : agg_->TakeAlertChanges()) {
        if (a.kind == AlertKind::kHang && a.comm == CommLabel(kTp) && a.firing()) tp_alert = a;
      }
    }
    return tp_alert;
  }

  // The value of `family`{comm,rank} on /metrics, or "" when it has no such series.
  std::string MetricsValue(const std::string& family, uint64_t comm, int rank) {
    std::string text;
    // Both communicators (by default a process exports one: here the larger, tensor-parallel).
    MetricsOptions options;
    options.comms = {CommLabel(kTp), CommLabel(kDp)};
    agg_->Read([&](const State& s) { text = RenderPrometheus(TakeMetricsSnapshot(s), options); });
    const std::string head = family + "{comm=\"" + CommLabel(comm) + "\",uid=\"0\",rank=\"" +
                             std::to_string(rank) + "\"} ";
    const size_t at = text.find(head);
    if (at == std::string::npos) return "";
    const size_t eol = text.find('\n', at);
    return text.substr(at + head.size(), eol - at - head.size());
  }

  Config config_;
  FakeClock clock_;
  std::unique_ptr<Aggregator> agg_;
  size_t outbound_ = 0;
};

std::map<int, std::string> Roles(const Alert& a) {
  std::map<int, std::string> roles;
  for (const auto& r : a.evidence.at("ranks")) {
    roles[r.at("rank").get<int>()] = r.at("role").get<std::string>();
  }
  return roles;
}

// Before, local rank 0 was named a never_launched culprit, and its node told ranks 1-3 to act on
// a verdict naming it (SENTINEL_ON_HANG=abort): a victim blamed for a remote rank's hang.
TEST_F(HangRemoteVictimTest, RankBlockedInCrossNodeCollectiveIsNotACulprit) {
  const Alert a = Run(/*dp_kernel_started=*/true);
  ASSERT_FALSE(a.id.empty()) << "the tensor-parallel communicator is hung";
  EXPECT_TRUE(a.ranks.empty()) << a.summary;
  EXPECT_TRUE(a.evidence.at("culprits").empty()) << a.evidence.dump();
  EXPECT_TRUE(a.evidence.at("outside_node").get<bool>()) << a.evidence.dump();
  EXPECT_NE(a.summary.find("waiting on a rank outside this node"), std::string::npos) << a.summary;
  EXPECT_NE(a.summary.find("rank 0 is inside comm " + CommLabel(kDp)), std::string::npos)
      << a.summary;
  EXPECT_EQ(Roles(a).at(0), "waiting_elsewhere") << a.evidence.dump();
  EXPECT_EQ(Roles(a).at(1), "waiting");
  EXPECT_EQ(outbound_, 0u) << "no local culprit: nothing is acted on from this node";
}

// Its data-parallel collective was enqueued but its kernel never started: its own GPU is stuck,
// not waiting for another node, so it stays the culprit.
TEST_F(HangRemoteVictimTest, RankWhoseOtherKernelNeverStartedStaysACulprit) {
  const Alert a = Run(/*dp_kernel_started=*/false);
  ASSERT_FALSE(a.id.empty()) << "the tensor-parallel communicator is hung";
  EXPECT_EQ(a.ranks, std::vector<int>{0}) << a.summary;
  EXPECT_EQ(Roles(a).at(0), "never_launched") << a.evidence.dump();
  EXPECT_FALSE(a.evidence.at("outside_node").get<bool>()) << a.evidence.dump();
}

// The job-wide hang rule (SentinelJobInFlightHangCulprit) compares the ranks' started kernels
// across nodes; it skips ranks that /metrics shows waiting elsewhere. Before, the series did not
// exist and the rule named rank 0 of the tensor-parallel communicator, a victim.
TEST_F(HangRemoteVictimTest, MetricsShowTheVictimWaitingElsewhere) {
  Run(/*dp_kernel_started=*/true);
  EXPECT_EQ(MetricsValue("sentinel_inflight_waiting_elsewhere", kTp, 0), "1");
  for (int r = 1; r < kTpRanks; ++r) {
    EXPECT_EQ(MetricsValue("sentinel_inflight_waiting_elsewhere", kTp, r), "0") << "rank " << r;
  }
  // In the data-parallel communicator itself it waits for the other node: not elsewhere.
  EXPECT_EQ(MetricsValue("sentinel_inflight_waiting_elsewhere", kDp, 0), "0");
}

TEST_F(HangRemoteVictimTest, MetricsShowACulpritNotWaitingElsewhere) {
  Run(/*dp_kernel_started=*/false);
  EXPECT_EQ(MetricsValue("sentinel_inflight_waiting_elsewhere", kTp, 0), "0");
}

// The other way round: local rank 0 sits in tensor-parallel collective #21 (its kernel started)
// that local rank 3 never enqueued, so it never reaches data-parallel collective #8, which its
// peer on another node has started. Job-wide, rank 0 is behind in the data-parallel communicator
// but is a victim of rank 3 (named by this node's tensor-parallel hang alert): waiting elsewhere.
// Rank 3, inside nothing, is not.
TEST_F(HangRemoteVictimTest, MetricsShowARankStuckInALocalCollectiveWaitingElsewhere) {
  const int64_t t0 = clock_.MonoNs();
  for (int s = 0; s < 10; ++s) {
    InFlight(1, kDp, 0, 2, 7, 7, 7, 0);
    for (int r = 0; r < kTpRanks; ++r) {
      if (r == 3) {
        InFlight(r + 1, kTp, r, kTpRanks, 20, 20, 20, 0);
      } else {
        InFlight(r + 1, kTp, r, kTpRanks, 21, 21, 20, t0);
      }
    }
    clock_.Advance(kSec);
    agg_->Tick();
  }
  EXPECT_EQ(MetricsValue("sentinel_inflight_waiting_elsewhere", kDp, 0), "1");
  EXPECT_EQ(MetricsValue("sentinel_inflight_waiting_elsewhere", kTp, 0), "0");
  EXPECT_EQ(MetricsValue("sentinel_inflight_waiting_elsewhere", kTp, 3), "0");
}

// Once it leaves the other collective, the next evaluation clears it (before, the view of the
// tensor-parallel communicator started from the rank's kept fields and stayed "inside").
TEST_F(HangRemoteVictimTest, WaitingElsewhereClearsWhenTheOtherCollectiveCompletes) {
  Run(/*dp_kernel_started=*/true);
  ASSERT_EQ(MetricsValue("sentinel_inflight_waiting_elsewhere", kTp, 0), "1");
  InFlight(1, kDp, 0, 2, 8, 8, 8, 0);
  clock_.Advance(kSec);
  agg_->Tick();
  EXPECT_EQ(MetricsValue("sentinel_inflight_waiting_elsewhere", kTp, 0), "0");
}

// The detector alone: inside another node-spanning collective for less than elsewhere_ns (a
// collective passing through) is not yet waiting_elsewhere; from then on it is, and with no
// other culprit the wait is outside this node even though this communicator is wholly local.
TEST(HangRemoteVictimUnit, InsideElsewhereCountsFromItsThreshold) {
  const int64_t now = 1000 * kSec;
  HangParams p;
  p.timeout_ns = 30 * kSec;
  p.elsewhere_ns = 5 * kSec;
  std::vector<InFlightView> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[r].rank = r;
    ranks[r].has_state = true;
    ranks[r].last_update_ns = now;
  }
  ranks[0].enqueued = ranks[0].gpu_started = ranks[0].completed = 20;
  ranks[0].elsewhere_comm = kDp;
  ranks[0].elsewhere_ordinal = 8;
  ranks[1].enqueued = ranks[1].gpu_started = 21;
  ranks[1].completed = 20;
  ranks[1].oldest_since_ns = now - 40 * kSec;
  ranks[0].inside_elsewhere_since_ns = now - 4 * kSec;
  HangVerdict v = EvaluateHang(ranks, 2, now, p);
  ASSERT_TRUE(v.hung);
  EXPECT_EQ(v.culprits, std::vector<int>{0});
  EXPECT_FALSE(v.outside_node);
  ranks[0].inside_elsewhere_since_ns = now - 6 * kSec;
  v = EvaluateHang(ranks, 2, now, p);
  ASSERT_TRUE(v.hung);
  EXPECT_TRUE(v.culprits.empty());
  EXPECT_EQ(v.waiting_elsewhere, std::vector<int>{0});
  EXPECT_EQ(v.ranks[0].role, HangRole::kWaitingElsewhere);
  EXPECT_EQ(v.ranks[0].elsewhere_comm, kDp);
  EXPECT_EQ(v.ranks[0].elsewhere_ns, 6 * kSec);
  EXPECT_TRUE(v.outside_node);
}

}  // namespace
}  // namespace sentinel::collector
