// The C ABI boundary (docs/house-rules.md "3.4 Error handling"): every exported callback is a thin
// noexcept shim that runs its body through Guarded(). The first statement is one relaxed load of
// the gate; anything thrown below is caught here, and the first failure turns the plugin off for
// the life of the process (logged once, counted). NCCL always gets ncclSuccess.
#pragma once

#include <atomic>

#include "absl/base/optimization.h"

#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/core/profiler_core.h"

namespace sentinel::plugin {

template <typename Fn>
inline SentinelNcclResult Guarded(const char* where, Fn&& fn) noexcept {
  if (ABSL_PREDICT_FALSE(!PluginOn())) return kSentinelNcclSuccess;
  try {
    fn();
  } catch (...) {
    TurnOff(where, "exception at the ABI boundary");
  }
  return kSentinelNcclSuccess;
}

// init never fails and always leaves a non-null context (docs/nccl-facts.md "4.2 `init`"): on any
// problem the mask is set to 0 and NCCL gets the dummy context, whose events are ignored.
template <typename Fn>
inline SentinelNcclResult GuardedInit(void** context, int* mask, Fn&& fn) noexcept {
  try {
    fn();
  } catch (...) {
    TurnOff("init", "exception at the ABI boundary");
  }
  if (context != nullptr && *context == nullptr) *context = DummyContext();
  if (!PluginOn() && mask != nullptr) {
    // relaxed: NCCL reads the mask with relaxed atomic loads
    // (docs/nccl-facts.md "4.5 The activation mask").
    reinterpret_cast<std::atomic<int>*>(mask)->store(0, std::memory_order_relaxed);
  }
  return kSentinelNcclSuccess;
}

}  // namespace sentinel::plugin
