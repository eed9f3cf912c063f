// CallbackMeter: the plugin's own CPU time on NCCL's threads, measured cheaply. Every callback
// counts itself (callbacks_total); one in kCallbackSample is timed with two clock reads and
// counts kCallbackSample times its duration, so callback_ns_total is a sampled estimate, which
// the overhead budget (overhead_budget.h) and sentineld's overhead_ratio divide by wall time.
// The callback count doubles as the sampling tick: one load, add and store of the thread's own
// counter line plus a never-taken branch per callback (sentinel_meter_benchmark).
#pragma once

#include <atomic>
#include <cstdint>

#include "plugin/core/clock.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin {

inline constexpr uint64_t kCallbackSample = 256;  // a power of two

class CallbackMeter {
 public:
  explicit CallbackMeter(ThreadState* ts) noexcept : ts_(ts) {
    if (__builtin_expect(ts->shared, 0)) {
      ts->Add(kCtrCallbacks);  // the shared overflow state is not timed
      return;
    }
    // Single writer: a plain load+store; relaxed because the drainer only sums.
    std::atomic<uint64_t>& n = ts->counters[kCtrCallbacks];
    uint64_t v = n.load(std::memory_order_relaxed) + 1;
    n.store(v, std::memory_order_relaxed);
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

}  // namespace sentinel::plugin
