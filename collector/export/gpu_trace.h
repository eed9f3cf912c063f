// The CUPTI GPU activity of one rank process (aggregate/gpu_activity.h) as Perfetto/Chrome trace
// events, for GET /v1/trace (trace_json.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "collector/aggregate/snapshot.h"  // GpuActivity (gpu_activity.h)

namespace sentinel::collector {

// A "GPU compute %" counter track (compute and NCCL overlap % per measured window, a "GPU not
// measured" slice for the others) and an "NCCL kernels (CUPTI)" slice track with every attributed
// kernel, each since `since_ns`; the tracks are named only when they hold an event.
void AppendGpuTraceEvents(const GpuActivity& g, int64_t pid, int32_t rank, int64_t since_ns,
                          nlohmann::json* events);

}  // namespace sentinel::collector
