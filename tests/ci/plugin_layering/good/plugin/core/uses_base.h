// Fixture: the core includes base/ and abi/ below it, never transport/ above it (a mention of
// "plugin/transport/collector_sink.h" in a comment or a string is not an include).
#pragma once
#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/base/clock.h"
