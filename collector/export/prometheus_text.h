// Prometheus text exposition (0.0.4) of the collector state, for /metrics. A pure function of a
// MetricsSnapshot, rendered after the aggregator's lock is released; every family is written
// through PromFamily (prometheus_family.h).
#pragma once

#include <string>
#include <vector>

#include "collector/aggregate/exclusion.h"
#include "collector/aggregate/metrics_snapshot.h"
#include "collector/export/metrics_select.h"
#include "collector/export/prometheus_family.h"

namespace sentinel::collector {

// The default series budget (MetricsOptions{}), or the given one (metrics_select.h).
std::string RenderPrometheus(const MetricsSnapshot& snap);
std::string RenderPrometheus(const MetricsSnapshot& snap, const MetricsOptions& options);

// sentinel_exclude_host{host,reason} 1 per listed host and reason (exclusion.h), with HELP/TYPE.
std::string ExcludePrometheus(const std::vector<ExcludedHost>& hosts);

}  // namespace sentinel::collector
