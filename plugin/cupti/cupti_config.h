// The CUPTI tracer's settings (SENTINEL_CUPTI* and SENTINEL_STEP_NVTX), read from one reading of
// the environment (common/sentinel_env.h). The tracer (cupti_tracer.h) takes a CuptiConfig; the
// process runtime (cupti_runtime.h) parses it once at the first communicator init.
#pragma once

#include <cstdint>
#include <string>

#include "common/sentinel_env.h"
#include "plugin/base/status.h"

namespace sentinel::plugin::cupti {

enum class CuptiMode { kOff, kAuto, kOn };

struct CuptiConfig {
  CuptiMode mode = CuptiMode::kAuto;       // SENTINEL_CUPTI=off|on|auto
  std::string path;                        // SENTINEL_CUPTI_PATH
  uint32_t window_ms = 1000;               // SENTINEL_CUPTI_WINDOW_MS
  uint32_t flush_ms = 100;                 // SENTINEL_CUPTI_FLUSH_MS
  uint32_t starve_ms = 3000;               // SENTINEL_CUPTI_STARVE_MS
  uint32_t rearm_s = 30;                   // SENTINEL_CUPTI_REARM_S (0 = never re-arm)
  uint32_t buffer_kib = 1024;              // SENTINEL_CUPTI_BUFFER_KIB
  uint32_t buffers = 8;                    // SENTINEL_CUPTI_BUFFERS
  uint32_t attributions_per_window = 256;  // SENTINEL_CUPTI_ATTRIBUTIONS
  std::string comm_kernels;                // SENTINEL_CUPTI_COMM_KERNELS (extra name substrings)
  // SENTINEL_STEP_NVTX: steps start where an NVTX range (or mark) of this name starts, read from
  // CUPTI MARKER activity records in our own buffers (no subscriber). Needs NVTX injected into
  // CUPTI, i.e. NVTX_INJECTION64_PATH naming a libcupti (nvtx_injection); without it, steps come
  // from the first collective as usual.
  std::string step_nvtx;
  std::string nvtx_injection;  // NVTX_INJECTION64_PATH as the job set it (read, never written)
};

// The SENTINEL_CUPTI* settings from one reading of the environment (common/sentinel_env.h;
// tests pass their own). Every field of *out is set: a bad value holds its default. Ok, or
// kInvalidArgument whose message is the problem lines (one per bad setting).
[[nodiscard]] Status ParseCuptiConfig(const rules::SentinelEnv& env, CuptiConfig* out);
// The same from the process's one reading.
[[nodiscard]] Status ParseCuptiConfig(CuptiConfig* out);

}  // namespace sentinel::plugin::cupti
