// Wall-clock time as the API and alerts print it.
#pragma once

#include <cstdint>
#include <string>

namespace sentinel::collector {

// RFC 3339 UTC with milliseconds.
std::string FormatRealTime(int64_t real_ns);

}  // namespace sentinel::collector
