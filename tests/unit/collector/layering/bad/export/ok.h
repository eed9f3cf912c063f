// Fixture: export may include aggregate, base, schemas and common.
#pragma once
#include "collector/aggregate/aggregator.h"
#include "collector/base/clock.h"
#include "common/expectation.h"
#include "schemas/wire/sentinel_wire.h"
