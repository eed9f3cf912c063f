// Job-wide detection through the real Aggregator, one per virtual node, each fed only its local
// ranks' records (and on its own clock base): a communicator with one rank per node is judged, a
// slow rank is named by its own node, a whole slow node names itself, and noise names nothing.
// The cross-node tier (Prometheus) is tested by promtool (examples/prometheus) and end to end.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/alerts/alert_key.h"
#include "tests/eval/job_model.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

using testing::FakeClock;
using testing::MakeCommInit;

constexpr int64_t kMs = 1000000;
// Two data-parallel communicators with one rank per node: DP0 = job ranks {0, 2}, DP1 = {1, 3};
// node A holds job ranks 0 and 1, node B job ranks 2 and 3 (comm rank = node index).
constexpr uint64_t kDp0 = 0x00000000000d0000ULL;
constexpr uint64_t kDp1 = 0x00000000000d0001ULL;

struct Node {
  FakeClock clock;
  std::unique_ptr<Aggregator> agg;
  int64_t clock_offset = 0;  // this node's CLOCK_MONOTONIC against the model's
};

class JobwideDetectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Config config;
    config.node_wait_alerts = true;  // the default (--node-wait-alerts on): these tests judge it
    for (int n = 0; n < 2; ++n) {
      nodes_[n].clock_offset = n == 0 ? 0 : 123456789012LL;  // no common clock across nodes
      nodes_[n].agg = std::make_unique<Aggregator>(config, &nodes_[n].clock);
      for (int local = 0; local < 2; ++local) {
        const int client = 1 + local;
        const uint32_t pid = static_cast<uint32_t>(1000 + 2 * n + local);
        nodes_[n].agg->NoteAccepted(client, pid, 0);
        nodes_[n].agg->OnHello(client, testing::MakeHello(pid));
        SentinelWireCommInit init = MakeCommInit(local == 0 ? kDp0 : kDp1, n, 2);
        init.nnodes = 2;
        init.pid = pid;
        Frame f;
        f.type = kSentinelWireCommInit;
        f.payload = reinterpret_cast<const uint8_t*>(&init);
        f.payload_size = sizeof(init);
        nodes_[n].agg->OnControlFrame(client, f);
      }
    }
  }

  // Runs `steps` steps of both communicators at `compute` per step with `jitter`; `slow` by job
  // rank.
  void Run(int64_t steps, int64_t compute, double jitter, const std::vector<eval::Slowdown>& slow,
           double heavy_tail = 0, double pause_prob = 0) {
    for (int c = 0; c < 2; ++c) {
      eval::CommModel m;
      m.hash = c == 0 ? kDp0 : kDp1;
      m.ranks = {c, 2 + c};
      m.compute_ns = {compute};
      m.jitter = jitter;
      m.heavy_tail = heavy_tail;
      m.pause_prob = pause_prob;
      m.pause_ns = 1500 * kMs;
      m.duration_ns = compute / 10;
      if (!steppers_[c]) {
        steppers_[c] =
            std::make_unique<eval::CommStepper>(m, 7 + static_cast<uint64_t>(c), 1000000000000LL);
      }
    }
    std::vector<SentinelWireCollRecord> recs;
    const int64_t until = steppers_[0]->step() + steps;
    while (steppers_[0]->step() < until) {
      for (int c = 0; c < 2; ++c) {
        recs.clear();
        steppers_[c]->Next(slow, &recs);
        for (SentinelWireCollRecord r : recs) {
          Node& node = nodes_[r.rank];  // comm rank = node index
          node.clock.Set(steppers_[c]->now_ns() + node.clock_offset);
          r.gpu_start_ns += node.clock_offset;
          r.gpu_end_ns += node.clock_offset;
          r.enqueue_ns += node.clock_offset;
          r.api_ns += node.clock_offset;
          node.agg->OnRecords(1 + c, &r, 1);
        }
      }
    }
    for (Node& n : nodes_) n.agg->Tick();
  }

  std::vector<Alert> Firing(int node) {
    std::vector<Alert> out;
    nodes_[node].agg->Read([&](const State& s) {
      for (const auto& [id, a] : s.alerts.all()) {
        if (a.firing()) out.push_back(a);
      }
    });
    return out;
  }
  static std::string Dump(const std::vector<Alert>& alerts) {
    std::string out;
    for (const Alert& a : alerts) out += a.id + ": " + a.summary + "\n";
    return out;
  }

  Node nodes_[2];
  std::unique_ptr<eval::CommStepper> steppers_[2];
};

// Job rank 3 (node B's rank in DP1, the only local rank of that communicator) computes 20 % longer
// from step 300 at 10 ms steps. Before, no sentineld judged a communicator with one local rank.
TEST_F(JobwideDetectionTest, OneRankPerNodeSlowRankIsNamedByItsOwnNode) {
  Run(300, 10 * kMs, 0.03, {});
  EXPECT_TRUE(Firing(0).empty()) << Dump(Firing(0));
  EXPECT_TRUE(Firing(1).empty()) << Dump(Firing(1));
  Run(700, 10 * kMs, 0.03, {{3, 0.20, 300, -1}});  // within 7 s of job time
  EXPECT_TRUE(Firing(0).empty()) << "node A waits, it is not slow: " << Dump(Firing(0));
  const std::vector<Alert> b = Firing(1);
  ASSERT_EQ(b.size(), 1u) << Dump(b);
  EXPECT_EQ(b[0].kind, AlertKind::kStraggler);
  EXPECT_EQ(b[0].comm, CommLabel(kDp1));
  EXPECT_EQ(b[0].ranks, std::vector<int>{1});
  EXPECT_NE(b[0].summary.find("rank 1 on comm " + CommLabel(kDp1) +
                              " (2 nodes) is the one its peers wait for since collective #"),
            std::string::npos)
      << b[0].summary;
  EXPECT_EQ(b[0].summary.find("since the communicator started"), std::string::npos);
  const uint64_t since = b[0].evidence["since_seq"].get<uint64_t>();
  EXPECT_NEAR(static_cast<double>(since), 300.0, 40.0);
  EXPECT_NEAR(b[0].evidence["segment_growth"].get<double>(), 0.20, 0.05);
  EXPECT_EQ(b[0].evidence["scope"], "rank");
}

// Both ranks of node B compute 20 % longer: node B names itself as the slow node.
TEST_F(JobwideDetectionTest, WholeSlowNodeNamesItself) {
  Run(300, 10 * kMs, 0.03, {});
  Run(700, 10 * kMs, 0.03, {{2, 0.20, 300, -1}, {3, 0.20, 300, -1}});
  EXPECT_TRUE(Firing(0).empty()) << Dump(Firing(0));
  const std::vector<Alert> b = Firing(1);
  ASSERT_EQ(b.size(), 1u) << Dump(b);
  EXPECT_EQ(b[0].kind, AlertKind::kStraggler);
  EXPECT_EQ(b[0].evidence["scope"], "node");
  EXPECT_NE(b[0].summary.find("is slow: all 2 of its processes"), std::string::npos)
      << b[0].summary;
  EXPECT_EQ(b[0].evidence["flagged"].size(), 2u) << b[0].evidence.dump();
}

// While a whole slow node forms, its ranks cross the bars one after another: the node is named,
// never first one of its ranks as a slow rank (the cluster evaluation's node tier named a rank
// first in most slow-node runs). Checked at every tick of the onset.
TEST_F(JobwideDetectionTest, SlowNodeIsNeverFirstNamedAsASlowRank) {
  Run(300, 10 * kMs, 0.03, {});
  const std::vector<eval::Slowdown> slow = {{2, 0.20, 300, -1}, {3, 0.20, 300, -1}};
  bool node_named = false;
  for (int chunk = 0; chunk < 70; ++chunk) {
    Run(10, 10 * kMs, 0.03, slow);  // 100 ms of job time, then a tick
    for (const Alert& a : Firing(1)) {
      EXPECT_FALSE(AlertIdIs(a.id, AlertKeyKind::kWaitRank))
          << "a rank of the slow node named alone at step " << 300 + 10 * (chunk + 1) << ": "
          << a.summary;
      if (AlertIdIs(a.id, AlertKeyKind::kSlowNode)) node_named = true;
    }
  }
  EXPECT_TRUE(node_named);
}

// Noise only: jitter, heavy-tailed delays and whole-job pauses at 2 ms steps: nothing, anywhere.
TEST_F(JobwideDetectionTest, NoiseNamesNothing) {
  Run(20000, 2 * kMs, 0.05, {}, /*heavy_tail=*/0.01, /*pause_prob=*/0.001);
  EXPECT_TRUE(Firing(0).empty()) << Dump(Firing(0));
  EXPECT_TRUE(Firing(1).empty()) << Dump(Firing(1));
}

// The README demo's shape on one node: 8 ranks, 10 ms of compute, rank 5 40 ms late from step 40,
// 100 steps. The straggler alert says "since collective #40" (not "since the communicator
// started": the detector's learning phase ended without enough clean collectives, which is not a
// fact about the rank), and quotes the rank's measured lateness p50 (the percentile /v1/ranks
// shows, over its last 64 collectives) and its share of the 10 ms compute segment.
TEST(LocalStragglerTextTest, DemoSlowdownFromStep40SaysSinceCollective40) {
  constexpr uint64_t kComm = 0x00000000000c0000ULL;
  Config config;
  FakeClock clock;
  Aggregator agg(config, &clock);
  for (int r = 0; r < 8; ++r) {
    agg.NoteAccepted(1 + r, static_cast<uint32_t>(1000 + r), 0);
    agg.OnHello(1 + r, testing::MakeHello(static_cast<uint32_t>(1000 + r)));
    SentinelWireCommInit init = MakeCommInit(kComm, r, 8);
    Frame f;
    f.type = kSentinelWireCommInit;
    f.payload = reinterpret_cast<const uint8_t*>(&init);
    f.payload_size = sizeof(init);
    agg.OnControlFrame(1 + r, f);
  }
  eval::CommModel m;
  m.hash = kComm;
  for (int r = 0; r < 8; ++r) m.ranks.push_back(r);
  m.compute_ns = {10 * kMs};
  m.jitter = 0.05;
  m.duration_ns = 2 * kMs;
  eval::CommStepper stepper(m, 5, 1000000000000LL);
  std::vector<SentinelWireCollRecord> recs;
  while (stepper.step() < 100) {
    recs.clear();
    // +40 ms is +400 % of the 10 ms compute.
    stepper.Next({{5, 4.0, 40, -1}}, &recs);
    clock.Set(stepper.now_ns());
    for (const auto& r : recs) agg.OnRecords(1 + r.rank, &r, 1);
  }
  agg.Tick();
  const Alert* a = nullptr;
  std::vector<int64_t> late;
  agg.Read([&](const State& s) {
    a = s.alerts.Find("straggler-" + CommLabel(kComm) + "-r5");
    const RankState& rs = *s.ranks.at(RankKey{CommKey{0, kComm}, 5});
    for (size_t k = rs.history.size(); k > 0 && late.size() < 64; --k) {
      if (rs.history[k - 1].lateness_ns >= 0) late.push_back(rs.history[k - 1].lateness_ns);
    }
  });
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->summary.find("since the communicator started"), std::string::npos) << a->summary;
  EXPECT_NE(a->summary.find("is late since collective #40:"), std::string::npos) << a->summary;
  EXPECT_EQ(a->evidence["pattern"], "degraded");
  EXPECT_EQ(a->severity, AlertSeverity::kCritical);
  // The figures: the rank's lateness p50 over its late collectives (at most the last 64), as
  // /v1/ranks computes a p50; here every one of the last 64 is late.
  const double p50_ms = static_cast<double>(Percentile(&late, 50)) / 1e6;
  // (refreshed every 16 collectives while it fires: within that of the latest figures)
  EXPECT_NEAR(a->evidence["lateness_p50_ms"].get<double>(), p50_ms, 0.02 * p50_ms);
  EXPECT_NEAR(p50_ms, 40.0, 2.0);
  EXPECT_NEAR(a->evidence["segment_p50_ms"].get<double>(), 10.0, 1.0);
  EXPECT_NE(a->summary.find(absl::StrFormat("%.2f ms late (p50 of its last %d collectives)",
                                            a->evidence["lateness_p50_ms"].get<double>(),
                                            a->evidence["window"].get<int>())),
            std::string::npos)
      << a->summary;
}

}  // namespace
}  // namespace sentinel::collector
