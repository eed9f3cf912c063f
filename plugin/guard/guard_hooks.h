// The calls the plugin core makes into the transport/placement guard (plugin/guard). They run on
// slow paths only (communicator init and finalize), never on the event hot path, and never throw.
#pragma once

#include <cstdint>

#include "plugin/abi/nccl_profiler_abi.h"

namespace sentinel::guard {

struct ProfilerInitInfo {
  uint64_t comm_hash = 0;
  const char* comm_name = nullptr;  // may be null
  int n_nodes = 0;
  int nranks = 0;
  int rank = 0;
  int abi_version = 0;                 // 4, 5 or 6
  SentinelNcclLogger logfn = nullptr;  // may be null
};

// Called from the profiler init adapter of every ABI version, after the core set up its context.
// In profiler-only mode (no LD_PRELOAD) this is where the guard runs the checks it can make.
void OnProfilerInit(const ProfilerInitInfo& info) noexcept;

// Called from the profiler finalize adapter.
void OnProfilerFinalize(uint64_t comm_hash, int rank) noexcept;

}  // namespace sentinel::guard
