// Chrome/Perfetto trace (JSON object format) of the collector's kept samples, for /v1/trace. A
// pure function of a TraceSnapshot (snapshot.h), called after the aggregator's lock is released.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "collector/aggregate/snapshot.h"

namespace sentinel::collector {

// Every kept sample that started within the last `window_ns`.
nlohmann::json TraceJson(const TraceSnapshot& snap, int64_t window_ns, int64_t now_mono_ns);
// The same from the live state (callers that already hold the lock, tests).
inline nlohmann::json TraceJson(const State& state, int64_t window_ns, int64_t now_mono_ns) {
  return TraceJson(TakeTraceSnapshot(state, now_mono_ns - window_ns), window_ns, now_mono_ns);
}

}  // namespace sentinel::collector
