// The own-overhead meter (callback_meter.h) against a known injected cost: collectives of 1, 2, 4
// and 8 channels whose every callback busy-waits a fixed time, metered the way profiler_core.cc
// meters them (CallbackMeter for Coll start/stop, MeterCollective at the start, KernelChMeter per
// KernelCh callback). The count must be exact and the sampled time estimate close to the time
// really spent, at every channel count (KernelCh callbacks are counted and timed per collective).
#include "plugin/core/callback_meter.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>

#include "plugin/core/clock.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin {
namespace {

constexpr int64_t kBodyNs = 400;

// A body that took longer than this was preempted or interrupted.
constexpr int64_t kPreemptedNs = 2 * kBodyNs;

// The injected cost; returns the time it really took.
int64_t Body() {
  int64_t t0 = MonoNs();
  int64_t t = t0;
  while (t - t0 < kBodyNs) t = MonoNs();
  return t - t0;
}

struct Outcome {
  uint64_t callbacks = 0;
  double estimated_ns = 0;
  double spent_ns = 0;
  // A timed (sampled) callback that was preempted counts its delay kCallbackSample or
  // kKernelChSample times: such a run says nothing about the meter and is retried.
  bool timed_body_preempted = false;
};

// `collectives` collectives of `channels` channels, all on one owned thread state. Untimed bodies
// count at most kPreemptedNs towards the time spent: a preemption the meter did not sample is not
// the meter's error either.
Outcome RunCollectives(int channels, int collectives) {
  ThreadState ts;
  Outcome o;
  int64_t spent = 0;
  auto account = [&](int64_t took, bool timed) {
    if (timed && took > kPreemptedNs) o.timed_body_preempted = true;
    spent += took < kPreemptedNs ? took : kPreemptedNs;
  };
  // Whether the CallbackMeter just constructed is a sampled one: its tick is the callback count.
  auto coll_sampled = [&ts] { return ts.counters[kCtrCallbacks].load() % kCallbackSample == 0; };
  for (int c = 0; c < collectives; ++c) {
    bool timed = false;
    {
      CallbackMeter meter(&ts);  // Coll start
      bool sampled = coll_sampled();
      timed = MeterCollective(&ts, static_cast<uint32_t>(channels));
      account(Body(), sampled);
    }
    {
      CallbackMeter meter(&ts);  // Coll stop
      account(Body(), coll_sampled());
    }
    for (int i = 0; i < 3 * channels; ++i) {  // per channel: start, KernelChStop state, stop
      KernelChMeter meter(&ts);
      if (timed) meter.Time();
      account(Body(), timed);
    }
  }
  o.callbacks = ts.counters[kCtrCallbacks].load() + ts.counters[kCtrKernelChCallbacks].load();
  o.estimated_ns = static_cast<double>(ts.counters[kCtrCallbackNs].load());
  o.spent_ns = static_cast<double>(spent);
  return o;
}

TEST(CallbackMeter, CountsEveryCallbackAndEstimatesTheInjectedCostAtAnyChannelCount) {
  constexpr int kCollectives = 16 * static_cast<int>(kKernelChSample);
  constexpr int kAttempts = 10;
  for (int channels : {1, 2, 4, 8}) {
    SCOPED_TRACE(channels);
    // Judged on the first run whose timed callbacks were not preempted (a loaded machine preempts
    // some; CI runs two tests at a time on two cores).
    int attempt = 0;
    Outcome o;
    do {
      o = RunCollectives(channels, kCollectives);
      ASSERT_EQ(o.callbacks, static_cast<uint64_t>(kCollectives) * (2 + 3 * channels));
      ASSERT_GT(o.spent_ns, 0);
    } while (o.timed_body_preempted && ++attempt < kAttempts);
    ASSERT_FALSE(o.timed_body_preempted)
        << "every one of " << kAttempts << " runs had a timed callback preempted";
    double error = std::abs(o.estimated_ns - o.spent_ns) / o.spent_ns;
    EXPECT_LT(error, 0.2) << "estimated " << o.estimated_ns << " ns, spent " << o.spent_ns << " ns";
  }
}

TEST(CallbackMeter, KernelChCallbacksOfAnUntimedCollectiveCostNoClockRead) {
  ThreadState ts;
  {
    KernelChMeter meter(&ts);  // not timed: adds nothing
    Body();
  }
  EXPECT_EQ(ts.counters[kCtrCallbackNs].load(), 0u);
  EXPECT_EQ(ts.counters[kCtrKernelChCallbacks].load(), 0u);
  {
    KernelChMeter meter(&ts);  // a KernelCh its collective did not expect counts itself
    meter.Count(kKernelChCallbacks);
  }
  EXPECT_EQ(ts.counters[kCtrKernelChCallbacks].load(), kKernelChCallbacks);
  // A collective without KernelCh children is neither counted for them nor timed.
  EXPECT_FALSE(MeterCollective(&ts, 0));
  EXPECT_EQ(ts.counters[kCtrKernelChCallbacks].load(), kKernelChCallbacks);
  // One collective in kKernelChSample is timed.
  int timed = 0;
  for (uint64_t i = 0; i < 4 * kKernelChSample; ++i) timed += MeterCollective(&ts, 2) ? 1 : 0;
  EXPECT_EQ(timed, 4);
}

}  // namespace
}  // namespace sentinel::plugin
