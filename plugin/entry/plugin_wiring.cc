// The plugin's wiring: the one unit that knows every part (core, transport, CUPTI, guard) and
// connects them when the .so loads. The core's drainer gets its sinks and tracer hooks from here
// (plugin/core/drainer.h, DrainerWiring) and the guard sends its verdict records through the seam
// set here (plugin/guard/guard_runtime.h), so neither core nor guard depends on what lies above.
#include "plugin/entry/plugin_wiring.h"

#include <memory>
#include <utility>
#include <vector>

#include "common/sentinel_env.h"
#include "plugin/base/invariant.h"
#include "plugin/base/log.h"
#include "plugin/core/drainer.h"
#include "plugin/core/profiler_core.h"
#include "plugin/cupti/cupti_runtime.h"
#include "plugin/cupti/step_marker.h"
#include "plugin/guard/guard_runtime.h"
#include "plugin/transport/collector_sink.h"
#include "plugin/transport/jsonl_sink.h"

namespace sentinel::plugin {

std::vector<std::unique_ptr<RecordSink>> BuildPluginSinks(const EnvConfig& config) {
  std::vector<std::unique_ptr<RecordSink>> sinks;
  // Sinks: add new ones here.
  CollectorSinkOptions collector_options;  // sentineld at SENTINEL_SOCKET or the per-user default
  collector_options.log_info = [](const char* line) { Log(LogLevel::kInfo, "%s", line); };
  auto collector = std::make_unique<CollectorSink>(collector_options);
  if (collector->state() != CollectorSink::State::kOff) sinks.push_back(std::move(collector));
  // Step boundaries for the CUPTI tracer (a no-op sink when CUPTI is off).
  sinks.push_back(std::make_unique<cupti::StepMarkerSink>(&cupti::CuptiStepBoundaries));
  if (!config.dump_path.empty()) {
    auto jsonl = std::make_unique<JsonlSink>(config.dump_path);
    if (jsonl->ok()) sinks.push_back(std::move(jsonl));
  }
  return sinks;
}

void WirePlugin() noexcept {
  DrainerWiring wiring;
  wiring.build_sinks = &BuildPluginSinks;
  wiring.on_comm_init = &cupti::CuptiOnCommInit;  // once per process; CUPTI runs its own thread
  wiring.on_last_comm_end = &cupti::CuptiOnLastCommEnd;
  SetDrainerWiring(wiring);
  guard::SetControlRecordFn(&EnqueueControlRecord);  // same signature: the core's queue
  // A broken invariant that must act in every build turns the plugin off, never the host
  // (invariant.h).
  SetInvariantOffHandler(&TurnOff);
}

namespace {
// Before NCCL (or the LD_PRELOAD interposer) can call us: only function pointers are stored.
__attribute__((constructor)) void WirePluginAtLoad() { WirePlugin(); }
}  // namespace

}  // namespace sentinel::plugin

// The other sentinel library (the net .so) tells its SENTINEL_* problems through this one when
// both are loaded, so each is told once per process (common/sentinel_env.h).
extern "C" __attribute__((visibility("default"))) void sentinelTellEnvProblems(const char* lines,
                                                                               size_t len) {
  sentinel::rules::TellEnvProblemsHere(lines, len);
}
