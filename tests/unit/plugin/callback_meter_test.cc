// The own-overhead meter (callback_meter.h) against a known injected cost: collectives of 1, 2, 4
// and 8 channels whose every callback busy-waits a fixed time, metered the way profiler_hot.cc
// meters them (CallbackMeter for Coll start/stop, MeterCollective at the start, KernelChMeter per
// KernelCh callback). The count must be exact and the sampled time estimate close to the time
// really spent, at every channel count (KernelCh callbacks are counted and timed per collective).
#include "plugin/core/callback_meter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "plugin/base/clock.h"
#include "plugin/core/overhead_budget.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin {
namespace {

constexpr int64_t kBodyNs = 1000;  // near a CPU clock read (0.2 us on a host, 1.3 us in some VMs)

// A body that took longer than this was preempted or interrupted.
constexpr int64_t kPreemptedNs = 2 * kBodyNs;

// Within 25 %: the thread's CPU clock is a system call whose own cost varies by a few hundred ns
// from read to read in a VM (1.3 us usual), and each timed span carries that variation
// kCallbackSample times. A wrong weight (2x) or wall time counted through a preemption (ms per
// sample) is far outside it.
constexpr double kMaxError = 0.25;

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
  uint64_t preempted_samples = 0;
};

// What the meter's reads add to a timed callback's span: the least of a few (the CPU clock is a
// system call, ~0.1 us on a host, ~1-3 us in some VMs).
int64_t TimedReadsNs() {
  int64_t least = INT64_MAX;
  for (int i = 0; i < 16; ++i) {
    const int64_t t0 = MonoNs();
    MeterSpan span;
    span.Start();
    (void)span.Stop();
    least = std::min(least, MonoNs() - t0);
  }
  return least;
}

// `collectives` collectives of `channels` channels, all on one owned thread state. The truth the
// meter's estimate is held to is each callback's whole span, the meter's own work included (what
// the plugin costs NCCL's thread).
//
// The machine's preemptions are not the meter's error, so they are taken out of both sides: a
// callback counts at most kPreemptedNs towards the time spent (a timed one, whose four clock reads
// take longer, that plus the reads), and a timed (sampled) callback whose span exceeds that, or
// whose sample the meter dropped as descheduled, has its sample replaced by what it would have
// added unpreempted: its weight times its capped body. The samples the meter took undisturbed
// (nearly all of them) are judged as they are.
Outcome RunCollectives(int channels, int collectives) {
  CalibrateMeterClock();
  const int64_t timed_cutoff = kPreemptedNs + 2 * TimedReadsNs();
  // The harness's own clock read inside each span (~20 ns on a host, more in a VM) is not the
  // plugin's: taken off every span.
  int64_t harness = INT64_MAX;
  for (int i = 0; i < 64; ++i) {
    const int64_t t0 = MonoNs();
    harness = std::min(harness, MonoNs() - t0);
  }
  ThreadState ts;
  Outcome o;
  int64_t spent = 0;
  int64_t correction = 0;
  // Runs one callback: `metered` sets up its meter, runs the body and returns the weight its
  // sample carries, 0 when it was not timed.
  auto callback = [&](auto metered) {
    int64_t body_ns = 0;  // the body alone, for a replaced sample
    const uint64_t sampled_before = ts.counters[kCtrCallbackNs].load();
    const int64_t t0 = MonoNs();
    const uint64_t weight = metered(&body_ns);
    const int64_t span = MonoNs() - t0 - harness;
    const int64_t capped = body_ns < kPreemptedNs ? body_ns : kPreemptedNs;
    const int64_t cutoff = weight != 0 ? timed_cutoff : kPreemptedNs;
    spent += span < cutoff ? span : cutoff;
    const auto sampled = static_cast<int64_t>(ts.counters[kCtrCallbackNs].load() - sampled_before);
    if (weight != 0 && (span > cutoff || sampled == 0)) {
      correction += static_cast<int64_t>(weight) * capped - sampled;
      ++o.preempted_samples;
    }
  };
  // Whether the CallbackMeter just constructed is a sampled one: its tick is the callback count.
  auto coll_weight = [&ts]() -> uint64_t {
    return ts.counters[kCtrCallbacks].load() % kCallbackSample == 0 ? kCallbackSample : 0;
  };
  for (int c = 0; c < collectives; ++c) {
    uint32_t kch_weight = 0;
    callback([&](int64_t* body_ns) {
      CallbackMeter meter(&ts);  // Coll start
      uint64_t weight = coll_weight();
      kch_weight = MeterCollective(&ts, static_cast<uint32_t>(channels));
      *body_ns = Body();
      return weight;
    });
    callback([&](int64_t* body_ns) {
      CallbackMeter meter(&ts);  // Coll stop
      *body_ns = Body();
      return coll_weight();
    });
    for (int i = 0; i < 3 * channels; ++i) {  // per channel: start, KernelChStop state, stop
      callback([&](int64_t* body_ns) -> uint64_t {
        KernelChMeter meter(&ts);
        if (kch_weight != 0) meter.Time(kch_weight);
        *body_ns = Body();
        return kch_weight;
      });
    }
  }
  o.callbacks = ts.counters[kCtrCallbacks].load() + ts.counters[kCtrKernelChCallbacks].load();
  o.estimated_ns =
      static_cast<double>(static_cast<int64_t>(ts.counters[kCtrCallbackNs].load()) + correction);
  o.spent_ns = static_cast<double>(spent);
  return o;
}

TEST(CallbackMeter, CountsEveryCallbackAndEstimatesTheInjectedCostAtAnyChannelCount) {
  // A run on a vCPU the host keeps taking away (CI: 501 of ~700 timed samples preempted, the
  // estimate 28 % high) says nothing about the meter: up to kAttempts runs, judged on the closest
  // (the faults kMaxError names miss it in every run).
  constexpr int kAttempts = 3;
  for (int channels : {1, 2, 4, 8}) {
    SCOPED_TRACE(channels);
    // Enough collectives for 16 timed ones (each is timed with probability 3N / kKernelChSample).
    const int collectives = 16 * static_cast<int>(kKernelChSample) / (3 * channels);
    double best_error = 1e9;
    std::string attempts;
    for (int attempt = 0; attempt < kAttempts && best_error >= kMaxError; ++attempt) {
      Outcome o = RunCollectives(channels, collectives);
      ASSERT_EQ(o.callbacks, static_cast<uint64_t>(collectives) * (2 + 3 * channels));
      ASSERT_GT(o.spent_ns, 0);
      const double error = std::abs(o.estimated_ns - o.spent_ns) / o.spent_ns;
      best_error = std::min(best_error, error);
      attempts += " [estimated " + std::to_string(o.estimated_ns) + " ns, spent " +
                  std::to_string(o.spent_ns) +
                  " ns, preempted samples replaced: " + std::to_string(o.preempted_samples) + "]";
    }
    EXPECT_LT(best_error, kMaxError) << attempts;
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
  EXPECT_EQ(MeterCollective(&ts, 0), 0u);
  EXPECT_EQ(ts.counters[kCtrKernelChCallbacks].load(), kKernelChCallbacks);
}

TEST(CallbackMeter, ACollectiveIsTimedWhenItsCallbacksCrossAMultipleOfTheSampleWithTheirWeight) {
  for (uint32_t channels : {1u, 2u, 3u, 8u, 255u}) {
    SCOPED_TRACE(channels);
    ThreadState ts;
    const uint64_t callbacks = kKernelChCallbacks * channels;
    uint64_t timed = 0;
    uint64_t n = 0;
    for (uint64_t i = 0; i < 4 * kKernelChSample; ++i) {
      uint32_t weight = MeterCollective(&ts, channels);
      uint64_t before = n;
      n += callbacks;
      // Timed exactly when the count crosses a multiple of kKernelChSample.
      ASSERT_EQ(weight != 0, before / kKernelChSample != n / kKernelChSample) << i;
      if (weight != 0) {
        ++timed;
        // Unbiased: weight * callbacks is kKernelChSample, up to the rounding of the weight.
        EXPECT_NEAR(static_cast<double>(weight) * static_cast<double>(callbacks),
                    static_cast<double>(kKernelChSample), static_cast<double>(callbacks) / 2 + 1);
      }
    }
    EXPECT_EQ(ts.counters[kCtrKernelChCallbacks].load(), n);
    EXPECT_EQ(timed, n / kKernelChSample);
  }
  // A shared (several writers) thread state counts and never times.
  ThreadState shared;
  shared.shared = true;
  uint64_t timed = 0;
  for (uint64_t i = 0; i < kKernelChSample; ++i) timed += MeterCollective(&shared, 8) != 0 ? 1 : 0;
  EXPECT_EQ(timed, 0u);
  EXPECT_EQ(shared.counters[kCtrKernelChCallbacks].load(), kKernelChSample * 24);
}

// What one timed Coll callback adds to callback_ns_total when `body` runs inside it (the callbacks
// before it are untimed and empty).
uint64_t CountedForOneTimedCallback(const std::function<void()>& body) {
  ThreadState ts;
  for (uint64_t i = 1; i < kCallbackSample; ++i) CallbackMeter untimed(&ts);
  const uint64_t before = ts.counters[kCtrCallbackNs].load();
  {
    CallbackMeter timed(&ts);  // the kCallbackSample-th: timed
    body();
  }
  EXPECT_EQ(ts.counters[kCtrCallbacks].load(), kCallbackSample);
  return ts.counters[kCtrCallbackNs].load() - before;
}

// The budget's judgement of one-second windows, as many as a step needs, each of whose only timed
// callback counted `counted` (the same callback in every window).
BudgetLevel JudgedOverOneSecondWindows(uint64_t counted) {
  OverheadBudget budget(0.5);  // the default SENTINEL_BUDGET, 1 s windows
  budget.Observe(0, 0);
  for (int w = 1; w <= kBudgetConfirmWindows; ++w) {
    budget.Observe(int64_t{1000000000} * w, counted * static_cast<uint64_t>(w));
  }
  return budget.level();
}

// A callback the kernel took the CPU from (here it sleeps: on a busy host, other ranks ran) counts
// nothing for the 20 ms it was away: the meter's clock used to be the wall clock, which counted
// them kCallbackSample times (5 s of "plugin CPU" in one second) and tripped the budget on a host
// that was merely busy. Not even the switch's own work, which the kernel charges to the thread's
// CPU clock (tens of us in a VM, times kCallbackSample): a sample the thread was away for is
// dropped.
TEST(CallbackMeter, ADescheduledCallbackCountsNothingAndTripsNoBudget) {
  CalibrateMeterClock();
  static constexpr int64_t kAwayNs = 20000000;
  const uint64_t counted = CountedForOneTimedCallback(
      [] { std::this_thread::sleep_for(std::chrono::nanoseconds(kAwayNs)); });
  EXPECT_EQ(counted, 0u);
  EXPECT_EQ(JudgedOverOneSecondWindows(counted), BudgetLevel::kFull) << counted;

  // The same for a timed KernelCh callback.
  ThreadState ts;
  {
    KernelChMeter meter(&ts);
    meter.Time(1000);
    std::this_thread::sleep_for(std::chrono::nanoseconds(kAwayNs));
  }
  EXPECT_EQ(ts.counters[kCtrCallbackNs].load(), 0u);
}

// Real CPU burned inside a timed callback is counted, and trips the budget. (A burn the kernel
// preempted is dropped as above: the first of a few tries that ran through is judged. So is a
// burn whose thread CPU clock overshot: in a VM, time the hypervisor took the vCPU away for is
// charged to the thread running on it, and one such 1.7 ms steal ended a 200 us burn at 1.9 ms,
// which the meter rightly counted as what the clock said: a try that burned more than half again
// kBurnNs is not the burn this test judges.)
TEST(CallbackMeter, CpuBurnedInACallbackIsCountedAndTripsTheBudget) {
  CalibrateMeterClock();
  static constexpr int64_t kBurnNs = 200000;  // 1024 x 200 us = 205 ms of a 1 s window > 0.5 %
  uint64_t counted = 0;
  int64_t burned = 0;
  for (int attempt = 0; attempt < 20 && (counted == 0 || burned > kBurnNs * 3 / 2); ++attempt) {
    counted = CountedForOneTimedCallback([&burned] {
      const int64_t t0 = ThreadCpuNs();
      int64_t now = t0;
      while (now - t0 < kBurnNs) now = ThreadCpuNs();
      burned = now - t0;
    });
  }
  EXPECT_GE(counted, kCallbackSample * static_cast<uint64_t>(kBurnNs) * 9 / 10)
      << counted << " (the burn: " << burned << " ns)";
  EXPECT_LT(counted, kCallbackSample * static_cast<uint64_t>(kBurnNs) * 3 / 2)
      << counted << " (the burn: " << burned << " ns)";
  EXPECT_EQ(JudgedOverOneSecondWindows(counted), BudgetLevel::kNoProxy);
}

// The reads' own cost is not counted kCallbackSample times: an empty timed callback counts about
// nothing (less than 1 us per callback it stands for), whatever the clock read costs.
TEST(CallbackMeter, AnEmptyTimedCallbackCountsAboutNothing) {
  CalibrateMeterClock();
  uint64_t least = UINT64_MAX;
  for (int i = 0; i < 8; ++i) least = std::min(least, CountedForOneTimedCallback([] {}));
  EXPECT_LT(least, kCallbackSample * 1000) << "bias " << MeterReadBias() << " ns";
}

}  // namespace
}  // namespace sentinel::plugin
