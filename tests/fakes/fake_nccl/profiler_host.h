// The fake NCCL's side of the profiler-plugin ABI: finding and loading the plugin exactly as NCCL
// 2.28.9 does (docs/nccl-facts.md "4.1 Finding the library" to "4.3 `finalize` and unload"), and
// the per-version adapters (docs/nccl-facts.md "3.8 What older plugin ABIs see") that turn our
// canonical v5/v6 descriptor into what the loaded plugin expects. Process-global and thread-safe.
#pragma once

#include <cstdint>

#include "plugin/abi/nccl_profiler_abi.h"
// The docs/nccl-facts.md "4.5 The activation mask" ancestor table (kAncestors*), shared with the
// benchmark's replay of one collective.
#include "tests/fakes/fake_nccl/nccl_call_sequence.h"

namespace sentinel::testing {

// Loads the plugin if needed (sticky failure, refcount) and calls its init for one communicator.
// Runs on the communicator's init thread. `*context` receives the plugin's context (may be null).
// Returns true if the plugin is loaded and this communicator holds a reference.
bool ProfilerInitComm(uint64_t comm_hash, const char* comm_name, int n_nodes, int nranks, int rank,
                      void** context);
// finalize(context) if non-null, then drops the reference (dlclose at zero,
// docs/nccl-facts.md "4.3 `finalize` and unload").
void ProfilerFinalizeComm(void* context);

// The process-global activation mask (docs/nccl-facts.md "4.5 The activation mask"), read with a
// relaxed load at every enqueue.
int ProfilerMask();
// Event calls; no-ops when no plugin is loaded. `d` is the canonical (v5/v6) descriptor.
void ProfilerStart(void* context, void** handle, SentinelEventDescrV6* d);
void ProfilerStop(void* handle);
void ProfilerRecord(void* handle, int state, SentinelEventStateArgs* args);
// True when the loaded plugin is a v4 plugin (no API events; Coll parent = legacy Group).
int ProfilerLoadedVersion();
// The logger NCCL hands to plugins (profiler and net): our DebugLog with NCCL's signature.
SentinelNcclLogger PluginLogger();

}  // namespace sentinel::testing
