// SENTINEL_DCHECK(cond): an invariant of our own code, one macro for the plugin, sentineld and the
// tools. Input from outside (a socket, a file, NCCL's pointers) is validated and refused, never
// DCHECKed.
//
// - SENTINEL_DCHECK_FATAL=1 (CMake sets it for CMAKE_BUILD_TYPE=Debug and for every
//   SENTINEL_SANITIZE build): a broken invariant prints the condition and its place on stderr and
//   aborts, so the test that reached it fails where the bug is.
// - Otherwise (release): compiled out. The condition is NOT evaluated, only compiled (so it keeps
//   type-checking and naming live variables), which is what lets a DCHECK sit on the hot path.
//
// A failure that a release build must still act on (turn the plugin off, refuse a write) is not a
// DCHECK: it is an `if` with its handling (plugin/base/invariant.h for the plugin).
#pragma once

#include <cstdlib>

#include "common/raw_log.h"

#ifndef SENTINEL_DCHECK_FATAL
#define SENTINEL_DCHECK_FATAL 0
#endif

namespace sentinel::rules {

// The fatal form's report: what broke and where, then abort. Never returns.
[[noreturn, gnu::cold, gnu::noinline]] inline void DcheckFailed(const char* cond, const char* file,
                                                                int line) noexcept {
  RawLog("SENTINEL_DCHECK failed: %s (%s:%d)", cond, file, line);
  std::abort();
}

}  // namespace sentinel::rules

#if SENTINEL_DCHECK_FATAL
#define SENTINEL_DCHECK(cond)                                     \
  do {                                                            \
    if (__builtin_expect(!static_cast<bool>(cond), 0)) {          \
      ::sentinel::rules::DcheckFailed(#cond, __FILE__, __LINE__); \
    }                                                             \
  } while (false)
#else
// `false &&` never evaluates `cond`; the compiler still parses and type-checks it.
#define SENTINEL_DCHECK(cond) \
  do {                        \
  } while (false && static_cast<bool>(cond))
#endif
