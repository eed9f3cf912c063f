// The wait evidence's compute segment excludes the time a process spends inside its other
// communicators' collectives (wait_evidence.h), through the real Aggregator. One process of
// node A has a rank in a pipeline communicator (its peer stage on node B) and one in a
// data-parallel communicator (its peer replica on node C), both with one rank per node. When the
// pipeline peer slows down, node A waits longer inside the pipeline exchange and so reaches the
// data-parallel all-reduce later: node C now waits for it there. A's own compute did not change,
// so it is not the slow one; counted from the end of its previous all-reduce, its segment grew and
// it stopped waiting, and it was named a slow node (the cluster evaluation's node-tier false
// alerts at every size).
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/wait_evidence.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

using testing::FakeClock;
using testing::MakeCommInit;

constexpr int64_t kMs = 1000000;
constexpr uint64_t kPp = 0x00000000000e0000ULL;
constexpr uint64_t kDp = 0x00000000000e0001ULL;
constexpr int kClient = 1;

class WaitSegmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Config config;
    config.node_wait_alerts =
        true;  // the node's own wait alerts (the default): what is judged here
    agg_ = std::make_unique<Aggregator>(config, &clock_);
    clock_.Set(now_);
    agg_->NoteAccepted(kClient, 4242, 0);
    agg_->OnHello(kClient, testing::MakeHello(4242));
    for (uint64_t hash : {kPp, kDp}) {
      SentinelWireCommInit init = MakeCommInit(hash, 0, 2);
      init.nnodes = 2;
      init.pid = 4242;
      Frame f;
      f.type = kSentinelWireCommInit;
      f.payload = reinterpret_cast<const uint8_t*>(&init);
      f.payload_size = sizeof(init);
      agg_->OnControlFrame(kClient, f);
    }
  }

  void Send(uint64_t hash, uint64_t seq, int64_t arrival, int64_t end) {
    SentinelWireCollRecord r{};
    r.comm_hash = hash;
    r.seq = seq;
    r.bytes = 1 << 20;
    r.rank = 0;
    r.nranks = 2;
    r.peer = -1;
    r.root = -1;
    r.func = kSentinelFuncAllReduce;
    r.algo = kSentinelAlgoRing;
    r.proto = kSentinelProtoSimple;
    r.nchannels = 2;
    r.flags = kSentinelCollGpuTimeValid | kSentinelCollApiTimeValid;
    r.api_ns = arrival - 2000;
    r.enqueue_ns = arrival - 1000;
    r.gpu_start_ns = arrival;
    r.gpu_end_ns = end;
    clock_.Set(end + kMs);  // delivered a little after it ended
    agg_->OnRecords(kClient, &r, 1);
  }

  // `steps` training steps of node A's process: 10 ms of compute, the pipeline exchange with node
  // B (B arrives after `pp_peer_late` more), 10 ms more compute (x `own_factor` for both), then
  // the data-parallel all-reduce with node C, which arrives about when A used to.
  void Run(int steps, int64_t pp_peer_late, double own_factor) {
    std::normal_distribution<double> gauss(0.0, 1.0);
    for (int i = 0; i < steps; ++i) {
      const auto compute = [&](double ms) {
        return static_cast<int64_t>(ms * kMs * own_factor * (1 + 0.03 * gauss(rng_)));
      };
      const int64_t start = now_;
      const int64_t a_pp = start + compute(10);
      const int64_t b_pp =
          start + static_cast<int64_t>(10 * kMs * (1 + 0.03 * gauss(rng_))) + pp_peer_late;
      const int64_t pp_end = std::max(a_pp, b_pp) + kMs / 2;
      Send(kPp, seq_, a_pp, pp_end);
      const int64_t a_dp = pp_end + compute(10);
      // Node C: its own pipeline is on time (10 + 0.5 + 10 ms from the step's start).
      const int64_t c_dp = start + static_cast<int64_t>((20.5 + 1.0 * gauss(rng_)) * kMs);
      const int64_t dp_end = std::max(a_dp, c_dp) + kMs;
      Send(kDp, seq_, a_dp, dp_end);
      ++seq_;
      now_ = dp_end;
      if (i % 50 == 0) agg_->Tick();
    }
    agg_->Tick();
  }

  std::vector<Alert> Stragglers() {
    std::vector<Alert> out;
    agg_->Read([&](const State& s) {
      for (const auto& [id, a] : s.alerts.all()) {
        if (a.firing() && a.kind == AlertKind::kStraggler) out.push_back(a);
      }
    });
    return out;
  }
  static std::string Dump(const std::vector<Alert>& alerts) {
    std::string out;
    for (const Alert& a : alerts) out += a.id + ": " + a.summary + "\n";
    return out;
  }

  FakeClock clock_;
  std::unique_ptr<Aggregator> agg_;
  std::mt19937_64 rng_{11};
  int64_t now_ = 1000000000000LL;
  uint64_t seq_ = 0;
};

TEST_F(WaitSegmentTest, WaitingLongerInAnotherCommunicatorIsNotComputingSlower) {
  Run(400, 0, 1.0);
  ASSERT_TRUE(Stragglers().empty()) << Dump(Stragglers());
  // Node B (the pipeline peer) is 5 ms late from now on: node A reaches the all-reduce 5 ms later
  // and node C waits for it there, for 8 s of job time.
  Run(400, 5 * kMs, 1.0);
  EXPECT_TRUE(Stragglers().empty())
      << "node A only waited for its pipeline peer: " << Dump(Stragglers());
}

TEST_F(WaitSegmentTest, ComputingSlowerIsStillNamed) {
  Run(400, 0, 1.0);
  ASSERT_TRUE(Stragglers().empty()) << Dump(Stragglers());
  // Node A itself computes 25 % longer: the others wait for it.
  Run(400, 0, 1.25);
  const std::vector<Alert> a = Stragglers();
  ASSERT_FALSE(a.empty()) << "node A computes 25 % longer and was not named";
}

TEST(InsideOtherCollectivesTest, SumsTheOverlapWithTheSegmentOnly) {
  struct S {
    int64_t arrival_ns;
    int64_t duration_ns;
  };
  struct H {
    std::vector<S> v;
    size_t size() const { return v.size(); }
    const S& operator[](size_t i) const { return v[i]; }
  };
  // Oldest first: one before the segment, one across its start, one inside, one unknown, one
  // across its end.
  const H h{{{0, 10}, {15, 10}, {40, 5}, {50, -1}, {95, 20}}};
  EXPECT_EQ(InsideOtherCollectives(h, 20, 100), 5 + 5 + 5);
  EXPECT_EQ(InsideOtherCollectives(h, 100, 100), 0);
  EXPECT_EQ(InsideOtherCollectives(h, 20, 100, /*max_samples=*/1), 5);
}

}  // namespace
}  // namespace sentinel::collector
