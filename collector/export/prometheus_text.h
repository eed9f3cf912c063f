// Prometheus text exposition (0.0.4) of the collector state, for /metrics. A pure function of a
// State snapshot, called under the aggregator's reader lock.
#pragma once

#include <string>

#include "collector/aggregate/metrics_snapshot.h"
#include "collector/export/metrics_select.h"

namespace sentinel::collector {

// The default series budget (MetricsOptions{}), or the given one (metrics_select.h).
std::string RenderPrometheus(const MetricsSnapshot& snap);
std::string RenderPrometheus(const MetricsSnapshot& snap, const MetricsOptions& options);

// A label value as the exposition format wants it: backslash, double quote and newline escaped.
std::string PrometheusLabelEscape(const std::string& v);

}  // namespace sentinel::collector
