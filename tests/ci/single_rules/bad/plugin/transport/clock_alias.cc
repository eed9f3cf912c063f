// Planted: two private clock aliases, a std::chrono one and a second name for MonoNowNs.
#include <chrono>
#include <cstdint>

#include "common/mono_clock.h"

using SinkClock = std::chrono::steady_clock;

int64_t SinkNowNs() { return sentinel::rules::MonoNowNs(); }
