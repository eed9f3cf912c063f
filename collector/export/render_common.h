// What the Prometheus text and API JSON renderings share: the version, the listing order and
// primary ranks (state_order.h), time formatting (real_time.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/state_order.h"
#include "collector/base/real_time.h"

namespace sentinel::collector {

inline constexpr const char* kSentinelVersion = "0.1.0";

}  // namespace sentinel::collector
