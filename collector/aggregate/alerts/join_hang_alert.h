// The join-based hang alert: a collective some local ranks reached and others did not, past the
// hang timeout (HangSuspect, from the pending joins). The fallback for communicators whose
// plugins send no in-flight state (those get inflight_hang_alert.h instead).
#pragma once

#include <cstdint>
#include <string>

#include "collector/aggregate/aggregator.h"

namespace sentinel::collector {

// The alert for the communicator's longest-waiting suspect `h`. `comm` is the communicator when
// still known (its first member's client is the alert's source), else nullptr.
Alert JoinHangAlert(const HangSuspect& h, const CommState* comm, const std::string& host,
                    const Config& config, int64_t now_real_ns);

}  // namespace sentinel::collector
