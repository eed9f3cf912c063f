// Record building: turns a finished Coll/P2p/CeColl slot into its wire record, once per
// collective.
#pragma once

#include <cstdint>

#include "plugin/base/tick_clock.h"
#include "plugin/core/event_model.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {

// Writes every field of *r exactly once (no memset: the record has no padding, and a `rep stos`
// start-up cost more than the stores). `r` is usually the thread's ring slot. GPU times are set
// (kSentinelCollGpuTimeValid) from the KernelCh timers through the context's calibration, or for
// CeColl from the host start/stop; proxy sums only when a ProxyStep contributed.
// `ticks`: the interval clock the slot's proxy sums were taken with.
void BuildCollRecord(const Slot& s, bool truncated, uint32_t pid, const TickClock& ticks,
                     SentinelWireCollRecord* r) noexcept;

}  // namespace sentinel::plugin
