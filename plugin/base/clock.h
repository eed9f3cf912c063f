// The one clock of the plugin: CLOCK_MONOTONIC nanoseconds, read as common/mono_clock.h reads it
// for every part of sentinel.
#pragma once

#include <cstdint>

#include "common/mono_clock.h"

namespace sentinel::plugin {

inline int64_t MonoNs() noexcept { return rules::MonoNowNs(); }

}  // namespace sentinel::plugin
