// Chaining a second profiler plugin (SENTINEL_CHAIN_PROFILER=<name or path>, plugin/README.md).
//
// NCCL loads one profiler plugin per process (docs/nccl-facts.md "4.1 Finding the library" step 8),
// so we load the second one ourselves and fan every callback out to it:
// - init: our core runs with a private mask int, the chained plugin with another; NCCL's mask gets
//   the union. Each event goes to a side only if NCCL would have emitted it under that side's mask
//   alone (the ancestor table of docs/nccl-facts.md "4.5 The activation mask"), so each side sees
//   exactly its own events.
// - handles: when both sides hold a handle for an event, NCCL gets a pair slot from a fixed,
//   never-freed arena; parents (parentObj, parentGroup) are translated per side. When only our core
//   holds one, NCCL gets the core's handle unchanged (no slot).
// - failures of the chained plugin (error results, an exception, a failed init, a missing symbol)
//   are counted and logged once; they never reach NCCL or our core, which always get ncclSuccess.
//
// Without SENTINEL_CHAIN_PROFILER the only cost on the hot path is ChainOn(): one relaxed load.
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/base/optimization.h"

#include "plugin/abi/nccl_profiler_abi.h"

namespace sentinel::plugin {

extern std::atomic<bool> g_chain_on;
// relaxed: set once at the first init, before NCCL holds any handle of ours.
inline bool ChainOn() noexcept { return g_chain_on.load(std::memory_order_relaxed); }

// What one version's init needs to run either side.
struct ChainInitArgs {
  int version = 0;  // the ABI NCCL called us with: 4, 5 or 6
  uint64_t comm_hash = 0;
  const char* comm_name = nullptr;
  int n_nodes = 0;
  int nranks = 0;
  int rank = 0;
  SentinelNcclLogger logfn = nullptr;
};

// Our own entry points, without the chain check (plugin/entry/nccl_profiler_v*.cc).
using OwnInitFn = SentinelNcclResult (*)(void** context, int* mask, const ChainInitArgs& a);
using OwnStartV4Fn = SentinelNcclResult (*)(void*, void**, SentinelEventDescrV4*);
using OwnStartV6Fn = SentinelNcclResult (*)(void*, void**, SentinelEventDescrV6*);

// Loads the chained plugin on the first call (slow path, thread-safe); true when the chain is on.
// A second call with another version never changes the decision.
bool ChainRequested(int version) noexcept;

// The chain's callbacks: no exception leaves them, and they always return ncclSuccess.
SentinelNcclResult ChainInit(void** context, int* nccl_mask, const ChainInitArgs& a,
                             OwnInitFn own) noexcept;
SentinelNcclResult ChainStartV4(void* context, void** handle, SentinelEventDescrV4* e,
                                OwnStartV4Fn own) noexcept;
SentinelNcclResult ChainStartV6(void* context, void** handle, SentinelEventDescrV6* e,
                                OwnStartV6Fn own) noexcept;
SentinelNcclResult ChainStop(void* handle) noexcept;
SentinelNcclResult ChainRecord(void* handle, SentinelNcclEventState state,
                               SentinelEventStateArgs* args) noexcept;
SentinelNcclResult ChainFinalize(void* context) noexcept;

// Would NCCL emit an event of `type` under `mask` (docs/nccl-facts.md "4.5 The activation mask"
// ancestor table)? `version` 6 adds the CE bits to GroupApi's row.
bool NcclEmits(uint32_t mask, uint32_t type, int version) noexcept;

// Counters for tests and the log (cumulative).
struct ChainCounters {
  uint64_t their_errors = 0;     // non-success results and exceptions of the chained plugin
  uint64_t slots_exhausted = 0;  // events the chained plugin missed: no free pair slot
  uint64_t contexts_exhausted = 0;
};
ChainCounters ChainCountersSnapshot() noexcept;

}  // namespace sentinel::plugin
