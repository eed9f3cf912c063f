// Fixture: nic/ reaching up into the aggregator is refused.
#pragma once
#include "collector/aggregate/aggregator.h"
