// CallbackMeter: the plugin's own CPU time on NCCL's threads, measured cheaply. Every callback
// but KernelCh's counts itself (callbacks_total); one in kCallbackSample is timed (MeterSpan) and
// counts kCallbackSample times the CPU time it took, so callback_ns_total is a sampled estimate of
// the plugin's own CPU time, which the overhead budget (overhead_budget.h) and sentineld's
// overhead_ratio divide by wall time. The callback count doubles as the sampling tick: one load,
// add and store of the thread's own counter line plus a never-taken branch per callback
// (sentinel_meter_benchmark).
//
// KernelCh callbacks (start, KernelChStop state, stop: 3 per channel) are metered per collective,
// so the meter's cost does not grow with the channel count: the Coll/P2p start adds
// the 3 callbacks per channel it expects to the thread's KernelCh callback count (MeterCollective),
// and its KernelCh callbacks are timed when that addition carries the count across a multiple of
// kKernelChSample. A collective of N channels is so timed with probability 3N / kKernelChSample,
// and each of its KernelCh callbacks then counts kKernelChSample / 3N times its duration
// (KernelChMeter): an unbiased estimate from the one counter update the count needs anyway (no
// tick of its own), at 4 clock reads per timed callback: 12N per kKernelChSample KernelCh
// callbacks, about 0.05 per 8-channel collective. A KernelCh the start did not expect
// (an extra channel, a collective whose channel count is unknown) counts itself.
//
// Timing a callback (MeterSpan): the thread's CPU clock (ThreadCpuNs, plugin/base/clock.h) and the
// monotonic clock, read at both ends. CPU time, not elapsed time: on a busy host a timed callback
// preempted for a few ms used to count 256 times (then the sample rate) the time other threads
// ran (~1 s per 4 ms preemption) and tripped the budget on a plugin that cost no more than on an
// idle host. And a span in which the thread was away (the monotonic clock ran on more than the CPU
// clock, by more than the reads themselves explain) is dropped, not counted: the kernel charges a
// switch's own work to the thread that was switched out (tens of us in a VM), which kCallbackSample
// would multiply too. Plugin callbacks take ns to us and are rarely switched out mid-way, so
// dropping those samples biases the estimate low by about that rarity. The CPU clock is a system
// call, not a vDSO read (~0.2 us on a host, 1.3 us or more in a VM), so 1 callback in 1024 is
// timed, not 1 in 256 as with the monotonic clock (sentinel_meter_benchmark). CalibrateMeterClock
// measures, once at plugin init, the usual CPU time between two back-to-back reads (taken off every
// span, or the reads would count kCallbackSample times) and the usual time they spend outside it
// (the away tolerance is a few times that).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "plugin/base/clock.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin {

inline constexpr uint64_t kCallbackSample = 1024;   // a power of two
inline constexpr uint64_t kKernelChCallbacks = 3;   // start, KernelChStop state, stop
inline constexpr uint64_t kKernelChSample = 65536;  // a power of two, > 3 * 255 channels
inline constexpr int64_t kMeterAwayFloorNs = 2000;  // the least away tolerance (clock-read noise)

// Set by CalibrateMeterClock (these defaults hold until then: no bias, a 10 us tolerance).
inline std::atomic<int64_t> g_meter_read_bias_ns{0};
inline std::atomic<int64_t> g_meter_away_tolerance_ns{10000};

inline int64_t MeterReadBias() noexcept {
  return g_meter_read_bias_ns.load(std::memory_order_relaxed);
}
inline int64_t MeterAwayTolerance() noexcept {
  return g_meter_away_tolerance_ns.load(std::memory_order_relaxed);
}

// Slow path (plugin init); idempotent. The tolerance: 4 times the median of a few read pairs'
// time outside their CPU time. The bias: the mean CPU time of the pairs a span would keep (within
// the tolerance, and under 4 times the median: a rare slow read is no read's usual cost).
inline void CalibrateMeterClock() noexcept {
  constexpr int kPairs = 63;
  int64_t cpu[kPairs];
  int64_t away[kPairs];
  for (int i = 0; i < kPairs; ++i) {
    const int64_t m0 = MonoNs();
    const int64_t c0 = ThreadCpuNs();
    const int64_t c1 = ThreadCpuNs();
    const int64_t m1 = MonoNs();
    cpu[i] = c1 - c0;
    away[i] = (m1 - m0) - (c1 - c0);
  }
  int64_t sorted[kPairs];
  std::copy(away, away + kPairs, sorted);
  std::sort(sorted, sorted + kPairs);
  const int64_t tolerance = std::max<int64_t>(kMeterAwayFloorNs, 4 * sorted[kPairs / 2]);
  std::copy(cpu, cpu + kPairs, sorted);
  std::sort(sorted, sorted + kPairs);
  const int64_t usual = sorted[kPairs / 2];
  int64_t sum = 0;
  int64_t kept = 0;
  for (int i = 0; i < kPairs; ++i) {
    if (away[i] > tolerance || cpu[i] > 4 * usual) continue;
    sum += cpu[i];
    ++kept;
  }
  const int64_t bias = kept > 0 ? sum / kept : usual;
  g_meter_read_bias_ns.store(bias > 0 ? bias : 0, std::memory_order_relaxed);
  g_meter_away_tolerance_ns.store(tolerance, std::memory_order_relaxed);
}

// One timed span: started by Start(), its CPU time (less the reads' own) by Stop(), 0 when the
// thread was away during it (dropped).
struct MeterSpan {
  int64_t mono0 = 0;
  int64_t cpu0 = -1;  // -1: not timed
  void Start() noexcept {
    mono0 = MonoNs();
    cpu0 = ThreadCpuNs();
  }
  bool timed() const noexcept { return cpu0 >= 0; }
  int64_t Stop() const noexcept {
    const int64_t cpu = ThreadCpuNs() - cpu0;
    const int64_t elapsed = MonoNs() - mono0;
    if (elapsed - cpu > MeterAwayTolerance()) return 0;  // descheduled in between: dropped
    return cpu - MeterReadBias();
  }
};

class CallbackMeter {
 public:
  explicit CallbackMeter(ThreadState* ts) noexcept : ts_(ts) {
    if (__builtin_expect(ts->shared, 0)) {
      ts->Add(kCtrCallbacks);  // the shared overflow state is not timed
      return;
    }
    const uint64_t v = ts->AddOwned(kCtrCallbacks, 1);
    if (__builtin_expect((v & (kCallbackSample - 1)) == 0, 0)) span_.Start();
  }
  ~CallbackMeter() {
    if (__builtin_expect(span_.timed(), 0)) {
      const int64_t spent = span_.Stop();
      if (spent > 0) ts_->Add(kCtrCallbackNs, static_cast<uint64_t>(spent) * kCallbackSample);
    }
  }
  CallbackMeter(const CallbackMeter&) = delete;
  CallbackMeter& operator=(const CallbackMeter&) = delete;

 private:
  ThreadState* ts_;
  MeterSpan span_;
};

// At a Coll/P2p start that expects `kch` KernelCh children: counts their callbacks and returns
// the weight of each of their timed durations, 0 when they are not timed. A counter of their own:
// added to kCtrCallbacks, they would move CallbackMeter's sampling tick in steps that alias with
// the 1-in-kCallbackSample test.
inline uint32_t MeterCollective(ThreadState* ts, uint32_t kch) noexcept {
  if (kch == 0) return 0;
  const uint64_t callbacks = kKernelChCallbacks * kch;
  if (__builtin_expect(ts->shared, 0)) {  // several writers: counted, not timed
    ts->Add(kCtrKernelChCallbacks, callbacks);
    return 0;
  }
  const uint64_t after = ts->AddOwned(kCtrKernelChCallbacks, callbacks);
  const uint64_t before = after - callbacks;
  if (__builtin_expect(((before ^ after) & ~(kKernelChSample - 1)) == 0, 1)) return 0;
  // Crossed a multiple of kKernelChSample (callbacks < kKernelChSample: at most one). Rounded.
  return static_cast<uint32_t>((kKernelChSample + callbacks / 2) / callbacks);
}

// One KernelCh callback: free unless its collective is a timed one (Time() as soon as the
// callback has found the collective; the lookup before it is a few loads) or it was not counted
// at the collective's start (Count()).
class KernelChMeter {
 public:
  explicit KernelChMeter(ThreadState* ts) noexcept : ts_(ts) {}
  // `weight`: MeterCollective's, non-zero.
  void Time(uint32_t weight) noexcept {
    weight_ = weight;
    span_.Start();
  }
  void Count(uint64_t n) noexcept { ts_->Add(kCtrKernelChCallbacks, n); }
  ~KernelChMeter() {
    if (__builtin_expect(span_.timed(), 0)) {
      const int64_t spent = span_.Stop();
      if (spent > 0) ts_->Add(kCtrCallbackNs, static_cast<uint64_t>(spent) * weight_);
    }
  }
  KernelChMeter(const KernelChMeter&) = delete;
  KernelChMeter& operator=(const KernelChMeter&) = delete;

 private:
  ThreadState* ts_;
  MeterSpan span_;
  uint32_t weight_ = 0;
};

}  // namespace sentinel::plugin
