// Chrome/Perfetto trace (JSON object format) of the collector's kept samples, for /v1/trace. A
// pure function of a State snapshot, called under the aggregator's reader lock.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "collector/aggregate/aggregator.h"

namespace sentinel::collector {

// Every kept sample that started within the last `window_ns`.
nlohmann::json TraceJson(const State& state, int64_t window_ns, int64_t now_mono_ns);

}  // namespace sentinel::collector
