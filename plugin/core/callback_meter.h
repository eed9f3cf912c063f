// CallbackMeter: the plugin's own CPU time on NCCL's threads, measured cheaply. Every callback
// but KernelCh's counts itself (callbacks_total); one in kCallbackSample is timed with two clock
// reads and counts kCallbackSample times its duration, so callback_ns_total is a sampled estimate,
// which the overhead budget (overhead_budget.h) and sentineld's overhead_ratio divide by wall time.
// The callback count doubles as the sampling tick: one load, add and store of the thread's own
// counter line plus a never-taken branch per callback (sentinel_meter_benchmark).
//
// KernelCh callbacks (start, KernelChStop state, stop: 3 per channel) are metered per collective,
// so the meter's cost does not grow with the channel count: the Coll/P2p start adds
// the 3 callbacks per channel it expects to the thread's KernelCh callback count (MeterCollective),
// and its KernelCh callbacks are timed when that addition carries the count across a multiple of
// kKernelChSample. A collective of N channels is so timed with probability 3N / kKernelChSample,
// and each of its KernelCh callbacks then counts kKernelChSample / 3N times its duration
// (KernelChMeter): an unbiased estimate from the one counter update the count needs anyway (no
// tick of its own), at 2 clock reads per timed callback: 6N per kKernelChSample KernelCh
// callbacks, about 0.02 per 8-channel collective. A KernelCh the start did not expect
// (an extra channel, a collective whose channel count is unknown) counts itself.
#pragma once

#include <cstdint>

#include "plugin/base/clock.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin {

inline constexpr uint64_t kCallbackSample = 256;    // a power of two
inline constexpr uint64_t kKernelChCallbacks = 3;   // start, KernelChStop state, stop
inline constexpr uint64_t kKernelChSample = 65536;  // a power of two, > 3 * 255 channels

class CallbackMeter {
 public:
  explicit CallbackMeter(ThreadState* ts) noexcept : ts_(ts) {
    if (__builtin_expect(ts->shared, 0)) {
      ts->Add(kCtrCallbacks);  // the shared overflow state is not timed
      return;
    }
    const uint64_t v = ts->AddOwned(kCtrCallbacks, 1);
    if (__builtin_expect((v & (kCallbackSample - 1)) == 0, 0)) t0_ = MonoNs();
  }
  ~CallbackMeter() {
    if (__builtin_expect(t0_ != 0, 0)) {
      ts_->Add(kCtrCallbackNs, static_cast<uint64_t>(MonoNs() - t0_) * kCallbackSample);
    }
  }
  CallbackMeter(const CallbackMeter&) = delete;
  CallbackMeter& operator=(const CallbackMeter&) = delete;

 private:
  ThreadState* ts_;
  int64_t t0_ = 0;
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
    t0_ = MonoNs();
  }
  void Count(uint64_t n) noexcept { ts_->Add(kCtrKernelChCallbacks, n); }
  ~KernelChMeter() {
    if (__builtin_expect(t0_ != 0, 0)) {
      ts_->Add(kCtrCallbackNs, static_cast<uint64_t>(MonoNs() - t0_) * weight_);
    }
  }
  KernelChMeter(const KernelChMeter&) = delete;
  KernelChMeter& operator=(const KernelChMeter&) = delete;

 private:
  ThreadState* ts_;
  int64_t t0_ = 0;
  uint32_t weight_ = 0;
};

}  // namespace sentinel::plugin
