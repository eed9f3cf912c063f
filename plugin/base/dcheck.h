// SENTINEL_DCHECK(cond): an invariant of our own code (not a check of outside input: hostile bytes
// are validated and refused, never DCHECKed).
//
// - Debug and sanitizer builds (SENTINEL_DCHECK_FATAL=1, set by CMake for CMAKE_BUILD_TYPE=Debug
//   and for every SENTINEL_SANITIZE build): a broken invariant prints the condition and its place
//   and aborts, so the test that reached it fails where the bug is.
// - Release builds: the host always wins. The failure is counted, and the plugin is turned off for
//   the rest of the process through its one "plugin off" path (the handler entry/ installs: the
//   core's TurnOff, which logs once and sets NCCL's mask to 0). Where no handler is installed (the
//   guard or transport linked alone, the net .so) the first failure is logged once on stderr.
//   The host's process continues either way.
//
// The condition is evaluated in both builds: keep it cheap and free of side effects (clang-tidy's
// bugprone-assert-side-effect knows this macro), and do not put one on the per-event hot path.
// Header-only (inline variables) so that every plugin library may use it without linking the core.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "plugin/base/raw_log.h"

#ifndef SENTINEL_DCHECK_FATAL
#define SENTINEL_DCHECK_FATAL 0
#endif

namespace sentinel::plugin {

// What a release build calls on a broken invariant: (where, why), the shape of TurnOff.
using DcheckOffHandler = void (*)(const char* where, const char* why) noexcept;

namespace dcheck_internal {
// Constant-initialised (no static constructor): safe to read before any init ran.
inline std::atomic<DcheckOffHandler> off_handler{nullptr};
inline std::atomic<uint64_t> failures{0};
inline std::atomic<bool> logged{false};
}  // namespace dcheck_internal

// Installs the release-build handler (the plugin's "turn off" path). Null removes it.
inline void SetDcheckOffHandler(DcheckOffHandler handler) noexcept {
  dcheck_internal::off_handler.store(handler, std::memory_order_release);
}

// Broken invariants seen by this library since load (both builds count before acting).
inline uint64_t DcheckFailureCount() noexcept {
  return dcheck_internal::failures.load(std::memory_order_relaxed);
}

// The release action: count, then turn the plugin off (the handler logs once), or log once here.
[[gnu::cold, gnu::noinline]] inline void DcheckFailedRelease(const char* cond, const char* file,
                                                             int line) noexcept {
  dcheck_internal::failures.fetch_add(1, std::memory_order_relaxed);
  DcheckOffHandler handler = dcheck_internal::off_handler.load(std::memory_order_acquire);
  if (handler != nullptr) {
    // TurnOff logs its own line once per process; the place goes into its reason.
    char why[256];
    snprintf(why, sizeof(why), "invariant broken: %s (%s:%d)", cond, file, line);
    handler("invariant check", why);
    return;
  }
  if (!dcheck_internal::logged.exchange(true, std::memory_order_relaxed)) {
    RawLog("invariant broken: %s (%s:%d); counted, the host continues", cond, file, line);
  }
}

// The debug/sanitizer action: say what broke and where, then abort.
[[noreturn, gnu::cold, gnu::noinline]] inline void DcheckFailedFatal(const char* cond,
                                                                     const char* file,
                                                                     int line) noexcept {
  dcheck_internal::failures.fetch_add(1, std::memory_order_relaxed);
  RawLog("SENTINEL_DCHECK failed: %s (%s:%d)", cond, file, line);
  abort();
}

}  // namespace sentinel::plugin

#if SENTINEL_DCHECK_FATAL
#define SENTINEL_DCHECK(cond)                   \
  (__builtin_expect(static_cast<bool>(cond), 1) \
       ? static_cast<void>(0)                   \
       : ::sentinel::plugin::DcheckFailedFatal(#cond, __FILE__, __LINE__))
#else
#define SENTINEL_DCHECK(cond)                   \
  (__builtin_expect(static_cast<bool>(cond), 1) \
       ? static_cast<void>(0)                   \
       : ::sentinel::plugin::DcheckFailedRelease(#cond, __FILE__, __LINE__))
#endif
