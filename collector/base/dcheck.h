// SENTINEL_DCHECK(cond) for sentineld and sentinelctl: an invariant of our own code (input from a
// socket or a file is validated and refused, never DCHECKed).
//
// - Debug and sanitizer builds (SENTINEL_DCHECK_FATAL=1, set by CMake): print the condition and its
//   place, then abort, so the test that reached it fails where the bug is.
// - Release builds: count it and log it (the first kMaxLoggedDcheckFailures, so a broken invariant
//   on a busy path cannot flood the journal); the daemon keeps serving.
// The condition is evaluated in both builds: keep it cheap and free of side effects.
#pragma once

#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#ifndef SENTINEL_DCHECK_FATAL
#define SENTINEL_DCHECK_FATAL 0
#endif

namespace sentinel::collector {

inline constexpr uint64_t kMaxLoggedDcheckFailures = 16;

namespace dcheck_internal {
inline std::atomic<uint64_t> failures{0};
}  // namespace dcheck_internal

// Broken invariants seen since start.
inline uint64_t DcheckFailureCount() noexcept {
  return dcheck_internal::failures.load(std::memory_order_relaxed);
}

[[gnu::cold, gnu::noinline]] inline void DcheckFailedRelease(const char* cond, const char* file,
                                                             int line) noexcept {
  const uint64_t n = dcheck_internal::failures.fetch_add(1, std::memory_order_relaxed) + 1;
  if (n > kMaxLoggedDcheckFailures) return;
  try {
    spdlog::error("invariant broken: {} ({}:{}); failure {} (only the first {} are logged)", cond,
                  file, line, n, kMaxLoggedDcheckFailures);
  } catch (...) {  // a logging failure must not end the daemon
  }
}

[[noreturn, gnu::cold, gnu::noinline]] inline void DcheckFailedFatal(const char* cond,
                                                                     const char* file,
                                                                     int line) noexcept {
  dcheck_internal::failures.fetch_add(1, std::memory_order_relaxed);
  fprintf(stderr, "SENTINEL_DCHECK failed: %s (%s:%d)\n", cond, file, line);
  abort();
}

}  // namespace sentinel::collector

#if SENTINEL_DCHECK_FATAL
#define SENTINEL_DCHECK(cond)                   \
  (__builtin_expect(static_cast<bool>(cond), 1) \
       ? static_cast<void>(0)                   \
       : ::sentinel::collector::DcheckFailedFatal(#cond, __FILE__, __LINE__))
#else
#define SENTINEL_DCHECK(cond)                   \
  (__builtin_expect(static_cast<bool>(cond), 1) \
       ? static_cast<void>(0)                   \
       : ::sentinel::collector::DcheckFailedRelease(#cond, __FILE__, __LINE__))
#endif
