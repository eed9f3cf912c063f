// Tests of the clock-free wait evidence (collector/aggregate/wait_evidence.h) on a modelled job of
// several nodes, each node judging its own ranks alone (one WaitEvidence per node, fed only its
// local ranks' figures on its own clock), and of the node-level judgement. A seeded generator
// stands in for the ranks: every case is deterministic.
#include "collector/aggregate/wait_evidence.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sentinel::collector {
namespace {

constexpr int64_t kMs = 1'000'000;

// A communicator with `per_node` ranks on each of `nodes` nodes. Every step each rank computes
// `compute_ns` (relative normal `jitter`), then the collective starts when the last rank arrived
// and takes `transfer_ns` (relative normal `transfer_jitter`) on every rank.
struct JobModel {
  int nodes = 8;
  int per_node = 1;
  int64_t compute_ns = 10 * kMs;
  double jitter = 0.03;
  int64_t transfer_ns = 1 * kMs;
  double transfer_jitter = 0.02;
  // The transfer's own spread from one collective to the next (relative normal, the same on every
  // rank of a collective: it ends at nearly the same instant everywhere). Above the transfer floor
  // it reads as wait on every node, so a node's usual remote wait never falls to 0.
  double transfer_spread = 0;
  // A slowdown of `slowdown` (relative) on node `slow_node` (its local rank `slow_local`, or all
  // its local ranks when -1), or on every rank when `slow_node` is -2, from step `from`.
  int slow_node = -1;
  int slow_local = -1;
  double slowdown = 0;
  uint64_t from = 0;
  uint64_t until = UINT64_MAX;
  // Hiccups: per rank and second of compute, a delay uniform in [hiccup_min, hiccup_max].
  double hiccups_per_s = 0;
  int64_t hiccup_min_ns = 20 * kMs;
  int64_t hiccup_max_ns = 100 * kMs;
  // Whole-job pauses: per second, every rank stops for a time uniform in [1 s, 3 s].
  double pauses_per_s = 0;
  // A slow link: the transfer takes `link_slowdown` (relative) longer on every rank in steps
  // [link_from, link_until).
  double link_slowdown = 0;
  uint64_t link_from = 0;
  uint64_t link_until = 0;
  uint32_t seed = 11;
};

struct Flag {
  int node = 0;
  int local = 0;
  uint64_t step = 0;   // when it was flagged
  uint64_t since = 0;  // its since_seq
};

class Job {
 public:
  explicit Job(const JobModel& m, WaitParams params = {}) : m_(m), rng_(m.seed) {
    for (int n = 0; n < m.nodes; ++n) nodes_.emplace_back(params);
    const size_t ranks = static_cast<size_t>(m.nodes * m.per_node);
    prev_end_.assign(ranks, 0);
    arrival_.assign(ranks, 0);
  }

  // Runs `steps` collectives; returns every flag raised (and records clears).
  std::vector<Flag> Run(uint64_t steps) {
    std::normal_distribution<double> noise(0.0, 1.0);
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    std::vector<Flag> flags;
    std::vector<WaitObservation> obs;
    const size_t ranks = prev_end_.size();
    for (uint64_t s = 0; s < steps; ++s, ++step_) {
      const double step_s = static_cast<double>(m_.compute_ns) / 1e9;
      const bool pause = u01(rng_) < m_.pauses_per_s * step_s;
      const int64_t pause_ns = pause ? static_cast<int64_t>((1 + 2 * u01(rng_)) * 1e9) : 0;
      int64_t last = 0;
      for (size_t r = 0; r < ranks; ++r) {
        const int node = static_cast<int>(r) / m_.per_node;
        const int local = static_cast<int>(r) % m_.per_node;
        const bool slow_window = step_ >= m_.from && step_ < m_.until;
        const bool slow = slow_window &&
                          (m_.slow_node == -2 ||
                           (node == m_.slow_node && (m_.slow_local < 0 || local == m_.slow_local)));
        double c = static_cast<double>(m_.compute_ns) * (1 + (slow ? m_.slowdown : 0.0)) *
                   std::max(0.5, 1 + m_.jitter * noise(rng_));
        if (u01(rng_) < m_.hiccups_per_s * step_s) {
          c += static_cast<double>(m_.hiccup_min_ns) +
               u01(rng_) * static_cast<double>(m_.hiccup_max_ns - m_.hiccup_min_ns);
        }
        arrival_[r] = prev_end_[r] + static_cast<int64_t>(c) + pause_ns;
        last = std::max(last, arrival_[r]);
      }
      std::vector<int64_t> end(ranks);
      const bool slow_link = step_ >= m_.link_from && step_ < m_.link_until;
      double transfer =
          static_cast<double>(m_.transfer_ns) * (1 + (slow_link ? m_.link_slowdown : 0.0));
      if (m_.transfer_spread > 0) transfer *= std::max(0.5, 1 + m_.transfer_spread * noise(rng_));
      for (size_t r = 0; r < ranks; ++r) {
        end[r] = last + static_cast<int64_t>(transfer *
                                             std::max(0.5, 1 + m_.transfer_jitter * noise(rng_)));
      }
      for (int n = 0; n < m_.nodes; ++n) {
        int64_t node_last = 0;
        for (int l = 0; l < m_.per_node; ++l) {
          node_last = std::max(node_last, arrival_[static_cast<size_t>(n * m_.per_node + l)]);
        }
        if (waited_.size() < static_cast<size_t>(m_.nodes)) {
          waited_.assign(static_cast<size_t>(m_.nodes), uint64_t{0});
        }
        if (node_last < last) ++waited_[static_cast<size_t>(n)];
        obs.clear();
        int64_t now = 0;
        for (int l = 0; l < m_.per_node; ++l) {
          const size_t r = static_cast<size_t>(n * m_.per_node + l);
          obs.push_back({l, arrival_[r], end[r] - arrival_[r], arrival_[r] - prev_end_[r]});
          now = std::max(now, end[r]);
        }
        WaitEvidence& w = nodes_[static_cast<size_t>(n)];
        w.Observe(obs, step_, 0, now);
        for (int l = 0; l < m_.per_node; ++l) {
          const WaitRankState* st = w.rank(l);
          if (st != nullptr && st->changed && st->flagged) {
            flags.push_back({n, l, step_, st->since_seq});
          }
        }
      }
      for (size_t r = 0; r < ranks; ++r) prev_end_[r] = end[r];
    }
    return flags;
  }

  const WaitEvidence& node(int n) const { return nodes_[static_cast<size_t>(n)]; }
  JobModel& model() { return m_; }
  // The share of the steps so far in which node n was not the last to arrive (it waited).
  double waited_share(int n) const {
    return step_ == 0
               ? 0.0
               : static_cast<double>(waited_[static_cast<size_t>(n)]) / static_cast<double>(step_);
  }

 private:
  JobModel m_;
  std::mt19937 rng_;
  std::vector<WaitEvidence> nodes_;
  std::vector<int64_t> prev_end_;
  std::vector<int64_t> arrival_;
  uint64_t step_ = 0;
  std::vector<uint64_t> waited_;
};

// One rank per node (the data-parallel layout): node 3's rank computes 20 % longer from step 600
// at 10 ms steps. Node 3 says so itself within 10 s (1,000 steps), with the onset near step 600;
// no other node flags anything.
TEST(WaitEvidenceTest, SlowRankOnePerNodeIsFlaggedByItsOwnNode) {
  JobModel m;
  m.slow_node = 3;
  m.slowdown = 0.20;
  m.from = 600;
  Job job(m);
  const std::vector<Flag> flags = job.Run(3000);
  ASSERT_FALSE(flags.empty());
  EXPECT_EQ(flags.front().node, 3);
  EXPECT_GE(flags.front().step, 600u);
  EXPECT_LT(flags.front().step, 600u + 1000u) << "later than 10 s of 10 ms steps";
  EXPECT_NEAR(static_cast<double>(flags.front().since), 600.0, 40.0);
  for (const Flag& f : flags) EXPECT_EQ(f.node, 3) << "node " << f.node << " at " << f.step;
  const WaitRankState* st = job.node(3).rank(0);
  ASSERT_NE(st, nullptr);
  EXPECT_TRUE(st->flagged);
  // The figures are the measured ones: +20 % compute, and the node no longer waits.
  EXPECT_NEAR(st->segment_p50_ns / st->usual_segment_ns, 1.2, 0.05);
  EXPECT_LT(st->remote_wait_p75_ns, st->usual_wait_ns / 4);
  // The others wait for it: their collectives last about the 2 ms it is late longer than its own
  // (what the job-wide rules compare across nodes, no clock shared).
  const WaitRankState* other = job.node(0).rank(0);
  EXPECT_NEAR(other->duration_p50_ns - st->duration_p50_ns, 2.0 * kMs, 0.3 * kMs);
  EXPECT_FALSE(other->flagged);
}

// The relative thresholds hold at every time scale: 20 % at 1 ms and at 100 ms steps.
TEST(WaitEvidenceTest, RelativeAtEveryStepLength) {
  for (int64_t compute : {1 * kMs, 100 * kMs}) {
    JobModel m;
    m.compute_ns = compute;
    m.transfer_ns = compute / 10;
    m.slow_node = 5;
    m.slowdown = 0.20;
    m.from = 400;
    Job job(m);
    const std::vector<Flag> flags = job.Run(1400);
    ASSERT_FALSE(flags.empty()) << compute;
    EXPECT_EQ(flags.front().node, 5) << compute;
    EXPECT_LT(flags.front().step, 500u) << compute;
    for (const Flag& f : flags) EXPECT_EQ(f.node, 5) << compute;
  }
}

// Noise only: jitter, random 20-100 ms hiccups at 0.1 per rank per second, whole-job pauses of
// 1-3 s, at 1, 10 and 50 ms steps, several seeds, 16 nodes: nothing is flagged.
TEST(WaitEvidenceTest, NoiseHiccupsAndPausesFlagNothing) {
  for (int64_t compute : {1 * kMs, 10 * kMs, 50 * kMs}) {
    for (uint32_t seed : {1u, 2u, 3u}) {
      JobModel m;
      m.nodes = 16;
      m.compute_ns = compute;
      m.transfer_ns = compute / 5;
      m.hiccups_per_s = 0.1;
      m.pauses_per_s = 1.0 / 30;
      m.seed = seed;
      Job job(m);
      // Three minutes of job time (at most 60,000 steps).
      const uint64_t steps = std::min<uint64_t>(60000, static_cast<uint64_t>(180e9 / compute));
      const std::vector<Flag> flags = job.Run(steps);
      EXPECT_TRUE(flags.empty()) << "compute " << compute << " seed " << seed << ": node "
                                 << flags.front().node << " at step " << flags.front().step;
    }
  }
}

// Every rank computes 30 % longer (a new phase of the job): nobody stopped waiting, nothing is
// flagged. A 3 % slowdown of one node (below rel = 5 %) is not named either.
TEST(WaitEvidenceTest, JobWideSlowdownAndSmallSlowdownsAreNotStragglers) {
  JobModel all;
  all.slow_node = -2;
  all.slowdown = 0.30;
  all.from = 500;
  Job job(all);
  EXPECT_TRUE(job.Run(3000).empty());

  JobModel small;
  small.slow_node = 2;
  small.slowdown = 0.03;
  small.from = 500;
  Job job2(small);
  EXPECT_TRUE(job2.Run(3000).empty());
}

// A quiet job (no jitter: the nodes never wait for each other) has a slow link for 100 steps
// (every transfer 50 % longer: time above the transfer floor, on every node, until the floor
// catches up), then node 1 computes 8 % longer. Node 1 never usually waited, so it cannot tell
// that it stopped (as QuietJobCannotTellAndSaysNothing): the spell must not have taught it that it
// usually waits, or the end of the spell reads as "stopped waiting" and node 1 as a slow node.
TEST(WaitEvidenceTest, ASlowLinkSpellDoesNotTeachANodeThatItWaits) {
  JobModel m;
  m.nodes = 2;
  m.per_node = 2;
  m.jitter = 0;
  m.transfer_jitter = 0;
  m.transfer_ns = 2 * kMs;
  m.link_slowdown = 0.5;
  m.link_from = 400;
  m.link_until = 500;
  m.slow_node = 1;
  m.slowdown = 0.08;
  m.from = 500;
  Job job(m);
  const std::vector<Flag> flags = job.Run(1500);
  EXPECT_TRUE(flags.empty()) << flags.size() << " flags, the first: node " << flags.front().node
                             << " rank " << flags.front().local << " at step "
                             << flags.front().step;
}

// A job without any jitter: nobody ever waits, so no node can tell it stopped waiting (only the
// job-wide rules, comparing nodes, can). Nothing is flagged, rather than a guess.
TEST(WaitEvidenceTest, QuietJobCannotTellAndSaysNothing) {
  JobModel m;
  m.jitter = 0;
  m.transfer_jitter = 0;
  m.slow_node = 1;
  m.slowdown = 0.2;
  m.from = 500;
  Job job(m);
  EXPECT_TRUE(job.Run(2000).empty());
}

// Two ranks per node: both ranks of node 1 slowed (a slow node) are both flagged on node 1; one
// rank of node 2 slowed is flagged alone (its local peer waits longer for it, its compute is
// unchanged). The flags clear once the slowdown ends.
TEST(WaitEvidenceTest, WholeNodeAndOneRankOfANode) {
  JobModel m;
  m.nodes = 4;
  m.per_node = 2;
  m.slow_node = 1;
  m.slowdown = 0.2;
  m.from = 500;
  m.until = 1500;
  Job job(m);
  std::vector<Flag> flags = job.Run(1400);
  ASSERT_EQ(flags.size(), 2u);
  for (const Flag& f : flags) EXPECT_EQ(f.node, 1);
  EXPECT_TRUE(job.node(1).rank(0)->flagged);
  EXPECT_TRUE(job.node(1).rank(1)->flagged);
  job.Run(1000);
  EXPECT_FALSE(job.node(1).rank(0)->flagged) << "cleared after the slowdown ended";
  EXPECT_FALSE(job.node(1).rank(1)->flagged);

  JobModel one = m;
  one.slow_node = 2;
  one.slow_local = 1;
  one.until = UINT64_MAX;
  Job job2(one);
  flags = job2.Run(1500);
  ASSERT_FALSE(flags.empty());
  for (const Flag& f : flags) {
    EXPECT_EQ(f.node, 2);
    EXPECT_EQ(f.local, 1);
  }
  EXPECT_FALSE(job2.node(2).rank(0)->flagged);
}

// The 2-node job of the live evaluation: 4 ranks per node, 20 ms steps, 5 % jitter, a transfer
// whose own spread (10 %) stays above the floor as "wait" on every node. Node 1 waited for node 0
// about half the time; from step 1000 it computes 10 % or 20 % longer. Its own evidence names all
// four of its ranks within 15 s (750 steps), though its remote wait p75 never collapses to a
// quarter of its usual (the old bar, which missed it and let the usual absorb the slowdown); node 0
// flags nothing.
JobModel TwoNodeLive(double slowdown, uint32_t seed) {
  JobModel m;
  m.nodes = 2;
  m.per_node = 4;
  m.compute_ns = 20 * kMs;
  m.jitter = 0.05;
  m.transfer_ns = 2 * kMs;
  m.transfer_jitter = 0.01;
  m.transfer_spread = 0.1;
  m.slow_node = 1;
  m.slowdown = slowdown;
  m.from = 1000;
  m.seed = seed;
  return m;
}

TEST(WaitEvidenceTest, TwoNodesASlowNodeThatUsedToWaitNamesItself) {
  int not_collapsed = 0;
  for (double slowdown : {0.10, 0.20}) {
    for (uint32_t seed : {1u, 2u, 3u, 4u}) {
      Job job(TwoNodeLive(slowdown, seed));
      EXPECT_TRUE(job.Run(1000).empty());
      EXPECT_NEAR(job.waited_share(1), 0.5, 0.1) << "node 1 waited about half the time";
      const std::vector<Flag> flags = job.Run(750);
      std::vector<bool> named(4, false);
      for (const Flag& f : flags) {
        EXPECT_EQ(f.node, 1) << slowdown << " seed " << seed << " at " << f.step;
        if (f.node == 1) named[static_cast<size_t>(f.local)] = true;
      }
      for (int l = 0; l < 4; ++l) {
        EXPECT_TRUE(named[static_cast<size_t>(l)]) << slowdown << " seed " << seed << " rank " << l;
        const WaitRankState* st = job.node(1).rank(l);
        // The usual is the one from before the slowdown, not absorbed.
        EXPECT_NEAR(st->usual_segment_ns, 20.0 * kMs, 0.4 * kMs);
        if (st->flagged && st->remote_wait_p75_ns > st->usual_wait_ns / 4) ++not_collapsed;
      }
    }
  }
  EXPECT_GT(not_collapsed, 0) << "the wait never had to collapse to a quarter";
}

// At 2 ms steps a loaded host's turns last seconds: a node whose ranks all computed 25 % longer
// for 1 s (and so waited less) was flagged within it. With the host's time scale (min_spell_ns,
// sentineld's straggler-evidence) a spell must span 2 s of compute before it is judged; a
// slowdown that lasts is still named, once 2 s of it have passed.
TEST(WaitEvidenceTest, ASpellShorterThanTheHostsTimeScaleIsNotJudged) {
  WaitParams host;
  host.min_spell_ns = 2'000 * kMs;
  int flagged_without = 0;
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    JobModel m = TwoNodeLive(0.25, seed);
    m.compute_ns = 2 * kMs;
    m.transfer_ns = kMs / 5;
    m.from = 3000;
    m.until = 3500;  // 1 s of the turn
    Job counted(m, WaitParams{});
    flagged_without += counted.Run(6000).empty() ? 0 : 1;
    Job judged(m, host);
    const std::vector<Flag> flags = judged.Run(6000);
    EXPECT_TRUE(flags.empty()) << "seed " << seed << ": node " << flags.front().node << " at step "
                               << flags.front().step;
    m.until = UINT64_MAX;
    Job lasting(m, host);
    const std::vector<Flag> named = lasting.Run(6000);
    ASSERT_FALSE(named.empty()) << "seed " << seed;
    EXPECT_EQ(named.front().node, 1);
    EXPECT_GE(named.front().step, m.from + 800) << "seed " << seed;   // 2 s of 2.5 ms segments
    EXPECT_LE(named.front().step, m.from + 1600) << "seed " << seed;  // ... and a second more
  }
  EXPECT_GT(flagged_without, 0) << "the 1 s turn is flagged when counted in collectives";
}

// The same 2-node job without a slow node: every rank computing 10 % or 20 % longer (a new
// phase), node 0 slowing by 20 % for 30 s (node 1 waits more: node 1 flags nothing; node 0 is the
// slow one), and 5 minutes of hiccups (0.1 per rank and second, 20-100 ms) and whole-job pauses
// (1-3 s, one in 30 s): node 1 flags nothing, and nothing at all outside node 0's slowdown.
TEST(WaitEvidenceTest, TwoNodesWholeJobOtherNodeAndNoiseFlagNothing) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    for (double slowdown : {0.10, 0.20}) {
      JobModel all = TwoNodeLive(slowdown, seed);
      all.slow_node = -2;
      Job job(all);
      const std::vector<Flag> flags = job.Run(4000);
      EXPECT_TRUE(flags.empty()) << "whole job +" << slowdown << " seed " << seed << ": node "
                                 << flags.front().node << " at " << flags.front().step;
      // The usual followed the whole job's new step (the communicator moved together).
      EXPECT_NEAR(job.node(0).rank(0)->usual_segment_ns / (20.0 * kMs), 1 + slowdown, 0.02);
    }
    JobModel other = TwoNodeLive(0.20, seed);
    other.slow_node = 0;
    other.until = 2500;
    Job job2(other);
    for (const Flag& f : job2.Run(4000)) {
      EXPECT_EQ(f.node, 0) << "seed " << seed << ": node 1 at " << f.step;
    }
    JobModel noise = TwoNodeLive(0, seed);
    noise.slow_node = -1;
    noise.hiccups_per_s = 0.1;
    noise.pauses_per_s = 1.0 / 30;
    Job job3(noise);
    const std::vector<Flag> flags = job3.Run(15000);
    EXPECT_TRUE(flags.empty()) << "noise seed " << seed << ": node " << flags.front().node << " at "
                               << flags.front().step;
  }
}

// A scripted rank (one local rank, its node's only one): segments around `segment_ms` (2 %
// Gaussian), a transfer of 1 ms, and a remote wait uniform in [0, 2 * wait_ms) in half of the
// collectives (none in the others: two nodes, each last half the time).
class Script {
 public:
  explicit Script(uint32_t seed) : w_(WaitParams{}), rng_(seed) {}
  // Feeds n collectives; returns how many times the rank was flagged.
  int Feed(int n, double segment_ms, double wait_ms) {
    std::normal_distribution<double> noise(0.0, 1.0);
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    int flags = 0;
    for (int i = 0; i < n; ++i) {
      const auto seg = static_cast<int64_t>(segment_ms * kMs * (1 + 0.02 * noise(rng_)));
      const bool waits = u01(rng_) < 0.5;
      const auto wait = static_cast<int64_t>(waits ? 2 * wait_ms * kMs * u01(rng_) : 0.0);
      now_ += seg;
      const int64_t arrival = now_;
      const int64_t duration = 1 * kMs + wait;
      now_ += duration;
      w_.Observe({{0, arrival, duration, seg}}, seq_++, 0, now_);
      if (w_.rank(0)->changed && w_.rank(0)->flagged) ++flags;
    }
    return flags;
  }
  const WaitRankState& st() const { return *w_.rank(0); }

 private:
  WaitEvidence w_;
  std::mt19937 rng_;
  int64_t now_ = 0;
  uint64_t seq_ = 0;
};

// The step grows 10 % while the wait barely moves (10 % less: within its noise, undecided). The
// usual is held: after 400 collectives it is still the old step (an EWMA would have moved most of
// the way), and nothing is flagged. After `relearn` (512) collectives of the spell it re-learns:
// the new step is the usual, and a later 10 % slowdown that takes the wait off is still named.
TEST(WaitEvidenceTest, AnUndecidedSlowdownIsNotAbsorbedAndALongOneRelearns) {
  Script s(7);
  EXPECT_EQ(s.Feed(600, 10, 0.5), 0);
  ASSERT_TRUE(s.st().has_usual);
  EXPECT_NEAR(s.st().usual_segment_ns, 10.0 * kMs, 0.1 * kMs);
  EXPECT_EQ(s.Feed(400, 11, 0.5 * 0.9), 0);
  EXPECT_TRUE(s.st().held);
  EXPECT_NEAR(s.st().usual_segment_ns, 10.0 * kMs, 0.1 * kMs) << "absorbed while undecided";
  EXPECT_EQ(s.st().relearned, 0u);
  EXPECT_EQ(s.Feed(300, 11, 0.5 * 0.9), 0);
  EXPECT_EQ(s.st().relearned, 1u);
  EXPECT_FALSE(s.st().held);
  EXPECT_NEAR(s.st().usual_segment_ns, 11.0 * kMs, 0.15 * kMs);
  // A slowdown on the re-learned usual, the node no longer waiting: named.
  EXPECT_EQ(s.Feed(300, 12.1, 0), 1);
  EXPECT_TRUE(s.st().flagged);
}

// The step grows 20 % and the wait with it (the whole communicator moved together: a new phase
// whose jitter grows with its compute): the usual re-learns after a window of the spell, long
// before `relearn`, and nothing is flagged.
TEST(WaitEvidenceTest, AWholeCommunicatorChangeRelearnsSoon) {
  Script s(8);
  EXPECT_EQ(s.Feed(600, 10, 0.5), 0);
  EXPECT_EQ(s.Feed(200, 12, 0.6), 0);
  EXPECT_EQ(s.st().relearned, 1u);
  EXPECT_NEAR(s.st().usual_segment_ns, 12.0 * kMs, 0.15 * kMs);
  EXPECT_EQ(s.Feed(1000, 12, 0.6), 0);
}

// A node that never waited (no jitter between the nodes) cannot tell it waits less: a 20 %
// slowdown is not flagged, and the usual is not held forever (re-learned: it says nothing).
TEST(WaitEvidenceTest, ANodeThatNeverWaitedLeavesItToTheJobTier) {
  Script s(9);
  EXPECT_EQ(s.Feed(600, 10, 0), 0);
  EXPECT_EQ(s.Feed(1000, 12, 0), 0);
  EXPECT_FALSE(s.st().flagged);
  EXPECT_NEAR(s.st().usual_segment_ns, 12.0 * kMs, 0.15 * kMs);
}

TEST(WaitEvidenceTest, NodeVerdictNamesTheNodeOnlyWhenEveryProcessIsFlagged) {
  // Two processes, each with a rank in a data-parallel communicator spanning the nodes and one in
  // a node-local communicator (ignored).
  std::vector<WaitRankRef> refs = {
      {0xa, 0, 1, true, true, true},    // process 1, DP comm a: flagged
      {0xb, 1, 2, true, true, false},   // process 2, DP comm b: not flagged
      {0xc, 0, 1, false, true, true},   // node-local comm: not a node verdict
      {0xd, 7, 3, true, false, false},  // process 3 not judged yet: not counted
  };
  NodeVerdict v = JudgeNode(refs);
  EXPECT_FALSE(v.slow_node);
  EXPECT_EQ(v.processes, 2u);
  ASSERT_EQ(v.flagged.size(), 1u);
  EXPECT_EQ(v.flagged[0], 0u);

  refs[1].flagged = true;
  v = JudgeNode(refs);
  EXPECT_TRUE(v.slow_node);
  EXPECT_EQ(v.flagged.size(), 2u);

  // Nothing flagged: neither.
  for (WaitRankRef& r : refs) r.flagged = false;
  v = JudgeNode(refs);
  EXPECT_FALSE(v.slow_node);
  EXPECT_TRUE(v.flagged.empty());

  // One process flagged, the other leaning (compute grown, waiting less, not yet beyond its
  // noise): a slow node. Leaning alone names nothing; one process neither flagged nor leaning
  // keeps it a flagged rank.
  refs[0].flagged = true;
  refs[1].leaning = true;
  v = JudgeNode(refs);
  EXPECT_TRUE(v.slow_node);
  ASSERT_EQ(v.flagged.size(), 1u);
  EXPECT_EQ(v.flagged[0], 0u);
  refs[0].flagged = false;
  refs[0].leaning = true;
  v = JudgeNode(refs);
  EXPECT_FALSE(v.slow_node);
  EXPECT_TRUE(v.flagged.empty());
  refs[0].flagged = true;
  refs[1].leaning = false;
  v = JudgeNode(refs);
  EXPECT_FALSE(v.slow_node);
  EXPECT_EQ(v.flagged.size(), 1u);
}

// Leaning: held, the segment rel over the usual, the spell's mean wait under the usual mean.
TEST(WaitEvidenceTest, LeaningNeedsGrowthAndLessWaitingInTheSpell) {
  WaitRankState st;
  st.has_usual = true;
  st.held = true;
  st.usual_segment_ns = 10.0 * kMs;
  st.segment_p50_ns = 10.6 * kMs;
  st.usual_wait_mean_ns = 0.5 * kMs;
  st.spell_n = 10;
  st.spell_wait_sum_ns = 10 * 0.4 * kMs;
  EXPECT_TRUE(Leaning(st, 0.05));
  st.spell_wait_sum_ns = 10 * 0.6 * kMs;
  EXPECT_FALSE(Leaning(st, 0.05)) << "waits more";
  st.spell_wait_sum_ns = 10 * 0.4 * kMs;
  st.segment_p50_ns = 10.3 * kMs;
  EXPECT_FALSE(Leaning(st, 0.05)) << "grew less than rel";
  st.segment_p50_ns = 10.6 * kMs;
  st.held = false;
  EXPECT_FALSE(Leaning(st, 0.05)) << "not in a spell";
}

}  // namespace
}  // namespace sentinel::collector

namespace sentinel::collector {
namespace {

// The transfer floor under refresh_min_ns (sentineld sets 10 ms): once full, it is recomputed
// after 8 durations only once that much collector time passed, or after a whole ring's worth.
// A 1-rank communicator at 20,000 collectives a second recomputed its 10 % quantile of 128 every
// 8 collectives. Durations of 1 ms fill the ring; 120 of 3 ms within 6 ms of collector time leave
// the floor at 1 ms (unbounded, it is 3 ms by then); the next one 10 ms later moves it.
int64_t FloorAfter(int64_t refresh_min_ns, bool ten_ms_later) {
  WaitParams p;
  p.refresh_min_ns = refresh_min_ns;
  WaitEvidence ev(p);
  constexpr int64_t kApart = 50000;  // collector time between collectives
  int64_t now = kMs;
  uint64_t seq = 0;
  auto one = [&](int64_t duration) {
    const std::vector<WaitObservation> obs = {{0, now, duration, 5 * kMs}};
    ev.Observe(obs, ++seq, 3, now);
  };
  for (size_t i = 0; i < p.floor_samples; ++i, now += kApart) one(kMs);
  EXPECT_EQ(ev.floor_ns(3), kMs);
  for (int i = 0; i < 120; ++i, now += kApart) one(3 * kMs);
  if (ten_ms_later) {
    now += 10 * kMs;
    one(3 * kMs);
  }
  return ev.floor_ns(3);
}

TEST(WaitEvidenceTest, TheTransferFloorIsRecomputedAtMostEveryRefreshMinNsOrRingsWorth) {
  EXPECT_EQ(FloorAfter(0, false), 3 * kMs);
  EXPECT_EQ(FloorAfter(10 * kMs, false), kMs);
  EXPECT_EQ(FloorAfter(10 * kMs, true), 3 * kMs);
}

}  // namespace
}  // namespace sentinel::collector
