// The events NCCL emits that the records do not need, answered at once: the ancestors NCCL starts
// for the events we asked for (docs/nccl-facts.md "4.5 The activation mask": GroupApi,
// CollApi/P2pApi and Group come whenever a descendant's bit is set, so asking for Coll | KernelCh
// alone still brings all three around every collective), and the two kinds no record reads (Group,
// KernelLaunch). One relaxed load of the mask at most (and, for a GroupApi, one thread-local
// flag): no slot, no clock read, nothing written but NCCL's out-parameter (and a skipped CollApi's
// mark on its group, below).
//
// - GroupApi (kept with its own bit, or with P2pApi's on a thread that has started a P2pApi, whose
//   groups the P2pApi recovery of AlltoAll, Gather and Scatter reads: ThreadState::p2p_thread;
//   one thread-local load), CollApi and P2pApi (kept with their own bit): NULL. So at the default
//   mask a thread of collectives alone gets NULL for both, and its first P2P group is not grouped
//   (plain Send/Recv pieces, never a wrong AlltoAll). A CollApi under a group we keep first marks
//   that group as holding a collective, which the recovery reads (func_recovery.h), as a kept
//   CollApi would: the calling thread's open group, no slot. For a NULL answer NCCL skips the
//   event's states and stop and passes NULL as its children's parent (profiler.cc of 2.28.9:
//   every later call on these handles checks them; docs/nccl-facts.md "3.2 The function table"). A
//   Coll or P2p without its API parent carries no API time and no graph-captured flag, as under a
//   v4 host (docs/nccl-facts.md "3.8 What older plugin ABIs see").
// - KernelLaunch (a leaf no record reads): NULL at every mask; NCCL then skips its stop.
// - Group (no record reads it either): the one shared handle below at every mask, never NULL,
//   because NCCL advances a graph-captured collective's seqNumber per replay only when the plan's
//   Group handle or the CollApi handle is non-null (2.28.9 profiler.cc, KernelCh case of
//   docs/nccl-facts.md "5.1 Per-event facts"); its stop returns at once (CoreStopEvent).
#pragma once

#include <cstdint>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"

#include "plugin/abi/nccl_profiler_abi.h"

namespace sentinel::plugin {

// The kinds CoreSkipAncestorStart may answer.
inline constexpr uint32_t kSkippableAncestors = kSentinelProfileGroupApi | kSentinelProfileCollApi |
                                                kSentinelProfileP2pApi | kSentinelProfileGroup;

// True when the start of `type` was answered (NULL or the shared Group handle in *handle): the
// caller returns. False: the event is ours, start it as usual. Called with the gate open.
// `parent`: the descriptor's parentObj (read for a CollApi only).
bool CoreSkipAncestorStart(uint32_t type, void* parent, void** handle) noexcept;

// For the ABI shims: checks the type first, so that other kinds pay one test and no call.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool SkipAncestorStart(uint64_t type, void* parent,
                                                           void** handle) noexcept {
  if (ABSL_PREDICT_TRUE(type > kSentinelProfileKernelLaunch || (type & kSkippableAncestors) == 0 ||
                        (type & (type - 1)) != 0)) {
    return false;
  }
  return CoreSkipAncestorStart(static_cast<uint32_t>(type), parent, handle);
}

}  // namespace sentinel::plugin
