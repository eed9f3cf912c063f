// Fixture: export may include aggregate's snapshot header, base, schemas and common.
#pragma once
#include "collector/aggregate/snapshot.h"
#include "collector/base/clock.h"
#include "common/expectation.h"
