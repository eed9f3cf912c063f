// Aggregator: the join and its exact math (skew, lateness, clock-free estimate), straggler
// persistence/hysteresis/structural-vs-degraded, hang detection, bounded windows, verdict alerts.
#include "collector/aggregate/aggregator.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "tests/eval/job_model.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

using testing::FakeClock;
using testing::MakeColl;
using testing::MakeCommInit;

constexpr uint64_t kComm = 0xABCDEF0123456789ULL;
constexpr int64_t kMs = 1000000;

class AggregatorTest : public ::testing::Test {
 protected:
  void Make() { agg_ = std::make_unique<Aggregator>(config_, &clock_); }
  // One client per rank, as one process per GPU.
  void Connect(int nranks, uint64_t comm = kComm) {
    if (!agg_) Make();
    for (int r = 0; r < nranks; ++r) {
      const int client = ClientOf(r, comm);
      agg_->NoteAccepted(client, static_cast<uint32_t>(1000 + r), 0);
      agg_->OnHello(client, testing::MakeHello(static_cast<uint32_t>(1000 + r)));
      Control(client, kSentinelWireCommInit, MakeCommInit(comm, r, nranks));
    }
  }
  // Rank 0 of a 2-rank communicator on one node announces itself; rank 1 has not yet. Every
  // collective judged (no warm-up).
  void AnnounceOnlyRankZeroOfTwo() {
    config_.straggler_warmup = 0;
    Make();
    agg_->NoteAccepted(ClientOf(0), 1000, 0);
    Control(ClientOf(0), kSentinelWireCommInit, MakeCommInit(kComm, 0, 2));
  }
  static int ClientOf(int rank, uint64_t comm = kComm) {
    return 1 + rank + static_cast<int>(comm % 7) * 1000;
  }
  template <typename T>
  void Control(int client, uint16_t type, const T& body) {
    testing::DeliverControl(agg_.get(), client, type, body);
  }
  void Send(const SentinelWireCollRecord& r, uint64_t comm = kComm) {
    agg_->OnRecords(ClientOf(r.rank, comm), &r, 1);
  }
  // One collective: rank r arrives at base + late[r] and all end at the same instant.
  void Collective(uint64_t seq, const std::vector<int64_t>& late, int64_t end_after = 50 * kMs) {
    const int n = static_cast<int>(late.size());
    const int64_t base = 1000000000LL + static_cast<int64_t>(seq) * 200 * kMs;
    for (int r = 0; r < n; ++r) {
      const int64_t arrival = base + late[static_cast<size_t>(r)];
      Send(MakeColl(kComm, r, n, seq, arrival, base + end_after - arrival));
    }
    clock_.Advance(10 * kMs);
  }
  const RankState& Rank(int r) {
    const RankState* out = nullptr;
    agg_->Read([&](const State& s) { out = s.ranks.at(RankKey{CommKey{0, kComm}, r}).get(); });
    return *out;
  }
  std::vector<Alert> Alerts() {
    std::vector<Alert> out;
    agg_->Read([&](const State& s) {
      for (const auto& [id, a] : s.alerts.all()) out.push_back(a);
    });
    return out;
  }
  const Alert* Find(const std::string& id) {
    const Alert* out = nullptr;
    agg_->Read([&](const State& s) { out = s.alerts.Find(id); });
    return out;
  }
  void Run(const eval::CommModel& model, const std::vector<eval::Slowdown>& slow, int64_t steps,
           const std::function<void(int64_t)>& on_step);
  Counters Count() {
    Counters c;
    agg_->Read([&](const State& s) { c = s.counters; });
    return c;
  }

  // These jobs are a few hundred collectives long: the straggler cases judge the CUSUM's own speed
  // and text, so the persistence in time (straggler-evidence, a loaded host's time scale) is off
  // here; ThePersistenceInTimeHoldsAShortStepStragglerForTwoSeconds checks the default.
  FakeClock clock_;
  Config config_ = testing::ConfigWithoutPersistence();
  std::unique_ptr<Aggregator> agg_;
};

TEST_F(AggregatorTest, SkewLatenessAndClockFreeAreExact) {
  config_.straggler_warmup = 0;  // one collective: keep its lateness
  Connect(4);
  const int64_t base = 5000000000LL;
  const int64_t arrive[4] = {0, 3000, 40 * kMs, 1000};
  const int64_t dur[4] = {50 * kMs, 50 * kMs - 3000, 10 * kMs, 50 * kMs - 1000};
  for (int r = 0; r < 4; ++r) Send(MakeColl(kComm, r, 4, 0, base + arrive[r], dur[r]));
  EXPECT_EQ(Count().joined, 1u);
  for (int r = 0; r < 4; ++r) {
    const RankSample& s = Rank(r).history.Newest();
    EXPECT_EQ(s.lateness_ns, arrive[r]) << r;
    EXPECT_EQ(s.clock_free_ns, 50 * kMs - dur[r]) << r;
    EXPECT_EQ(s.duration_ns, dur[r]);
  }
  agg_->Read([&](const State& s) {
    ASSERT_EQ(s.collectives.size(), 1u);
    EXPECT_EQ(s.collectives[0].skew_ns, 40 * kMs);
    EXPECT_EQ(s.collectives[0].duration_ns, 50 * kMs);
    EXPECT_EQ(s.collectives[0].latency_ns, 50 * kMs);  // all end at base + 50 ms
    EXPECT_EQ(s.collectives[0].ranks, 4);
    // AllReduce bus bandwidth: 1 MiB / 50 ms * 2(n-1)/n.
    EXPECT_NEAR(s.collectives[0].busbw_gbps, 1048576.0 / 50e6 * 1.5, 1e-9);
  });
}

TEST_F(AggregatorTest, JoinWaitsForEveryActiveLocalRank) {
  Connect(4);
  for (int r = 0; r < 3; ++r) Send(MakeColl(kComm, r, 4, 0, 1000 + r, 10));
  EXPECT_EQ(Count().joined, 0u);
  Send(MakeColl(kComm, 3, 4, 0, 1000, 10));
  EXPECT_EQ(Count().joined, 1u);
  Send(MakeColl(kComm, 3, 4, 0, 1000, 10));  // the same record again
  EXPECT_EQ(Count().records_duplicate, 1u);
}

// The local ranks of a communicator announce themselves from separate processes: rank 1's
// CommInit can reach sentineld after all of rank 0's records. The joins wait for it (for
// Aggregator::kJoinSettleNs from the communicator's creation) instead of completing with rank 0
// alone, where rank 1's lateness would be a late join that no detector sees.
TEST_F(AggregatorTest, JoinsWaitForLocalRanksStillToAnnounceThemselves) {
  AnnounceOnlyRankZeroOfTwo();
  for (uint64_t seq = 0; seq < 6; ++seq) {
    Send(MakeColl(kComm, 0, 2, seq, 1000000000LL + static_cast<int64_t>(seq) * 100 * kMs, kMs));
  }
  agg_->Tick();
  EXPECT_EQ(Count().joined, 0u) << "joined without rank 1, still expected on this node";
  clock_.Advance(Aggregator::kJoinSettleNs / 2);
  agg_->NoteAccepted(ClientOf(1), 1001, 0);
  Control(ClientOf(1), kSentinelWireCommInit, MakeCommInit(kComm, 1, 2));
  for (uint64_t seq = 0; seq < 6; ++seq) {
    Send(MakeColl(kComm, 1, 2, seq, 1000000000LL + static_cast<int64_t>(seq) * 100 * kMs + 40 * kMs,
                  kMs));
  }
  const Counters c = Count();
  EXPECT_EQ(c.joined, 6u);
  EXPECT_EQ(c.late_joins, 0u);
  EXPECT_EQ(c.evicted_pending, 0u);
  EXPECT_EQ(Rank(1).history.Newest().lateness_ns, 40 * kMs);
  EXPECT_EQ(Rank(0).history.Newest().lateness_ns, 0);
}

// A rank that never announces itself holds the joins only until the settle time passes: then the
// tick completes them with the ranks that did (and from then on they complete at once). A held
// join is not a hang, however short the hang timeout.
TEST_F(AggregatorTest, HeldJoinsCompleteWhenTheSettleTimePasses) {
  config_.hang_timeout_ns = 300 * kMs;
  AnnounceOnlyRankZeroOfTwo();
  for (uint64_t seq = 0; seq < 3; ++seq) {
    Send(MakeColl(kComm, 0, 2, seq, 1000000000LL + static_cast<int64_t>(seq) * 100 * kMs, kMs));
  }
  clock_.Advance(Aggregator::kJoinSettleNs / 2);
  agg_->Tick();
  EXPECT_EQ(Count().joined, 0u);
  EXPECT_EQ(Count().evicted_pending, 0u);
  agg_->Read([](const State& st) { EXPECT_TRUE(st.hang_suspects.empty()); });
  clock_.Advance(Aggregator::kJoinSettleNs / 2 - 1);
  agg_->Tick();
  EXPECT_EQ(Count().joined, 0u);
  clock_.Advance(1);
  agg_->Tick();
  EXPECT_EQ(Count().joined, 3u);
  Send(MakeColl(kComm, 0, 2, 3, 1300000000LL, kMs));
  EXPECT_EQ(Count().joined, 4u);
  EXPECT_EQ(Count().evicted_pending, 0u);
}

// A known rank leaving (its process ended or its connection closed) ends the wait: the joins it
// reported in complete as they would have without it.
TEST_F(AggregatorTest, ARankLeavingEndsTheWait) {
  AnnounceOnlyRankZeroOfTwo();
  Send(MakeColl(kComm, 0, 2, 0, 1000, 10));
  EXPECT_EQ(Count().joined, 0u);
  agg_->OnDisconnect(ClientOf(0));
  EXPECT_EQ(Count().joined, 1u);
  EXPECT_EQ(Rank(0).history.size(), 1u);
}

// Nothing is held where the node has its share of the ranks: one rank per node (2 ranks on 2
// nodes), and a communicator whose every local rank announced itself.
TEST_F(AggregatorTest, NoJoinIsHeldOnceTheNodesRanksAreKnown) {
  config_.straggler_warmup = 0;
  Make();
  agg_->NoteAccepted(ClientOf(0), 1000, 0);
  SentinelWireCommInit init = MakeCommInit(kComm, 0, 2);
  init.nnodes = 2;
  Control(ClientOf(0), kSentinelWireCommInit, init);
  Send(MakeColl(kComm, 0, 2, 0, 1000, 10));
  EXPECT_EQ(Count().joined, 1u) << "one rank per node: rank 0 is the node's whole share";

  constexpr uint64_t kOther = kComm + 1;
  Connect(3, kOther);  // 3 ranks on 1 node, all announced
  for (int r = 0; r < 3; ++r) Send(MakeColl(kOther, r, 3, 0, 1000 + r, 10), kOther);
  EXPECT_EQ(Count().joined, 2u);
}

TEST_F(AggregatorTest, EnqueueTimeWhenGpuTimesMissing) {
  config_.straggler_warmup = 0;
  Connect(2);
  auto a = MakeColl(kComm, 0, 2, 0, 0, 0);
  auto b = MakeColl(kComm, 1, 2, 0, 0, 0);
  a.flags = b.flags = 0;
  a.enqueue_ns = 7000;
  b.enqueue_ns = 9500;
  Send(a);
  Send(b);
  EXPECT_EQ(Rank(1).history.Newest().lateness_ns, 2500);
  EXPECT_EQ(Rank(1).history.Newest().duration_ns, -1);
  EXPECT_EQ(Rank(1).history.Newest().clock_free_ns, -1);
}

TEST_F(AggregatorTest, P2pIsCountedNotJoined) {
  Connect(2);
  auto p = MakeColl(kComm, 0, 2, 0, 100, 10, 4096, kSentinelFuncSend);
  p.flags |= kSentinelCollIsP2p;
  p.peer = 1;
  Send(p);
  EXPECT_EQ(Rank(0).p2p, 1u);
  EXPECT_EQ(Rank(0).collectives, 0u);
  EXPECT_EQ(Count().joined, 0u);
  EXPECT_EQ(Rank(0).history.Newest().lateness_ns, -1);
}

TEST_F(AggregatorTest, InvalidRecordsAreCountedAndIgnored) {
  Connect(2);
  auto bad = MakeColl(kComm, 5, 2, 0, 100, 10);  // rank >= nranks
  agg_->OnRecords(ClientOf(0), &bad, 1);
  bad = MakeColl(kComm, 0, 0, 0, 100, 10);  // nranks 0
  agg_->OnRecords(ClientOf(0), &bad, 1);
  bad = MakeColl(kComm, 0, 2, 0, 100, 10);  // hostile stamps must not overflow the math
  bad.gpu_start_ns = INT64_MIN + 5;
  agg_->OnRecords(ClientOf(0), &bad, 1);
  bad = MakeColl(kComm, 1, 2, 0, 100, 10);
  bad.gpu_start_ns = INT64_MAX - 5;
  bad.gpu_end_ns = INT64_MAX;
  agg_->OnRecords(ClientOf(1), &bad, 1);
  EXPECT_EQ(Count().records_invalid, 4u);
  EXPECT_EQ(Count().joined, 0u);
}

// Runs `model` for `steps` steps through OnRecords, the fake clock following the virtual time.
// Returns, per step, nothing; `on_step(step)` runs after each step's collectives.
void AggregatorTest::Run(const eval::CommModel& model, const std::vector<eval::Slowdown>& slow,
                         int64_t steps, const std::function<void(int64_t)>& on_step) {
  eval::CommStepper stepper(model, 42, clock_.MonoNs());
  std::vector<SentinelWireCollRecord> recs;
  while (stepper.step() < steps) {
    const int64_t step = stepper.step();
    do {
      recs.clear();
      stepper.Next(slow, &recs);
      clock_.Set(stepper.now_ns());
      for (const auto& r : recs) agg_->OnRecords(ClientOf(r.rank), &r, 1);
    } while (stepper.step() == step);
    if (on_step) on_step(step);
  }
}

eval::CommModel Model(int nranks, std::vector<int64_t> compute, double jitter) {
  eval::CommModel m;
  m.hash = kComm;
  for (int r = 0; r < nranks; ++r) m.ranks.push_back(r);
  m.compute_ns = std::move(compute);
  m.jitter = jitter;
  return m;
}

std::vector<Alert> Firing(const std::vector<Alert>& all) {
  std::vector<Alert> out;
  for (const Alert& a : all)
    if (a.firing()) out.push_back(a);
  return out;
}

// What a rank's plugin sends of one collective at overhead-budget `level` (plugin/core/
// overhead_budget.h): at 2 and up, KernelCh is kept only on the bursts (ordinals 64k .. 64k+7) and
// the others carry kSentinelCollGpuSkipped and no GPU times; at 3 only the bursts' records are
// sent, marked kSentinelCollSampled. false: not sent. Every record carries its ordinal.
bool AsThePluginSendsIt(int level, SentinelWireCollRecord* r) {
  r->ordinal_lo = static_cast<uint32_t>(r->seq + 1);  // the stepper's seq counts from 0
  const bool burst = r->ordinal_lo % 64 < 8;
  if (level >= 3 && !burst) return false;
  if (level >= 3) r->flags |= kSentinelCollSampled;
  if (level >= 2 && !burst) {
    r->flags =
        static_cast<uint16_t>((r->flags & ~kSentinelCollGpuTimeValid) | kSentinelCollGpuSkipped);
    r->gpu_start_ns = 0;
    r->gpu_end_ns = 0;
  }
  return true;
}

struct RecentFigures {
  std::vector<double> segment_p50_ns;
  std::vector<double> duration_p50_ns;
  int64_t longest_segment_ns = 0;  // over every rank's recent window
};

// Ranks 0..3 of a 2 ms step (5 % jitter) for 3,000 steps, their plugins at budget `level`.
RecentFigures RunAtBudgetLevel(int level) {
  FakeClock clock;
  Aggregator agg(testing::ConfigWithoutPersistence(), &clock);
  constexpr int kRanks = 4;
  for (int r = 0; r < kRanks; ++r) {
    agg.NoteAccepted(1 + r, static_cast<uint32_t>(1000 + r), 0);
    agg.OnHello(1 + r, testing::MakeHello(static_cast<uint32_t>(1000 + r)));
    testing::DeliverControl(&agg, 1 + r, kSentinelWireCommInit, MakeCommInit(kComm, r, kRanks));
  }
  eval::CommModel model = Model(kRanks, {2 * kMs}, 0.05);
  eval::CommStepper stepper(model, 7, clock.MonoNs());
  std::vector<SentinelWireCollRecord> recs;
  while (stepper.step() < 3000) {
    recs.clear();
    stepper.Next({}, &recs);
    clock.Set(stepper.now_ns());
    for (SentinelWireCollRecord& r : recs) {
      if (AsThePluginSendsIt(level, &r)) agg.OnRecords(1 + r.rank, &r, 1);
    }
  }
  RecentFigures out;
  agg.Read([&](const State& s) {
    const CommState& comm = *s.comms.at(CommKey{0, kComm});
    if (!comm.wait) return;
    for (int r = 0; r < kRanks; ++r) {
      const WaitRankState* w = comm.wait->rank(comm.index.at(r));
      if (w == nullptr || w->recent_n < comm.wait->params().min_recent) continue;
      out.segment_p50_ns.push_back(w->segment_p50_ns);
      out.duration_p50_ns.push_back(w->duration_p50_ns);
      for (const auto& e : w->ring)
        out.longest_segment_ns = std::max(out.longest_segment_ns, e.segment_ns);
    }
  });
  return out;
}

// Whatever the plugin's overhead budget thins, the figures are the same (within their noise):
// the compute segment is measured only between consecutive collectives (the bursts keep 7 such
// pairs in 64), never across the 56 collectives the plugin did not send or did not time; before,
// a level-3 stream's segment spanned 8 collectives (8x the step) and a level-2 one mixed enqueue
// times into it.
TEST_F(AggregatorTest, ASampledStreamGivesTheFullStreamsSegmentAndDurationP50s) {
  const RecentFigures full = RunAtBudgetLevel(0);
  ASSERT_EQ(full.segment_p50_ns.size(), 4u);
  for (int level : {2, 3}) {
    SCOPED_TRACE(level);
    const RecentFigures sampled = RunAtBudgetLevel(level);
    ASSERT_EQ(sampled.segment_p50_ns.size(), 4u);
    for (size_t r = 0; r < 4; ++r) {
      SCOPED_TRACE(r);
      // The step: 2 ms of compute; the p50 of 64 segments with 5 % jitter is within ~1 %.
      EXPECT_NEAR(full.segment_p50_ns[r], 2.0 * kMs, 0.05 * 2 * kMs);
      EXPECT_NEAR(sampled.segment_p50_ns[r], full.segment_p50_ns[r], 0.05 * 2 * kMs);
      EXPECT_NEAR(sampled.duration_p50_ns[r], full.duration_p50_ns[r],
                  0.25 * full.duration_p50_ns[r] + 20000);
    }
    // No segment spans a gap: the longest is a step and its jitter, not 57 steps.
    EXPECT_LT(sampled.longest_segment_ns, 3 * kMs);
  }
}

TEST_F(AggregatorTest, SixRanksThreeMsComputeThirtyPercentSlowIsFound) {
  // A short step: 3 ms of compute, rank 4 slowed 30 % from step 200.
  Connect(6);
  int64_t fired_at = -1;
  const std::string id = "straggler-" + CommLabel(kComm) + "-r4";
  Run(Model(6, {3 * kMs}, 0.03), {{4, 0.30, 200, -1}}, 600, [&](int64_t step) {
    if (fired_at < 0 && Find(id) != nullptr) fired_at = step;
  });
  ASSERT_GE(fired_at, 200) << "nothing before the slowdown: " << Alerts()[0].summary
                           << Alerts()[0].evidence.dump();
  EXPECT_LE(fired_at, 260) << "found within 60 steps (0.2 s of compute)";
  const auto alerts = Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].ranks, std::vector<int>{4});
  EXPECT_EQ(alerts[0].kind, AlertKind::kStraggler);
  EXPECT_EQ(alerts[0].severity, AlertSeverity::kCritical);
  EXPECT_EQ(alerts[0].evidence["pattern"], "degraded");
  EXPECT_NEAR(alerts[0].evidence["relative_excess"].get<double>(), 0.30, 0.06);
}

// The default persistence: a rank 30 % late at 3 ms of compute (under half its compute, as ranks
// taking turns on a loaded host can be) is named once its late run spans 2 s of compute, not at
// the CUSUM's first crossing (within 60 steps above).
TEST_F(AggregatorTest, ThePersistenceInTimeHoldsAShortStepStragglerForTwoSeconds) {
  config_ = Config();
  Connect(6);
  int64_t fired_at = -1;
  const std::string id = "straggler-" + CommLabel(kComm) + "-r4";
  Run(Model(6, {3 * kMs}, 0.03), {{4, 0.30, 200, -1}}, 1400, [&](int64_t step) {
    if (fired_at < 0 && Find(id) != nullptr) fired_at = step;
  });
  // 2 s of compute at 3 ms (plus the 30 %: the segment the detector sums is the peers') is 667
  // steps; the CUSUM's own crossing comes within the first 60 of them.
  EXPECT_GE(fired_at, 200 + 600) << "held for 2 s of compute";
  EXPECT_LE(fired_at, 200 + 900);
  const auto alerts = Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].ranks, std::vector<int>{4});
}

TEST_F(AggregatorTest, RankLateOnlyAtTheFirstCollectiveOfEachStepIsFound) {
  // Many collectives per step: three collectives per step after 50 ms of compute; rank 5 is late
  // only at each step's first collective, and on time at the two that follow.
  for (double pct : {1.0, 0.2}) {
    SCOPED_TRACE(pct);
    agg_.reset();
    Connect(8);
    int64_t fired_at = -1;
    const std::string id = "straggler-" + CommLabel(kComm) + "-r5";
    Run(Model(8, {50 * kMs, 20000, 20000}, 0.02), {{5, pct, 40, -1}}, 140, [&](int64_t step) {
      if (fired_at < 0 && Find(id) != nullptr) fired_at = step;
    });
    ASSERT_GE(fired_at, 40);
    EXPECT_LE(fired_at, 60) << "within 20 steps (1 s of compute)";
    const auto alerts = Alerts();
    ASSERT_EQ(alerts.size(), 1u);
    EXPECT_EQ(alerts[0].ranks, std::vector<int>{5});
  }
}

TEST_F(AggregatorTest, NoiseAloneNeverFires) {
  // Gaussian jitter of 10 % of the compute, heavy-tailed extra delays, whole-job pauses, and
  // back-to-back collectives: 24,000 collectives and not one alert.
  Connect(8);
  eval::CommModel m = Model(8, {2 * kMs, 20000, 20000}, 0.10);
  m.heavy_tail = 0.01;
  m.pause_prob = 0.01;
  m.pause_ns = 500 * kMs;
  Run(m, {}, 8000, nullptr);
  EXPECT_TRUE(Alerts().empty()) << Alerts()[0].summary;
}

TEST_F(AggregatorTest, NoFlappingWhileTheSlowdownPersistsThenResolves) {
  // Heavy jitter (20 %) and a 20 % slowdown from step 300 to 2300: one fire, no resolve while
  // slowed, one resolve after.
  Connect(8);
  const std::string id = "straggler-" + CommLabel(kComm) + "-r5";
  int64_t resolved_at = -1;
  Run(Model(8, {2 * kMs}, 0.20), {{5, 0.20, 300, 2300}}, 3400, [&](int64_t step) {
    const Alert* a = Find(id);
    if (step == 2299) {
      ASSERT_NE(a, nullptr);
      EXPECT_TRUE(a->firing());
    }
    if (resolved_at < 0 && a != nullptr && !a->firing()) resolved_at = step;
  });
  EXPECT_GE(resolved_at, 2300);
  EXPECT_LE(resolved_at, 3300) << "resolved within 1000 steps (2 s of compute)";
  const auto changes = agg_->TakeAlertChanges();
  ASSERT_EQ(changes.size(), 2u) << "fired once, resolved once";
  EXPECT_TRUE(changes[0].firing());
  EXPECT_EQ(changes[1].resolve_reason, ResolveReason::kCleared);
}

TEST_F(AggregatorTest, StructurallySlowStageIsReportedAsSuch) {
  Connect(8);
  eval::CommModel m = Model(8, {5 * kMs}, 0.02);
  m.structural = {0, 0, 0, 0, 0, 0, 0, 0.25};  // the last pipeline stage
  Run(m, {}, 300, nullptr);
  const Alert* a = Find("straggler-" + CommLabel(kComm) + "-r7");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->evidence["pattern"], "structural");
  EXPECT_EQ(a->severity, AlertSeverity::kWarning);
  EXPECT_NE(a->summary.find("since the communicator started"), std::string::npos);
  EXPECT_EQ(Alerts().size(), 1u);
}

TEST_F(AggregatorTest, TwoRankStragglerIsStillFound) {
  Connect(2);
  Run(Model(2, {10 * kMs}, 0.02), {{1, 0.3, 0, -1}}, 300, nullptr);
  EXPECT_NE(Find("straggler-" + CommLabel(kComm) + "-r1"), nullptr);
  EXPECT_EQ(Find("straggler-" + CommLabel(kComm) + "-r0"), nullptr);
}

TEST_F(AggregatorTest, EndedCommunicatorResolvesItsAlertsAsEnded) {
  for (bool by_disconnect : {false, true}) {
    SCOPED_TRACE(by_disconnect);
    agg_.reset();
    Connect(4);
    Run(Model(4, {2 * kMs}, 0.02), {{2, 0.5, 0, -1}}, 400, nullptr);
    ASSERT_EQ(Firing(Alerts()).size(), 1u);
    for (int r = 0; r < 4; ++r) {
      if (by_disconnect) {
        agg_->OnDisconnect(ClientOf(r));
      } else {
        SentinelWireCommEnd end{};
        end.comm_hash = kComm;
        end.rank = r;
        Control(ClientOf(r), kSentinelWireCommEnd, end);
      }
      // Still firing while a local rank is in the communicator.
      EXPECT_EQ(Firing(Alerts()).size(), r < 3 ? 1u : 0u) << r;
    }
    const Alert* a = Find("straggler-" + CommLabel(kComm) + "-r2");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->state, AlertState::kResolved);
    EXPECT_EQ(a->resolve_reason, ResolveReason::kEnded);
  }
}

TEST_F(AggregatorTest, LatenessPercentilesExcludeTheStartUpCollectives) {
  Connect(4);
  // The first two collectives: processes started 100 ms apart.
  Collective(0, {0, 100 * kMs, 0, 0});
  Collective(1, {0, 100 * kMs, 0, 0});
  Collective(2, {0, 10000, 0, 0});
  EXPECT_EQ(Rank(1).lateness.count, 1u);
  EXPECT_LT(Rank(1).lateness.sum, 1e-3);
  EXPECT_EQ(Count().joined, 3u);
}

TEST_F(AggregatorTest, HangNamesTheRanksThatHaveNotArrived) {
  config_.hang_timeout_ns = 30LL * 1000 * kMs;
  Connect(4);
  Collective(0, {0, 0, 0, 0});
  for (int r = 0; r < 3; ++r) Send(MakeColl(kComm, r, 4, 1, 9000000000LL, 10));
  clock_.Advance(29LL * 1000 * kMs);
  agg_->Tick();
  EXPECT_TRUE(Alerts().empty());
  clock_.Advance(2LL * 1000 * kMs);
  agg_->Tick();
  const Alert* a = Find("hang-" + CommLabel(kComm));
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->firing());
  EXPECT_EQ(a->ranks, std::vector<int>{3});
  EXPECT_EQ(a->evidence["missing_ranks"], nlohmann::json({3}));
  EXPECT_EQ(a->evidence["arrived_ranks"], nlohmann::json({0, 1, 2}));
  EXPECT_EQ(a->evidence["seq"], 1);
  agg_->Read([](const State& s) { EXPECT_EQ(s.hang_suspects.size(), 1u); });
  Send(MakeColl(kComm, 3, 4, 1, 9000000000LL, 10));
  agg_->Tick();
  EXPECT_EQ(Find("hang-" + CommLabel(kComm))->state, AlertState::kResolved);
}

TEST_F(AggregatorTest, DroppedRecordIsNotAHang) {
  config_.hang_timeout_ns = 1000 * kMs;
  Connect(2);
  Send(MakeColl(kComm, 0, 2, 0, 100, 10));
  Send(MakeColl(kComm, 0, 2, 1, 200, 10));
  Send(MakeColl(kComm, 1, 2, 1, 200, 10));  // rank 1's seq 0 was dropped by its plugin
  clock_.Advance(2000 * kMs);
  agg_->Tick();
  EXPECT_TRUE(Alerts().empty());
  EXPECT_EQ(Count().evicted_pending, 1u);
}

TEST_F(AggregatorTest, DisconnectedRankNoLongerHoldsTheJoin) {
  Connect(3);
  Send(MakeColl(kComm, 0, 3, 0, 100, 10));
  Send(MakeColl(kComm, 1, 3, 0, 100, 10));
  EXPECT_EQ(Count().joined, 0u);
  agg_->OnDisconnect(ClientOf(2));
  EXPECT_EQ(Count().joined, 1u);
  EXPECT_FALSE(Rank(2).active);
}

TEST_F(AggregatorTest, MemoryIsBoundedAndEvictionsCounted) {
  config_.pending_slots = 8;
  config_.history_per_rank = 16;
  config_.history_collectives = 32;
  config_.max_comms = 2;
  Make();
  Connect(2);
  for (uint64_t seq = 0; seq < 1000; ++seq) Collective(seq, {0, 1000});
  EXPECT_EQ(Rank(0).history.size(), 16u);
  Counters c = Count();
  EXPECT_EQ(c.evicted_samples, 2u * (1000 - 16));
  EXPECT_EQ(c.evicted_collectives, 1000u - 32);
  // Rank 1 stops: rank 0 runs ahead by far more than the pending window.
  for (uint64_t seq = 1000; seq < 1100; ++seq) Send(MakeColl(kComm, 0, 2, seq, 0, 10));
  c = Count();
  EXPECT_EQ(c.evicted_pending, 100u - 8);
  agg_->Read([](const State& s) {
    for (const auto& [h, comm] : s.comms) {
      for (const auto& ring : comm->rings) {
        if (ring) {
          EXPECT_EQ(ring->slots.size(), 8u);
        }
      }
    }
  });
  // More communicators than --max-comms: the idle ones go, and it is counted.
  for (uint64_t comm = 1; comm <= 5; ++comm) {
    agg_->NoteAccepted(500 + static_cast<int>(comm), 1, 0);
    const auto r = MakeColl(comm, 0, 1, 0, 0, 10);
    agg_->OnRecords(500 + static_cast<int>(comm), &r, 1);
  }
  agg_->Read([](const State& s) { EXPECT_LE(s.comms.size(), 2u); });
  EXPECT_GE(Count().evicted_comms, 4u);
}

TEST_F(AggregatorTest, VerdictBecomesTransportAlert) {
  Connect(2);
  SentinelWireVerdict v =
      testing::MakeVerdict(kComm, 1, 2, kSentinelVerdictTransport, kSentinelOutcomeFail);
  std::strcpy(v.expected, "net=ib");
  std::strcpy(v.found, "net=socket");
  std::strcpy(v.cause, "NCCL_IB_DISABLE=1 is set");
  std::strcpy(v.evidence, "NCCL INFO Using network Socket\nNCCL_IB_DISABLE=1");
  Control(ClientOf(1), kSentinelWireVerdict, v);
  const Alert* a = Find("transport-" + CommLabel(kComm));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->kind, AlertKind::kTransport);
  EXPECT_EQ(a->severity, AlertSeverity::kCritical);
  EXPECT_EQ(a->evidence["found"], "net=socket");
  EXPECT_EQ(a->evidence["lines"].size(), 2u);
  v.outcome = kSentinelOutcomePass;
  Control(ClientOf(1), kSentinelWireVerdict, v);
  EXPECT_EQ(Find("transport-" + CommLabel(kComm))->state, AlertState::kResolved);
}

TEST_F(AggregatorTest, HeartbeatGivesOverheadRatio) {
  Connect(1);
  SentinelWireHeartbeat hb{};
  hb.now_ns = 1000000000;
  hb.callback_ns_total = 1000;
  Control(ClientOf(0), kSentinelWireHeartbeat, hb);
  hb.now_ns += 1000000000;
  hb.callback_ns_total += 2000000;  // 2 ms per second
  hb.records_dropped_ring = 3;
  Control(ClientOf(0), kSentinelWireHeartbeat, hb);
  agg_->Read([&](const State& s) {
    const ProcessState& p = *s.processes.at(ClientOf(0));
    EXPECT_DOUBLE_EQ(p.overhead_ratio, 0.002);
    EXPECT_EQ(p.heartbeat.records_dropped_ring, 3u);
  });
}

}  // namespace
}  // namespace sentinel::collector
