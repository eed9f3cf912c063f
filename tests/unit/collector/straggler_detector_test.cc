// Tests of the straggler detector's math (collector/aggregate/straggler_detector.h) on modelled
// collectives: a seeded generator stands in for the ranks, so every case is deterministic. The
// end-to-end cases (real ranks, real sentineld) are in tests/integration/collector; the false-alert
// rates across noise families are measured by the detection evaluation.
#include "collector/aggregate/straggler_detector.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sentinel::collector {
namespace {

// A communicator of `ranks` local ranks whose compute between collectives is `segment_ns` with
// `jitter` (relative, normal). `slow` ranks compute `slowdown` longer from collective `from`.
struct Model {
  int ranks = 8;
  int64_t segment_ns = 10'000'000;
  double jitter = 0.02;
  std::vector<int> slow;
  double slowdown = 0.0;
  uint64_t from = 0;
  uint64_t until = UINT64_MAX;  // the slowdown ends here
  uint32_t seed = 7;
  // A loaded host's own scheduling: every rank, in turn, loses its CPU for a while. Each rank
  // holds a slowdown for a run of collectives (geometric, mean `hold`), then redraws it: none half
  // of the time, uniform [0, contention) the other half. The same for every rank: no straggler.
  double contention = 0;
  double hold = 0;
  uint64_t contention_from = 0;
  uint64_t contention_until = UINT64_MAX;  // the host is quiet again from here
};

struct Transitions {
  std::vector<StragglerEvent> events;
  std::vector<uint64_t> event_seq;
};

// Feeds `n` collectives of `m` to `d`, starting at seq `first`.
Transitions Feed(StragglerDetector* d, const Model& m, uint64_t first, uint64_t n,
                 std::mt19937* rng) {
  std::normal_distribution<double> noise(0.0, m.jitter);
  Transitions run;
  std::vector<StragglerDetector::Observation> obs(static_cast<size_t>(m.ranks));
  std::vector<int64_t> arrival(static_cast<size_t>(m.ranks));
  std::vector<double> held(static_cast<size_t>(m.ranks), 0.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (uint64_t seq = first; seq < first + n; ++seq) {
    for (int r = 0; r < m.ranks; ++r) {
      double f = 1.0 + noise(*rng);
      if (m.contention > 0 && seq >= m.contention_from && seq < m.contention_until) {
        double& h = held[static_cast<size_t>(r)];
        if (unit(*rng) < 1.0 / m.hold) h = unit(*rng) < 0.5 ? 0.0 : unit(*rng) * m.contention;
        f += h;
      }
      const bool slowed = seq >= m.from && seq < m.until &&
                          std::find(m.slow.begin(), m.slow.end(), r) != m.slow.end();
      if (slowed) f += m.slowdown;
      arrival[static_cast<size_t>(r)] =
          static_cast<int64_t>(static_cast<double>(m.segment_ns) * std::max(f, 0.1));
    }
    const int64_t earliest = *std::min_element(arrival.begin(), arrival.end());
    for (int r = 0; r < m.ranks; ++r) {
      // Every rank's previous collective ended at the same instant (a collective is a barrier).
      obs[static_cast<size_t>(r)] = {r, arrival[static_cast<size_t>(r)] - earliest,
                                     arrival[static_cast<size_t>(r)]};
    }
    const size_t before = run.events.size();
    d->Observe(obs, seq, &run.events);
    for (size_t i = before; i < run.events.size(); ++i) run.event_seq.push_back(seq);
  }
  return run;
}

int Fired(const Transitions& run, int member) {
  int n = 0;
  for (const StragglerEvent& e : run.events) {
    n += e.member == member && e.change == StragglerChange::kFired ? 1 : 0;
  }
  return n;
}

TEST(StragglerDetectorTest, QuietRanksWithJitterNeverFire) {
  StragglerDetector d{StragglerParams{}};
  std::mt19937 rng(11);
  Model m;
  m.jitter = 0.03;
  const Transitions run = Feed(&d, m, 1, 20000, &rng);
  EXPECT_TRUE(run.events.empty()) << run.events.size() << " transitions, first at seq "
                                  << (run.event_seq.empty() ? 0 : run.event_seq[0]);
  EXPECT_EQ(d.observed(), 20000u);
  EXPECT_GT(d.threshold_ns(), 0.0);
}

// The CUSUM's own math, without the persistence of the evidence in time (min_evidence_ns): the
// cases below count collectives, whatever the segment.
StragglerParams CollectivesOnly() {
  StragglerParams p;
  p.min_evidence_ns = 0;
  return p;
}

TEST(StragglerDetectorTest, ARankSlowedTwentyPercentFiresAsNewlyDegradedWithItsRealExcess) {
  StragglerDetector d{CollectivesOnly()};
  std::mt19937 rng(3);
  Model m;
  m.slow = {5};
  m.slowdown = 0.20;
  m.from = 500;
  const Transitions run = Feed(&d, m, 1, 1000, &rng);
  ASSERT_EQ(Fired(run, 5), 1);
  for (const StragglerEvent& e : run.events) EXPECT_EQ(e.member, 5) << "only the slow rank";
  EXPECT_GE(run.event_seq[0], 500u) << "not before the slowdown";
  EXPECT_LE(run.event_seq[0], 540u) << "within a few dozen collectives of it";
  const StragglerRankState* s = d.rank(5);
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->firing);
  EXPECT_EQ(s->pattern, StragglerPattern::kDegraded);
  EXPECT_NEAR(d.RelativeExcess(5), 0.20, 0.05) << "the excess the rank really has";
}

TEST(StragglerDetectorTest, ARankSlowFromTheStartIsStructural) {
  StragglerDetector d{StragglerParams{}};
  std::mt19937 rng(5);
  Model m;
  m.slow = {7};
  m.slowdown = 0.15;
  const Transitions run = Feed(&d, m, 1, 600, &rng);
  ASSERT_EQ(Fired(run, 7), 1);
  EXPECT_EQ(d.rank(7)->pattern, StragglerPattern::kStructural);
}

TEST(StragglerDetectorTest, TheAlertResolvesWhenTheSlowdownEndsAndDoesNotFlapWhileItLasts) {
  StragglerDetector d{StragglerParams{}};
  std::mt19937 rng(9);
  Model m;
  m.slow = {2};
  m.slowdown = 0.10;
  m.from = 300;
  m.until = 1300;
  const Transitions run = Feed(&d, m, 1, 2000, &rng);
  ASSERT_EQ(run.events.size(), 2u) << "one fire, one resolve";
  EXPECT_EQ(run.events[0].change, StragglerChange::kFired);
  EXPECT_EQ(run.events[1].change, StragglerChange::kResolved);
  EXPECT_GE(run.event_seq[1], 1300u);
  EXPECT_LE(run.event_seq[1], 1500u);
  EXPECT_FALSE(d.rank(2)->firing);
}

TEST(StragglerDetectorTest, TheTimeScaleDoesNotMatter) {
  // The same relative slowdown fires at the same collective at 1 ms and at 200 ms of compute.
  std::vector<uint64_t> fired_at;
  for (int64_t segment : {1'000'000LL, 200'000'000LL}) {
    StragglerDetector d{CollectivesOnly()};
    std::mt19937 rng(21);
    Model m;
    m.segment_ns = segment;
    m.slow = {1};
    m.slowdown = 0.12;
    m.from = 400;
    const Transitions run = Feed(&d, m, 1, 900, &rng);
    ASSERT_EQ(Fired(run, 1), 1) << segment;
    fired_at.push_back(run.event_seq[0]);
  }
  EXPECT_EQ(fired_at[0], fired_at[1]);
}

// The collective at which `m`'s slow rank first fires, without and with the persistence in time
// (the same noise for both); 0 when it does not fire exactly once.
struct FiredAt {
  uint64_t collectives_only = 0;
  uint64_t with_persistence = 0;
};
FiredAt FireWithAndWithoutPersistence(const Model& m, uint32_t seed, uint64_t n) {
  FiredAt at;
  for (bool persist : {false, true}) {
    StragglerDetector d{persist ? StragglerParams{} : CollectivesOnly()};
    std::mt19937 rng(seed);
    const Transitions run = Feed(&d, m, 1, n, &rng);
    const uint64_t seq = Fired(run, m.slow[0]) == 1 ? run.event_seq[0] : 0;
    (persist ? at.with_persistence : at.collectives_only) = seq;
  }
  return at;
}

// The evidence must span min_evidence_ns of compute: at 1 ms segments a 20 % straggler fires once
// its late run has lasted 2 s, at 200 ms segments as soon as the CUSUM crosses (10 segments).
TEST(StragglerDetectorTest, TheEvidenceMustOutlastAHostsSchedulingBurst) {
  for (int64_t segment : {1'000'000LL, 200'000'000LL}) {
    Model m;
    m.segment_ns = segment;
    m.slow = {3};
    m.slowdown = 0.2;
    m.from = 400;
    const FiredAt at = FireWithAndWithoutPersistence(m, 23, 3000);
    ASSERT_GT(at.collectives_only, 0u) << segment;
    ASSERT_GT(at.with_persistence, 0u) << segment;
    const uint64_t min_colls = static_cast<uint64_t>(2'000'000'000LL / segment);
    EXPECT_GE(at.with_persistence, at.collectives_only) << segment;
    EXPECT_GE(at.with_persistence, m.from + min_colls * 9 / 10) << segment;
    EXPECT_LE(at.with_persistence, std::max(at.collectives_only, m.from + min_colls * 3 / 2))
        << segment;
  }
}

// A rank late by its whole compute (a stuck data loader, a demo's injected delay) is beyond what
// ranks taking turns on a loaded host produce: it fires as soon as the CUSUM crosses, with no
// persistence in time, even at 1 ms segments where 2 s would be 2,000 collectives.
TEST(StragglerDetectorTest, ARankLateByItsWholeComputeNeedsNoPersistenceInTime) {
  Model m;
  m.segment_ns = 1'000'000;
  m.slow = {2};
  m.slowdown = 1.0;
  m.from = 400;
  const FiredAt at = FireWithAndWithoutPersistence(m, 29, 1000);
  ASSERT_GT(at.collectives_only, 0u);
  EXPECT_EQ(at.with_persistence, at.collectives_only);
  EXPECT_LT(at.with_persistence, m.from + 100);
}

TEST(StragglerDetectorTest, BelowTheSmallestSlowdownWorthAnAlertNothingFires) {
  StragglerParams p;
  p.rel = 0.05;
  StragglerDetector d{p};
  std::mt19937 rng(13);
  Model m;
  m.jitter = 0.01;
  m.slow = {4};
  m.slowdown = 0.015;  // under k = rel / 2
  m.from = 200;
  const Transitions run = Feed(&d, m, 1, 4000, &rng);
  EXPECT_EQ(Fired(run, 4), 0);
}

// What a noise-only job of real processes looks like on a loaded 2-core host at 1 ms steps
// (scripts/noise_soak.py's record log): the ranks take turns being late by 10-30 % of the compute
// for hundreds of collectives each. Each rank's lateness over one such run is far beyond what the
// per-collective noise predicts, but no rank is slower than the others over time.
TEST(StragglerDetectorTest, RanksTakingTurnsBeingDescheduledAreNotStragglers) {
  for (uint32_t seed : {31u, 32u, 33u}) {
    StragglerDetector d{StragglerParams{}};
    std::mt19937 rng(seed);
    Model m;
    m.segment_ns = 1'000'000;
    m.jitter = 0.03;
    m.contention = 0.3;
    m.hold = 400;
    // From the start, and starting mid-job (a build started beside it): the estimate of the
    // long-run noise lags the load, the persistence bridges it.
    m.contention_from = seed == 32u ? 5000 : 0;
    const Transitions run = Feed(&d, m, 1, 60000, &rng);
    std::string log;
    for (size_t i = 0; i < run.events.size(); ++i) {
      log += " " + std::to_string(run.events[i].member) +
             (run.events[i].change == StragglerChange::kFired ? "+" : "-") + "@" +
             std::to_string(run.event_seq[i]);
    }
    EXPECT_TRUE(run.events.empty()) << "seed " << seed << ":" << log;
  }
}

// The long-run noise estimate recovers once the host is quiet again: a rank slowed by 20 % a
// while after the contention ended is caught.
TEST(StragglerDetectorTest, AfterTheContentionEndsARealStragglerIsStillCaught) {
  StragglerDetector d{StragglerParams{}};
  std::mt19937 rng(41);
  Model m;
  m.segment_ns = 1'000'000;
  m.contention = 0.3;
  m.hold = 400;
  m.contention_until = 20000;
  m.slow = {6};
  m.slowdown = 0.2;
  m.from = 100000;
  const Transitions run = Feed(&d, m, 1, 140000, &rng);
  ASSERT_EQ(Fired(run, 6), 1);
  EXPECT_EQ(run.events.size(), 1u) << "only rank 6";
  EXPECT_GE(run.event_seq[0], 100000u);
  EXPECT_LE(run.event_seq[0], 100000u + 2000u) << "within a couple of thousand collectives";
}

// In a job's first seconds the long-run noise at the collective scales is not measured yet (blocks
// of 4,096 collectives at 1 ms steps need 8 s), so a host whose ranks take turns for longer than
// the 2 s of evidence used to raise alerts there. Blocks of 1 s of compute measure the host's
// time scale after 3 s at any step, and nobody fires before.
TEST(StragglerDetectorTest, LongTurnsInAJobsFirstSecondsAreNotStragglers) {
  int fired = 0;
  std::string log;
  for (uint32_t seed = 51; seed < 91; ++seed) {
    StragglerDetector d{StragglerParams{}};
    std::mt19937 rng(seed);
    Model m;
    m.segment_ns = 1'000'000;
    m.jitter = 0.03;
    m.contention = 0.3;
    m.hold = 400;  // turns of 0.4 s on average, a few of them longer than the evidence's 2 s
    const Transitions run = Feed(&d, m, 1, 6000, &rng);  // the first 6 s
    for (size_t i = 0; i < run.events.size(); ++i) {
      if (run.events[i].change != StragglerChange::kFired) continue;
      ++fired;
      log += " seed " + std::to_string(seed) + ": " + std::to_string(run.events[i].member) + "@" +
             std::to_string(run.event_seq[i]);
    }
    EXPECT_TRUE(d.HostScaleMeasured()) << seed;
    EXPECT_GT(d.host_block_var(), 0.0) << seed;
  }
  EXPECT_EQ(fired, 0) << log;
}

// The hold ends once the host scale is measured: a rank 20 % slower from a job's first collectives
// is named a few seconds in, at 1 ms as at 200 ms steps; without persistence (min_evidence_ns 0)
// there is no host scale and no hold.
TEST(StragglerDetectorTest, AStragglerFromTheJobsStartIsNamedOnceTheHostScaleIsMeasured) {
  for (int64_t segment : {1'000'000LL, 200'000'000LL}) {
    Model m;
    m.segment_ns = segment;
    m.slow = {3};
    m.slowdown = 0.2;
    m.from = 40;
    const FiredAt at = FireWithAndWithoutPersistence(m, 59, 8000);
    ASSERT_GT(at.with_persistence, 0u) << segment;
    ASSERT_GT(at.collectives_only, 0u) << segment;
    // Three blocks of 1 s of compute, and at most a second more of evidence, or the CUSUM's own
    // crossing when that is later.
    const uint64_t limit =
        std::max(at.collectives_only, static_cast<uint64_t>(4'000'000'000LL / segment)) + 8;
    EXPECT_LE(at.with_persistence, limit) << segment << " " << at.collectives_only;
  }
  StragglerDetector d{CollectivesOnly()};
  std::mt19937 rng(5);
  Feed(&d, Model{}, 1, 1000, &rng);
  EXPECT_FALSE(d.HostScaleMeasured());
  EXPECT_EQ(d.host_block_var(), 0.0);
}

TEST(StragglerDetectorTest, ResetResolvesEveryFiringRank) {
  StragglerDetector d{StragglerParams{}};
  std::mt19937 rng(17);
  Model m;
  m.slow = {0};
  m.slowdown = 0.3;
  m.from = 100;
  ASSERT_EQ(Fired(Feed(&d, m, 1, 400, &rng), 0), 1);
  ASSERT_TRUE(d.rank(0)->firing);
  d.Reset();
  EXPECT_FALSE(d.rank(0)->firing);
  EXPECT_EQ(d.rank(99), nullptr);
  EXPECT_EQ(d.rank(-1), nullptr);
}

}  // namespace
}  // namespace sentinel::collector
