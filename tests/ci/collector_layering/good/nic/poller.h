// Fixture: nic/ may include base/ and common/, and mention aggregate/ in a comment only
// ("collector/aggregate/aggregator.h" is not an include).
#pragma once
#include "collector/base/clock.h"
#include "common/host_name.h"
