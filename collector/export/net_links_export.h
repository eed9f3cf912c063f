// The net plugin links' /metrics families (aggregate/net_links.h): bytes, completed requests,
// latency and errors of the send ends per (src_host, dst_host, dev), and the devices offered.
// Labels are bounded by the job's host pairs and NIC names, never by link ids, pids or sizes.
#pragma once

#include <string>

#include "collector/aggregate/metrics_snapshot.h"  // NetLinks (net_links.h)

namespace sentinel::collector {

// Appends the sentinel_net_* families (Prometheus text 0.0.4).
void AppendNetLinksPrometheus(const NetLinks& net, std::string* out);

}  // namespace sentinel::collector
