// The collector's Clock may read common/mono_clock.h itself.
#include <cstdint>

#include "common/mono_clock.h"

int64_t ClockMonoNs() { return sentinel::rules::MonoNowNs(); }
