// The in-flight hang alert: the hang detector's verdict (hang_detector.h) on a communicator whose
// ranks send in-flight state, naming the culprit ranks and what each was doing.
#pragma once

#include <string>

#include "collector/aggregate/aggregator.h"

namespace sentinel::collector {

// The alert for verdict `v` on `comm`, raised from its waiting ranks' own state (the first
// waiting rank's client is its source).
Alert InFlightHangAlert(const CommState& comm, const HangVerdict& v, const std::string& host,
                        const Config& config);

}  // namespace sentinel::collector
