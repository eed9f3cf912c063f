// The overhead budget (SENTINEL_BUDGET): the drainer compares the plugin's own CPU time on NCCL's
// threads (the sampled callback_ns_total of the heartbeat) with the wall time that passed, once
// per window. Over budget, the plugin degrades one step per window, and never silently:
//   1 kNoProxy         ProxyOp/ProxyStep/NetPlugin/ProxyCtrl events off (NCCL's mask);
//   2 kKernelChSampled KernelCh kept on 1 collective in kBudgetSampleEvery, in bursts
//                      (InBudgetBurst); the others' records carry kSentinelCollGpuSkipped and
//                      no GPU times;
//   3 kRecordsSampled  1 record in kBudgetSampleEvery is queued, the same bursts, marked
//                      kSentinelCollSampled.
// The level is logged at each step and sent in every heartbeat (budget_level). It never steps back
// up within a process: the cost that crossed the budget would come back with the events.
// A step needs kBudgetConfirmWindows consecutive windows over budget: one window's figure rests on
// a few timed callbacks, each counting for 256 (callback_meter.h), so a single noisy one (a slow
// system call, a host that took the vCPU away) can put one window over; a plugin that really costs
// too much is over in every window and steps down within kBudgetConfirmWindows of them.
#pragma once

#include <cstdint>

namespace sentinel::plugin {

enum class BudgetLevel : uint8_t {
  kFull = 0,
  kNoProxy = 1,
  kKernelChSampled = 2,
  kRecordsSampled = 3,
};
inline constexpr uint32_t kBudgetSampleEvery = 8;  // a power of two
inline constexpr int kBudgetConfirmWindows = 3;

// Which collectives levels 2 and 3 keep: kBudgetSampleEvery consecutive ordinals out of every
// kBudgetSampleEvery^2 (ordinals 64k .. 64k+7), the same 1-in-8 volume as one in every 8, but
// in bursts, so the kept collectives still come in consecutive pairs: sentineld's compute segment
// (the end of one collective to the start of the next) and the GPU times it subtracts stay
// measured between neighbours, never across the 56 it did not see. The ordinal is the
// communicator's count of collectives, the same on every rank, so every rank keeps the same ones
// and the joins stay complete. 0 (p2p, not counted) is never sampled out.
inline constexpr bool InBudgetBurst(uint64_t ordinal) noexcept {
  return ordinal == 0 || (ordinal / kBudgetSampleEvery) % kBudgetSampleEvery == 0;
}

const char* BudgetLevelName(BudgetLevel level) noexcept;

class OverheadBudget {
 public:
  // `percent` of the wall time (SENTINEL_BUDGET); 0 turns the budget off. `window_ns`: how much
  // wall time one judgement spans (and how long each step is watched before the next).
  explicit OverheadBudget(double percent, int64_t window_ns = 1000000000) noexcept
      : fraction_(percent / 100.0), window_ns_(window_ns) {}

  // Drainer thread only. `callback_ns_total`: cumulative (sampled) ns inside our callbacks on
  // every thread. Returns true when this call moved the level one step down (the
  // kBudgetConfirmWindows-th consecutive window over budget at this level).
  bool Observe(int64_t now_ns, uint64_t callback_ns_total) noexcept;

  BudgetLevel level() const noexcept { return level_; }
  // The overhead of the last complete window (callback ns per wall ns), -1 before the first.
  double last_ratio() const noexcept { return last_ratio_; }
  double fraction() const noexcept { return fraction_; }

 private:
  double fraction_;
  int64_t window_ns_;
  bool started_ = false;
  int64_t window_start_ns_ = 0;
  uint64_t window_start_cb_ = 0;
  double last_ratio_ = -1;
  int over_run_ = 0;  // consecutive windows over budget at this level
  BudgetLevel level_ = BudgetLevel::kFull;
};

}  // namespace sentinel::plugin
