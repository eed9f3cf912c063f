// Chrome/Perfetto trace (JSON object format) of the collector's kept samples, for /v1/trace. A
// pure function of a TraceSnapshot (snapshot.h), called after the aggregator's lock is released.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "collector/aggregate/snapshot.h"

namespace sentinel::collector {

// Every kept sample that started within the last `window_ns` (`snap` taken since then).
nlohmann::json TraceJson(const TraceSnapshot& snap, int64_t window_ns, int64_t now_mono_ns);

}  // namespace sentinel::collector
