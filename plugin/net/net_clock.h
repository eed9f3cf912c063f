// The net wrapper's request clock (internal to libnccl-net-sentinel.so): request latencies are
// taken in ticks of the plugin's interval clock (plugin/base/tick_clock.h: the TSC where it
// serves), because isend/irecv/test run on NCCL's proxy thread. Ticks become nanoseconds only
// when someone asks (sentinelNetSnapshot), from the pair read at load and one read at the question.
#pragma once

#include <cstdint>

#include "absl/base/attributes.h"

#include "plugin/base/clock.h"
#include "plugin/base/tick_clock.h"

namespace sentinel::net {

// The plugin's one clock, unsigned for the tick arithmetic here.
inline uint64_t MonoNs() { return static_cast<uint64_t>(plugin::MonoNs()); }

// Started at load (the library constructor), before any request.
ABSL_CONST_INIT inline plugin::TickClock g_request_clock;

inline uint64_t Ticks() { return g_request_clock.Now(); }

inline void CalibrateAtLoad() { g_request_clock.Start(plugin::TscServesIntervals()); }

// Ticks -> ns from the time since load. Slow path.
inline double NsPerTick() { return g_request_clock.MeasureNsPerTick(); }

}  // namespace sentinel::net
