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
#include "collector/evidence/evidence_poller.h"
#include "collector/export/metrics_select.h"
#include "collector/export/prometheus_text.h"
#include "tests/unit/collector/evidence/fake_host_tree.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

using sentinel::testing::FakeClock;
using sentinel::testing::MakeCommInit;

constexpr uint64_t kTp = 0x7E0500000000000AULL;  // 4 ranks, all on this node
constexpr uint64_t kDp = 0xD90500000000000BULL;  // 2 ranks: local rank 0 here, its peer elsewhere
constexpr int kTpRanks = 4;
constexpr int64_t kSec = 1000000000;

class HangRemoteVictimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.hang_timeout_ns = 30 * kSec;
    config_.hang_timeout_paused_ns = 60 * kSec;
    agg_ = std::make_unique<Aggregator>(config_, &clock_);
    for (int r = 0; r < kTpRanks; ++r) {
      agg_->NoteAccepted(r + 1, static_cast<uint32_t>(700 + r), 0);
      agg_->OnHello(r + 1, sentinel::testing::MakeHello(static_cast<uint32_t>(700 + r)));
      Control(r + 1, kSentinelWireCommInit, MakeCommInit(kTp, r, kTpRanks));
    }
    Control(1, kSentinelWireCommInit, MakeCommInit(kDp, 0, 2));
  }
  template <typename T>
  void Control(int client, uint16_t type, const T& body) {
    sentinel::testing::DeliverControl(agg_.get(), client, type, body);
  }
  void InFlight(int client, uint64_t comm, int rank, int nranks, uint64_t enq, uint64_t gpu,
                uint64_t done, int64_t since) {
    Control(client, kSentinelWireInFlight,
            sentinel::testing::MakeInFlight(comm, rank, nranks, enq, gpu, done, since,
                                            clock_.MonoNs()));
  }

  // Local rank 0 sits in data-parallel collective #8 from t0 (its kernel started when
  // `dp_kernel_started`), so it never enqueues tensor-parallel collective #21, where ranks 1-3
  // wait from t0 + 0.2 s. Runs 40 s of one-second ticks; returns the last firing hang alert of
  // the tensor-parallel communicator.
  Alert Run(bool dp_kernel_started) {
    outbound_ = 0;
    return Ticks(40, clock_.MonoNs(), dp_kernel_started ? 8 : 7, 7);
  }

  // `seconds` one-second ticks from t0 on: local rank 0 at data-parallel collective #8 (kernel
  // started `dp_started`, completed `dp_done`) and tensor-parallel #20 completed, ranks 1-3 in
  // tensor-parallel #21 from t0 + 0.2 s; the fake /proc polled when watched. Returns the last
  // firing hang alert of the tensor-parallel communicator.
  Alert Ticks(int seconds, int64_t t0, uint64_t dp_started, uint64_t dp_done) {
    Alert tp_alert;
    for (int s = 0; s < seconds; ++s) {
      PollProcess();
      InFlight(1, kDp, 0, 2, 8, dp_started, dp_done, dp_done < 8 ? t0 : 0);
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

  // The node's view of rank 0's process (pid 700) through a fake /proc, polled each second:
  // in state `state`, its one thread using `cpu_per_s` ns of CPU a second, moving `io_per_s`
  // bytes a second through read/write calls.
  void WatchProcess(char state, uint64_t cpu_per_s, uint64_t io_per_s) {
    state_ = state;
    cpu_per_s_ = cpu_per_s;
    io_per_s_ = io_per_s;
    EvidenceOptions options;
    options.period_ns = 0;  // polled by the test
    options.nvml_library = "off";
    options.roots = tree_.roots();
    evidence_ = std::make_unique<EvidencePoller>(options, &clock_,
                                                 [] { return std::vector<uint32_t>{700}; });
    agg_->SetEvidence(evidence_.get());
  }
  void PollProcess() {
    if (evidence_ == nullptr) return;
    ++polls_;
    tree_.WriteStat(700, "python", state_, 0, 1234);
    tree_.WriteTask(700, 700, polls_ * cpu_per_s_, 0, polls_, 0);
    testing::FakeHostTree::Write(tree_.Proc("700/io"),
                                 absl::StrCat("rchar: 0\nwchar: ", polls_ * io_per_s_, "\n"));
    evidence_->PollOnce();
  }

  // Local rank 0 has finished data-parallel collective #8 and tensor-parallel #20 and has nothing
  // in flight anywhere (a checkpoint write, a long sleep) while ranks 1-3 wait in
  // tensor-parallel #21: `seconds` more ticks from where the last run stopped.
  Alert RunPaused(int seconds, int64_t t0) { return Ticks(seconds, t0, 8, 8); }

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
  testing::FakeHostTree tree_;
  std::unique_ptr<EvidencePoller> evidence_;
  char state_ = 'S';
  uint64_t cpu_per_s_ = 0;
  uint64_t io_per_s_ = 0;
  uint64_t polls_ = 0;
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

// Before, rank 0 was named never_launched at --hang-timeout and its node told ranks 1-3 to act:
// a checkpoint write aborted the job. Now it is paused_outside_nccl: no alert and nothing acted
// on before --hang-timeout-paused (60 s here), and /metrics shows it outside NCCL so that the
// job-wide rules skip it too; past the paused timeout it is a hang naming it in that role.
TEST_F(HangRemoteVictimTest, RankAliveOutsideNcclIsPausedNotHungUntilThePausedTimeout) {
  WatchProcess('D', 30'000'000, 0);  // in disk wait, 0.03 CPUs
  const int64_t t0 = clock_.MonoNs();
  outbound_ = 0;
  const Alert early = RunPaused(50, t0);
  EXPECT_TRUE(early.id.empty()) << early.summary;
  EXPECT_EQ(outbound_, 0u);
  EXPECT_EQ(MetricsValue("sentinel_inflight_paused_outside_nccl", kTp, 0), "1");
  EXPECT_EQ(MetricsValue("sentinel_inflight_paused_outside_nccl", kTp, 1), "0");
  const Alert late = RunPaused(20, t0);
  ASSERT_FALSE(late.id.empty()) << "past --hang-timeout-paused it is a hang";
  EXPECT_EQ(late.ranks, std::vector<int>{0}) << late.summary;
  EXPECT_EQ(Roles(late).at(0), "paused_outside_nccl") << late.evidence.dump();
  EXPECT_NE(late.summary.find("working outside NCCL, nothing in flight: process state D"),
            std::string::npos)
      << late.summary;
  EXPECT_DOUBLE_EQ(late.evidence.at("hang_timeout_paused_s").get<double>(), 60.0);
}

// A process outside NCCL that the kernel shows idle (asleep, no CPU, no I/O: a host thread
// blocked for good looks the same) stays never_launched, named at --hang-timeout; one moving
// bytes (a checkpoint in page cache, state S) is paused.
TEST_F(HangRemoteVictimTest, IdleProcessOutsideNcclIsNeverLaunchedAndOneWritingIsPaused) {
  WatchProcess('S', 1'000'000, 400);
  const int64_t t0 = clock_.MonoNs();
  const Alert idle = RunPaused(40, t0);
  ASSERT_FALSE(idle.id.empty()) << "an idle process outside NCCL is a hang at --hang-timeout";
  EXPECT_EQ(Roles(idle).at(0), "never_launched") << idle.evidence.dump();

  io_per_s_ = 200'000'000;  // now writing 200 MB/s
  const Alert writing = RunPaused(15, t0);
  EXPECT_TRUE(writing.id.empty()) << writing.summary;
  bool firing = true;
  agg_->Read([&](const State& st) { firing = st.alerts.IsFiring(idle.owner_uid, idle.id); });
  EXPECT_FALSE(firing) << "a hang alert raised while it was idle resolves once it works";
}

}  // namespace
}  // namespace sentinel::collector
