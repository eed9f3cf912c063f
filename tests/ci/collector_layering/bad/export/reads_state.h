// Fixture: export reaching into the aggregator's state (not its snapshot) is refused.
#pragma once
#include "collector/aggregate/aggregator.h"
