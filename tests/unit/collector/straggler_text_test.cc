// Tests of the straggler alert texts (collector/aggregate/straggler_text.h): the figures quoted are
// the measured ones, and "since the communicator started" is said only when true.
#include "collector/aggregate/straggler_text.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sentinel::collector {
namespace {

constexpr int64_t kMs = 1'000'000;

// The demo's shape: 100 collectives, on time (about 0.5 ms) until #40, then 40 ms late, with a
// 10 ms compute segment between collectives.
std::vector<LateSample> Demo() {
  std::vector<LateSample> s;
  for (uint64_t seq = 2; seq < 100; ++seq) {
    const int64_t late = seq < 40 ? static_cast<int64_t>(seq % 3) * kMs / 4
                                  : 40 * kMs + static_cast<int64_t>(seq) * 1000;
    s.push_back({seq, late, 10 * kMs});
  }
  return s;
}

TEST(StragglerTextTest, SlowdownFromStep40SaysSinceCollective40WithMeasuredFigures) {
  const LateFigures f = MeasureLateness(Demo(), 64, /*history_complete=*/true);
  ASSERT_TRUE(f.valid);
  EXPECT_EQ(f.samples, 64u);
  EXPECT_FALSE(f.since_start);
  EXPECT_EQ(f.since_seq, 40u);
  // p50 of the last 64 samples (#36..#99: 60 late ones), as stats.h's Percentile computes it.
  EXPECT_NEAR(f.lateness_p50_ms, 40.0 + 0.07, 0.01);
  EXPECT_NEAR(f.segment_p50_ms, 10.0, 1e-9);
  EXPECT_NEAR(f.share, 4.007, 0.002);
  const std::string text = LocalStragglerSummary(5, "0x00000000000000aa", f, f.since_start);
  EXPECT_EQ(text,
            "rank 5 on comm 0x00000000000000aa is late since collective #40: 40.07 ms late (p50 "
            "of its last 64 collectives), 401% of the 10.00 ms compute segment between "
            "collectives, behind the other local ranks (newly degraded: look for a throttled "
            "GPU, a noisy neighbour or a degraded link)");
  EXPECT_EQ(text.find("since the communicator started"), std::string::npos);
}

TEST(StragglerTextTest, SinceTheCommunicatorStartedOnlyWhenTrue) {
  std::vector<LateSample> s;
  for (uint64_t seq = 2; seq < 50; ++seq)
    s.push_back({seq, 3 * kMs + static_cast<int64_t>(seq % 5) * 10000, 12 * kMs});
  LateFigures f = MeasureLateness(s, 64, /*history_complete=*/true);
  EXPECT_TRUE(f.since_start);
  EXPECT_EQ(f.since_seq, 2u);
  const std::string text = LocalStragglerSummary(3, "0x1", f, f.since_start);
  EXPECT_NE(text.find("is late since the communicator started: 3.02 ms late (p50 of its last 48 "
                      "collectives), 25% of the 12.00 ms compute segment"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("structural"), std::string::npos);
  // The same samples, but the history wrapped (older collectives are gone): the start is unknown.
  f = MeasureLateness(s, 64, /*history_complete=*/false);
  EXPECT_FALSE(f.since_start);
  EXPECT_NE(LocalStragglerSummary(3, "0x1", f, f.since_start).find("since collective #2:"),
            std::string::npos);
}

// Three collectives per step, back to back after 9 ms of compute: the segment p50 is the 50 us
// floor, and the rank is late (2 ms) only at the first collective of each step. The share is the
// step's: 2 ms per 9.1 ms of compute is 22 %, i.e. 0.67 ms on average per 3.03 ms of compute per
// collective; not the p50 over the floor (which read 343 % of 0.05 ms in a real alert).
TEST(StragglerTextTest, BackToBackCollectivesQuoteTheStepsShare) {
  std::vector<LateSample> s;
  for (uint64_t seq = 2; seq < 100; ++seq) {
    const bool first_of_step = seq % 3 == 0;
    s.push_back({seq, first_of_step ? 2 * kMs : 20000, first_of_step ? 9 * kMs : 50000});
  }
  const double compute_per_coll = (9.0 * kMs + 2 * 50000.0) / 3;
  const LateFigures f = MeasureLateness(s, 63, /*history_complete=*/true, 0, compute_per_coll);
  ASSERT_TRUE(f.valid);
  EXPECT_TRUE(f.back_to_back);
  EXPECT_NEAR(f.segment_p50_ms, 0.05, 1e-9);
  EXPECT_NEAR(f.lateness_mean_ms, (2.0 + 2 * 0.02) / 3, 1e-6);
  EXPECT_NEAR(f.share, 0.68 / 3.0333, 0.002);
  const std::string text = LocalStragglerSummary(4, "0x3", f, false);
  EXPECT_NE(text.find("with several collectives back to back in a step, it is 0.68 ms late on "
                      "average, 22% of the 3.03 ms of compute per collective"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("of the 0.05 ms"), std::string::npos) << text;
  // One collective per step (the segment p50 is the compute): the p50 figures, as before.
  const LateFigures one = MeasureLateness(Demo(), 64, true, 0, 10.0 * kMs);
  EXPECT_FALSE(one.back_to_back);
  EXPECT_NEAR(one.share, 4.007, 0.002);
}

TEST(StragglerTextTest, UnknownSegmentsAndEmptyHistory) {
  EXPECT_FALSE(MeasureLateness({}, 64, true).valid);
  std::vector<LateSample> s = {{7, -1, -1}, {8, 2 * kMs, -1}, {9, 2 * kMs, -1}};
  const LateFigures f = MeasureLateness(s, 64, true);
  ASSERT_TRUE(f.valid);
  EXPECT_EQ(f.samples, 2u);
  EXPECT_TRUE(f.since_start) << "the first sample with a lateness is #8";
  EXPECT_EQ(f.since_seq, 8u);
  const std::string text = LocalStragglerSummary(1, "0x2", f, f.since_start);
  EXPECT_EQ(text.find("compute segment"), std::string::npos) << text;
}

TEST(StragglerTextTest, WaitAndSlowNodeTextsQuoteTheRanksFigures) {
  WaitRankState st;
  st.recent_n = 64;
  st.segment_p50_ns = 12.0 * kMs;
  st.usual_segment_ns = 10.0 * kMs;
  st.remote_wait_p75_ns = 0.02 * kMs;
  st.usual_wait_ns = 0.40 * kMs;
  st.since_seq = 612;
  EXPECT_EQ(WaitStragglerSummary(3, "0x00000000000000bb", 8, st),
            "rank 3 on comm 0x00000000000000bb (8 nodes) is the one its peers wait for since "
            "collective #612: it computes 12.00 ms between collectives (p50 of its last 64), 20% "
            "over its usual 10.00 ms, and its node waits 0.02 ms inside them for the other nodes "
            "against its usual 0.40 ms (slow rank: look for a throttled GPU, a data-loader stall "
            "or a noisy neighbour of this process)");
  const std::string node =
      SlowNodeSummary("nodeB", 2, {{"0x00000000000000bb", 3, &st}, {"0x00000000000000cc", 4, &st}});
  EXPECT_EQ(node,
            "node nodeB is slow: all 2 of its processes with ranks in communicators spanning "
            "other nodes compute longer and wait less inside collectives than they used to (the "
            "other nodes wait for this one); "
            "rank 3 on comm 0x00000000000000bb since collective #612: it computes 12.00 ms "
            "between collectives (p50 of its last 64), 20% over its usual 10.00 ms, and its node "
            "waits 0.02 ms inside them for the other nodes against its usual 0.40 ms (2 flagged "
            "ranks in all) (look for CPU contention, a data-loader or storage stall, or a host "
            "fault on this node)");
}

// On a busy host a rank judged late by its mean excess (a few long delays) can show a p50 near 0:
// the alert quotes what it was judged on as well ("0.01 ms late (p50), 1%" alone read as a false
// alarm on a rank judged 2.5 % late on average).
TEST(StragglerTextTest, QuotesTheJudgedExcessWhenTheP50SaysLess) {
  std::vector<LateSample> s;
  for (uint64_t seq = 2; seq < 66; ++seq) {
    s.push_back({seq, seq % 8 == 0 ? 2 * kMs : 10000, 2 * kMs});
  }
  const LateFigures f = MeasureLateness(s, 64, false);
  ASSERT_LT(f.share, 0.01);
  JudgedExcess judged;
  judged.share = 0.125;
  judged.ms_per_collective = 0.25;
  judged.since_seq = 10;
  const std::string text = LocalStragglerSummary(2, "0x4", f, false, judged);
  EXPECT_NE(text.find("judged on its excess over the median local arrival since collective #10: "
                      "12% of its compute, about 0.25 ms per collective on average"),
            std::string::npos)
      << text;
  // When the p50's share says the same (within a quarter), the judged figure is not repeated.
  judged.share = f.share * 1.1;
  EXPECT_EQ(LocalStragglerSummary(2, "0x4", f, false, judged).find("judged on"), std::string::npos);
  // Not given: the text is the p50 figures alone.
  EXPECT_EQ(LocalStragglerSummary(2, "0x4", f, false).find("judged on"), std::string::npos);
}

}  // namespace
}  // namespace sentinel::collector
