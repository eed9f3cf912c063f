// What the aggregator accepts in a peer's wire fields beyond the rank range (rank_range.h): text
// in a fixed-size char field, and clock stamps.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace sentinel::collector {

// CLOCK_MONOTONIC stamps are >= 0 and far below 2^62; bounding them keeps every difference and
// sum made of them (skew, lateness, end times) free of overflow.
inline constexpr int64_t kMaxTimestampNs = int64_t{1} << 62;

// A fixed-size char field as a string: up to its first NUL, never past its size (a peer need not
// terminate it).
inline std::string SafeString(const char* data, size_t size) {
  return std::string(data, strnlen(data, size));
}

}  // namespace sentinel::collector
