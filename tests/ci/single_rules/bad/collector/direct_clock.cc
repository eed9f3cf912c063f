// Planted: the collector reading common/mono_clock.h itself instead of its injected Clock.
#include <cstdint>

#include "common/mono_clock.h"

int64_t Elapsed(int64_t since) {
  const int64_t now = sentinel::rules::MonoNowNs();
  return now - since;
}
