// See real_time.h.
#include "collector/base/real_time.h"

#include "absl/time/time.h"

namespace sentinel::collector {

std::string FormatRealTime(int64_t real_ns) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixNanos(real_ns),
                          absl::UTCTimeZone());
}

}  // namespace sentinel::collector
