// Fixture: export may include aggregate's snapshot headers, base, schemas and common.
#pragma once
#include "collector/aggregate/api_snapshot.h"
#include "collector/aggregate/snapshot.h"
#include "collector/base/clock.h"
#include "common/expectation.h"
