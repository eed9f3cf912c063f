// What the API JSON renderings share: the version (version.h), the listing order and
// primary ranks (state_order.h), time formatting (real_time.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/state_order.h"
#include "collector/base/real_time.h"
#include "collector/export/version.h"
