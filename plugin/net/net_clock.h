// The net wrapper's request clock (internal to libnccl-net-sentinel.so): request latencies are
// taken in ticks (the TSC on x86, the plugin's one clock elsewhere), because isend/irecv/test run
// on NCCL's proxy thread and a tick read is the cheapest clock there is. Ticks become nanoseconds
// only when someone asks (sentinelNetSnapshot), from one calibration pair read at load and one
// read at the question.
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "absl/base/attributes.h"

#include "plugin/base/clock.h"

namespace sentinel::net {

// The plugin's one clock, unsigned for the tick arithmetic here.
inline uint64_t MonoNs() { return static_cast<uint64_t>(plugin::MonoNs()); }

inline uint64_t Ticks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return MonoNs();
#endif
}

// A (ticks, ns) pair read as close together as this thread can: the ticks on both sides of the
// clock read, the tightest of a few tries. A preemption between two plain reads would skew the
// ticks -> ns rate by its whole length (tens of ms on a loaded host) in a young process.
inline void ReadClockPair(uint64_t* ticks, uint64_t* ns) {
  uint64_t best = ~0ull;
  for (int i = 0; i < 4; ++i) {
    const uint64_t before = Ticks();
    const uint64_t mono = MonoNs();
    const uint64_t after = Ticks();
    if (after - before < best) {
      best = after - before;
      *ticks = before + (after - before) / 2;
      *ns = mono;
    }
  }
}

// The pair read at load (the library constructor), the start of the ticks -> ns calibration.
ABSL_CONST_INIT inline uint64_t g_tick0 = 0;
ABSL_CONST_INIT inline uint64_t g_mono0 = 0;

inline void CalibrateAtLoad() { ReadClockPair(&g_tick0, &g_mono0); }

// Ticks -> ns from the time since load (x86: TSC; elsewhere ticks already are ns). Slow path.
inline double NsPerTick() {
  double ns_per_tick = 1.0;
#if defined(__x86_64__)
  uint64_t ticks_now = 0;
  uint64_t mono_now = 0;
  ReadClockPair(&ticks_now, &mono_now);
  uint64_t dt = ticks_now - g_tick0;
  uint64_t dn = mono_now - g_mono0;
  if (dt > 0 && dn > 0) ns_per_tick = static_cast<double>(dn) / static_cast<double>(dt);
#endif
  return ns_per_tick;
}

}  // namespace sentinel::net
