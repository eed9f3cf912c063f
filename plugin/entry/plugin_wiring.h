// Wiring of the plugin .so (plugin_wiring.cc): which sinks the drainer feeds, which tracer hooks it
// calls, and where the guard's verdict records go. Runs once when the .so loads.
#pragma once

#include <memory>
#include <vector>

#include "plugin/base/env_config.h"
#include "plugin/core/record_sink.h"

namespace sentinel::plugin {

// The production sinks: sentineld's stream (unless SENTINEL_SOCKET turns it off), CUPTI's step
// marker, and the JSONL dump when SENTINEL_DUMP is set.
std::vector<std::unique_ptr<RecordSink>> BuildPluginSinks(const EnvConfig& config);

// Installs the drainer wiring and the guard's control-record seam (idempotent).
void WirePlugin() noexcept;

}  // namespace sentinel::plugin
