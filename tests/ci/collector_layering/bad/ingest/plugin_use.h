// Fixture: collector/ including plugin/ is refused, and so is a peer layer (ingest -> nic).
#pragma once
#include "collector/nic/nic_counters.h"
#include "plugin/guard/expectation.h"
