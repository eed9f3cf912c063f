// The collector's version, as /metrics (sentinel_build_info), /v1/healthz and the daemon's log show
// it.
#pragma once

namespace sentinel::collector {

inline constexpr const char* kSentinelVersion = "0.1.0";

}  // namespace sentinel::collector
