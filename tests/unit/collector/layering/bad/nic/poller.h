// Fixture for collector_layering_finds_cycle: nic/ reaching up into the aggregator is refused.
#pragma once
#include "collector/aggregate/aggregator.h"
