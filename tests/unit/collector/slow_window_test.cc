// The window-to-span classifier (collector/aggregate/slow_window.h): when a communicator's window
// is slow (above 20 % of its usual and 4 of its spreads), how its excess splits into waiting for
// late ranks and slower transfer, when a persistent slowdown becomes the usual, and which span a
// slow window joins.
#include "collector/aggregate/slow_window.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace sentinel::collector {
namespace {

constexpr int64_t kMs = 1000000;
constexpr int64_t kS = 1000000000;

// A window at `t`: the local arrivals spread over `skew`, the transfer after the last `transfer`.
WindowObservation Window(int64_t t, int64_t skew, int64_t transfer, uint8_t func = 2,
                         int bucket = 5) {
  WindowObservation w;
  w.comm_hash = 0x1;
  w.nranks = 8;
  w.local_ranks = 4;
  w.func = func;
  w.bucket = bucket;
  w.min_arrival_ns = t;
  w.max_arrival_ns = t + skew;
  w.max_end_ns = t + skew + transfer;
  return w;
}

// A usual learned on min_history windows: skew `skew` and each transfer in turn from `transfers`.
WindowUsual Learned(int64_t skew, const std::vector<int64_t>& transfers) {
  WindowUsual u;
  u.Start(2, 5, 64, 0);
  const SlowCauseParams p;
  for (int i = 0; i < p.min_history; ++i) {
    const WindowVerdict v = u.Judge(
        Window(i * 10 * kMs, skew, transfers[static_cast<size_t>(i) % transfers.size()]), p);
    EXPECT_FALSE(v.slow);
  }
  return u;
}

TEST(SlowWindow, NothingIsSlowBeforeMinHistoryWindows) {
  WindowUsual u;
  u.Start(2, 5, 64, 0);
  const SlowCauseParams p;
  for (int i = 0; i < p.min_history; ++i) {
    EXPECT_FALSE(
        u.Judge(Window(i * 10 * kMs, 0, i == p.min_history - 1 ? 100 * kMs : kMs), p).slow);
  }
  EXPECT_TRUE(u.Judge(Window(kS, 0, 100 * kMs), p).slow);
}

TEST(SlowWindow, AnEvenHistorysUsualIsTheMidpointOfItsMiddleTwo) {
  // 8 windows of 9 ms and 8 of 11 ms: the usual is 10 ms.
  WindowUsual u = Learned(0, {9 * kMs, 11 * kMs});
  const WindowVerdict v = u.Judge(Window(kS, 0, 11 * kMs), SlowCauseParams{});
  EXPECT_EQ(v.usual_ns, 10 * kMs);
  EXPECT_EQ(v.excess_ns, kMs);
}

TEST(SlowWindow, SlowNeedsAShareOfTheUsual) {
  // A steady 10 ms (no spread): slow above 20 % of it.
  const SlowCauseParams p;
  WindowUsual u = Learned(0, {10 * kMs});
  EXPECT_FALSE(u.Judge(Window(kS, 0, 12 * kMs), p).slow);
  const WindowVerdict v = u.Judge(Window(2 * kS, 0, 12 * kMs + 1000), p);
  EXPECT_TRUE(v.slow);
  EXPECT_EQ(v.usual_ns, 10 * kMs);
  EXPECT_EQ(v.excess_ns, 2 * kMs + 1000);
}

TEST(SlowWindow, SlowNeedsFourSpreadsOfItsOwnWindows) {
  // 9, 10, 10, 11 ms in turn: the usual 10 ms; half the deviations are 0 and half 1 ms, so the MAD
  // is 0.5 ms and the bar 4 x 1.4826 x 0.5 ms (2.97 ms), above 20 % of the usual (2 ms).
  const SlowCauseParams p;
  WindowUsual u = Learned(0, {9 * kMs, 10 * kMs, 10 * kMs, 11 * kMs});
  EXPECT_FALSE(u.Judge(Window(kS, 0, 12960 * 1000), p).slow);
  EXPECT_TRUE(u.Judge(Window(2 * kS, 0, 13 * kMs), p).slow);
}

TEST(SlowWindow, TheExcessSplitsIntoWaitingBeyondTheUsualSkewAndTransfer) {
  const SlowCauseParams p;
  WindowUsual u = Learned(kMs, {5 * kMs});  // usual: 1 ms of skew + 5 ms of transfer
  WindowVerdict v = u.Judge(Window(kS, 4 * kMs, 6 * kMs), p);
  ASSERT_TRUE(v.slow);
  EXPECT_EQ(v.excess_ns, 4 * kMs);
  EXPECT_EQ(v.late_ns, 3 * kMs);  // 4 ms of skew, 1 ms usual
  EXPECT_EQ(v.transfer_ns, kMs);
  // Waiting beyond the excess is all of it (the transfer was quicker than usual).
  v = u.Judge(Window(2 * kS, 10 * kMs, 2 * kMs), p);
  EXPECT_EQ(v.late_ns, 6 * kMs);
  EXPECT_EQ(v.transfer_ns, 0);
  // No waiting beyond the usual skew: all transfer.
  v = u.Judge(Window(3 * kS, 0, 9 * kMs), p);
  EXPECT_EQ(v.late_ns, 0);
  EXPECT_EQ(v.transfer_ns, 3 * kMs);
}

TEST(SlowWindow, APersistentSlowdownIsLearnedAgainAfterTheRelearnTime) {
  SlowCauseParams p;
  p.relearn_after_ns = 2 * kS;
  WindowUsual u = Learned(0, {10 * kMs});
  // Every 10 ms a window of 20 ms: slow until nearly all of the recent ones were (the decayed
  // share above 0.9 after 114 of them) for 2 s more; then learned afresh.
  int slow = 0;
  int64_t t = kS;
  while (u.Judge(Window(t, 0, 20 * kMs), p).slow) {
    ++slow;
    t += 10 * kMs;
    ASSERT_LT(slow, 1000);
  }
  EXPECT_GE(slow, 114 + 200);
  EXPECT_LE(slow, 114 + 200 + 2);
  for (int i = 0; i < 40; ++i, t += 10 * kMs) {
    EXPECT_FALSE(u.Judge(Window(t, 0, 20 * kMs), p).slow) << i;
  }
}

// At a job's high rate the medians are taken again every 10 ms of its time, or after a
// history's worth of windows (64), not every 8 windows: learned on 10 ms windows 50 us apart,
// 64 ordinary windows of 11.5 ms (under the 20 % bar: learned) leave the usual at 10 ms (taken
// every 8 windows it moved after 16 of them, 0.8 ms of the job), and the next one sees them.
TEST(SlowWindow, AtAHighRateTheUsualIsTakenAgainEvery10MsOrAHistorysWorthOfWindows) {
  constexpr int64_t kApart = 50000;
  const SlowCauseParams p;
  WindowUsual u;
  u.Start(2, 5, 64, 0);
  int64_t t = 0;
  for (int i = 0; i < p.min_history; ++i, t += kApart) {
    EXPECT_FALSE(u.Judge(Window(t, 0, 10 * kMs), p).slow);
  }
  for (int i = 1; i <= WindowUsual::kRefreshMaxPushes; ++i, t += kApart) {
    const WindowVerdict v = u.Judge(Window(t, 0, 11500 * 1000), p);
    ASSERT_FALSE(v.slow) << i;
    EXPECT_EQ(v.usual_ns, 10 * kMs) << i;
  }
  EXPECT_EQ(u.Judge(Window(t, 0, 11500 * 1000), p).usual_ns, 11500 * 1000);
  // Windows 10 ms apart: taken again every 8 (the 8 windows span 80 ms of the job).
  WindowUsual slow_rate;
  slow_rate.Start(2, 5, 64, 0);
  t = 0;
  for (int i = 0; i < p.min_history; ++i, t += 10 * kMs) slow_rate.Judge(Window(t, 0, 10 * kMs), p);
  int moved_after = -1;
  for (int i = 1; i <= 40 && moved_after < 0; ++i, t += 10 * kMs) {
    if (slow_rate.Judge(Window(t, 0, 11500 * 1000), p).usual_ns != 10 * kMs) moved_after = i;
  }
  // Taken again after 8 and 16 of them: at 16, half the history is 11.5 ms (the median between).
  EXPECT_EQ(moved_after, 17);
}

TEST(SlowWindow, UsualForKeepsMaxKeysAndTheOneUsedLongestAgoGoes) {
  std::vector<WindowUsual> usual;
  UsualFor(&usual, 2, 1, 0, 64, 1);
  UsualFor(&usual, 2, 2, 0, 64, 2);
  EXPECT_EQ(UsualFor(&usual, 2, 1, 0, 64, 3), &usual[0]);  // found again, and used at 3
  EXPECT_EQ(usual[0].last_used_ns(), 3);
  WindowUsual* c = UsualFor(&usual, 2, 3, 0, 64, 4);
  ASSERT_EQ(usual.size(), 2u);
  EXPECT_TRUE(usual[0].Is(1, 0));
  EXPECT_TRUE(usual[1].Is(3, 0));  // in the place of (2, 0)
  EXPECT_EQ(c, &usual[1]);
  EXPECT_EQ(c->last_used_ns(), 4);
}

// A span opened by a transfer-dominant slow window at 1 s (20 ms long).
SlowSpan OpenedAt1s(WindowVerdict* v) {
  const WindowObservation w = Window(kS, 0, 20 * kMs);
  v->slow = true;
  v->usual_ns = 10 * kMs;
  v->total_ns = 20 * kMs;
  v->excess_ns = 10 * kMs;
  v->transfer_ns = 10 * kMs;
  SlowSpan s = OpenSpan(w, *v);
  AddToSpan(w, *v, &s);
  return s;
}

TEST(SlowWindow, ASlowWindowJoinsTheOpenSpanOfItsKindNearby) {
  const SlowCauseParams p;
  WindowVerdict v;
  const SlowSpan s = OpenedAt1s(&v);
  EXPECT_EQ(s.windows, 1u);
  EXPECT_EQ(s.usual_ns, 10 * kMs);
  EXPECT_EQ(s.end_ns, kS + 20 * kMs);
  EXPECT_TRUE(s.remote_ranks);  // 8 ranks, 4 here
  const int64_t after = s.end_ns;
  EXPECT_TRUE(JoinsSpan(s, Window(after + p.coalesce_gap_ns, 0, 20 * kMs), v, p));
  EXPECT_FALSE(JoinsSpan(s, Window(after + p.coalesce_gap_ns + 1, 0, 20 * kMs), v, p));
  EXPECT_FALSE(JoinsSpan(s, Window(after, 0, 20 * kMs, /*func=*/3), v, p));
  EXPECT_FALSE(JoinsSpan(s, Window(after, 0, 20 * kMs, 2, /*bucket=*/6), v, p));
  EXPECT_FALSE(JoinsSpan(s, Window(kS, 0, p.span_max_ns + kMs), v, p));  // the span too long
  WindowVerdict waiting = v;
  waiting.late_ns = 8 * kMs;
  waiting.transfer_ns = 2 * kMs;
  EXPECT_FALSE(JoinsSpan(s, Window(after, 0, 20 * kMs), waiting, p));  // the other side
  SlowSpan settled = s;
  settled.settled = true;
  EXPECT_FALSE(JoinsSpan(settled, Window(after, 0, 20 * kMs), v, p));
}

TEST(SlowWindow, TheRanksWithinHalfOfTheLatestOnesLatenessAreNamed) {
  // The usual skew 1 ms; arrivals at 0, 2, 6 and 10 ms: beyond the usual 1, 5 and 9 ms; the
  // latest 9 ms, so ranks 2 (5 ms) and 3 (9 ms) account for the waiting, not rank 1.
  const std::vector<WindowRank> ranks = {
      {0, kS}, {1, kS + 2 * kMs}, {2, kS + 6 * kMs}, {3, kS + 10 * kMs}};
  WindowObservation w = Window(kS, 10 * kMs, 5 * kMs);
  w.ranks = ranks.data();
  w.nranks_seen = ranks.size();
  WindowVerdict v;
  v.slow = true;
  v.usual_skew_ns = kMs;
  v.skew_ns = 10 * kMs;
  v.late_ns = 9 * kMs;
  SlowSpan s = OpenSpan(w, v);
  AddToSpan(w, v, &s);
  ASSERT_EQ(s.late_ranks.size(), 2u);
  EXPECT_EQ(s.late_ranks[0].rank, 3);
  EXPECT_EQ(s.late_ranks[0].late_ns, 9 * kMs);
  EXPECT_EQ(s.late_ranks[1].rank, 2);
  EXPECT_EQ(s.late_ranks[1].late_ns, 5 * kMs);
  AddToSpan(w, v, &s);
  EXPECT_EQ(s.late_ranks[0].late_ns, 18 * kMs);
  EXPECT_EQ(s.late_ranks[0].windows, 2u);
  EXPECT_EQ(s.windows, 2u);
  EXPECT_EQ(s.late_ns, 18 * kMs);
}

TEST(SlowWindow, ASpanKeepsItsLargestLateRanks) {
  // Ten windows, each with one late rank r (r + 1 ms): the first eight fill the list, the two
  // largest newcomers take the places of the smallest.
  SlowSpan s;
  for (int32_t r = 0; r < 10; ++r) {
    const std::vector<WindowRank> ranks = {{100, kS}, {r, kS + (r + 1) * kMs}};
    WindowObservation w = Window(kS, (r + 1) * kMs, kMs);
    w.ranks = ranks.data();
    w.nranks_seen = ranks.size();
    WindowVerdict v;
    v.skew_ns = (r + 1) * kMs;
    v.late_ns = (r + 1) * kMs;
    AddToSpan(w, v, &s);
  }
  ASSERT_EQ(s.late_ranks.size(), SlowSpan::kMaxLateRanks);
  for (size_t i = 0; i < s.late_ranks.size(); ++i) {
    EXPECT_EQ(s.late_ranks[i].rank, static_cast<int32_t>(9 - i));
  }
}

}  // namespace
}  // namespace sentinel::collector
