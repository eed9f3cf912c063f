// The one clock of the plugin: raw CLOCK_MONOTONIC nanoseconds (a vDSO call, no syscall).
#pragma once

#include <time.h>

#include <cstdint>

namespace sentinel::plugin {

inline int64_t MonoNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

}  // namespace sentinel::plugin
