// The one reading of the clocks every part of sentinel stamps with: CLOCK_MONOTONIC (a vDSO call,
// no syscall), the clock the plugin stamps records with and sentineld joins them on, and
// CLOCK_REALTIME for wall-clock stamps. Header-only and noexcept: callable from the plugin's hot
// path. scripts/check_single_rules.py rejects a clock_gettime anywhere else.
#pragma once

#include <time.h>

#include <cstdint>

namespace sentinel::rules {

inline int64_t ReadClockNs(clockid_t id) noexcept {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

inline int64_t MonoNowNs() noexcept { return ReadClockNs(CLOCK_MONOTONIC); }
inline int64_t RealNowNs() noexcept { return ReadClockNs(CLOCK_REALTIME); }

}  // namespace sentinel::rules
