// InvariantBroken(): what the plugin does, in every build, when an invariant of its own whose
// failure would harm the host (a write past a buffer) is found broken: the caller refuses the
// step, and the plugin is turned off for the rest of the process through its one "plugin off"
// path (the handler entry/ installs: the core's TurnOff, which logs once and sets NCCL's mask to
// 0). Where no handler is installed (the guard or transport linked alone, the net .so) the first
// failure is logged once on stderr. The host's process continues either way.
//
// Invariants that need no such action are SENTINEL_DCHECKs (common/dcheck.h): fatal in Debug and
// sanitizer builds, compiled out in release. Header-only (inline variables) so that every plugin
// library may use it without linking the core.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>

#include "plugin/base/raw_log.h"

namespace sentinel::plugin {

// The shape of TurnOff: (where, why).
using InvariantOffHandler = void (*)(const char* where, const char* why) noexcept;

namespace invariant_internal {
// Constant-initialised (no static constructor): safe to read before any init ran.
inline std::atomic<InvariantOffHandler> off_handler{nullptr};
inline std::atomic<uint64_t> failures{0};
inline std::atomic<bool> logged{false};
}  // namespace invariant_internal

// Installs the handler (the plugin's "turn off" path). Null removes it.
inline void SetInvariantOffHandler(InvariantOffHandler handler) noexcept {
  invariant_internal::off_handler.store(handler, std::memory_order_release);
}

// Broken invariants reported by this library since load.
inline uint64_t InvariantFailureCount() noexcept {
  return invariant_internal::failures.load(std::memory_order_relaxed);
}

// Counts, then turns the plugin off (the handler logs once), or logs once here. `what` names the
// invariant; `where` is its file and `line` its line.
[[gnu::cold, gnu::noinline]] inline void InvariantBroken(const char* what, const char* where,
                                                         int line) noexcept {
  invariant_internal::failures.fetch_add(1, std::memory_order_relaxed);
  InvariantOffHandler handler = invariant_internal::off_handler.load(std::memory_order_acquire);
  if (handler != nullptr) {
    // TurnOff logs its own line once per process; the place goes into its reason.
    char why[256];
    std::snprintf(why, sizeof(why), "invariant broken: %s (%s:%d)", what, where, line);
    handler("invariant check", why);
    return;
  }
  if (!invariant_internal::logged.exchange(true, std::memory_order_relaxed)) {
    RawLog("invariant broken: %s (%s:%d); counted, the host continues", what, where, line);
  }
}

}  // namespace sentinel::plugin
