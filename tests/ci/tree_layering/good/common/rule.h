// common/ includes only itself and the contracts.
#pragma once
#include "common/other.h"
#include "schemas/wire/sentinel_wire.h"
