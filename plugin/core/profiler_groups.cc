// The plugin core's groups: GroupApi slots, the marks a group's function recovery (func_recovery.h)
// reads (a CollApi noted in its group, kept or skipped), and the ancestors the records do not need
// (CoreSkipAncestorStart, ancestor_skip.h). Ordering: profiler_hot.cc's SYNCHRONIZATION; the API
// kinds' starts: profiler_hot.cc.
#include <atomic>
#include <cstdint>

#include "plugin/core/ancestor_skip.h"
#include "plugin/core/event_model.h"
#include "plugin/core/func_recovery.h"
#include "plugin/core/profiler_hot.h"
#include "plugin/core/profiler_state.h"
#include "plugin/core/slot_pool.h"
#include "plugin/core/slot_refs.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin::profiler_internal {

Slot* StartGroupApiSlot(Context* ctx, bool graph_captured, ThreadState* ts) noexcept {
  Slot* s = g->slots.Claim(Kind::kGroupApi, ts);
  if (s == nullptr) return nullptr;
  ResetSlot(s, ctx, nullptr, 1, 0);  // not timed (kTimedStarts)
  s->graph_captured.store(graph_captured ? 1 : 0, std::memory_order_relaxed);
  ResetGroupRecovery(s);
  return s;
}

void NoteCollApiInGroup(void* group_handle, ThreadState* ts) noexcept {
  Slot* grp = nullptr;
  if (IsOpenGroupHandle(group_handle)) {
    OpenGroup* og = OpenGroupOf(group_handle, ts);
    if (og == nullptr) return;
    if (og->slot == nullptr) {
      og->has_coll = true;  // the usual case: a collective's group, with no slot
      return;
    }
    grp = og->slot;
  } else {
    grp = g->slots.AsSlotOfKind(group_handle, Kind::kGroupApi);
  }
  if (grp != nullptr && (grp->refs.load(std::memory_order_relaxed) & kRefCountMask) != 0) {
    NoteCollApiPiece(grp);
  }
}

alignas(64) const char g_skipped_group[64] = {};

}  // namespace sentinel::plugin::profiler_internal

namespace sentinel::plugin {

using profiler_internal::g;
using profiler_internal::g_skipped_group;
using profiler_internal::NoteCollApiInGroup;

bool CoreSkipAncestorStart(uint32_t type, void* parent, void** handle) noexcept {
  if (type == kSentinelProfileGroup) {
    *handle = const_cast<char*>(g_skipped_group);
    return true;
  }
  if (type == kSentinelProfileKernelLaunch) {
    *handle = nullptr;
    return true;
  }
  // relaxed: NCCL snapshots the mask per operation anyway; an event that sees the old value is
  // handled under the old one, as everywhere on this path.
  const uint32_t mask = g->mask.load(std::memory_order_relaxed);
  if (type == kSentinelProfileGroupApi) {
    if ((mask & kSentinelProfileGroupApi) != 0) return false;
    // With P2pApi but not GroupApi in the mask (the default), kept on the threads that have
    // started a P2pApi (ThreadState::p2p_thread), whose groups the AlltoAll recovery reads, and on
    // the shared overflow state (it cannot tell its threads apart). A thread's first P2P group is
    // so not grouped: its pieces stay plain Send/Recv, never a wrong AlltoAll.
    const ThreadState* ts = t_thread_state;
    if ((mask & kSentinelProfileP2pApi) != 0 && ts != nullptr && (ts->shared || ts->p2p_thread)) {
      return false;
    }
    *handle = nullptr;
    return true;
  }
  if (type != kSentinelProfileCollApi && type != kSentinelProfileP2pApi) return false;
  if ((mask & type) != 0) return false;  // CollApi, P2pApi: kept with their own bit
  *handle = nullptr;
  // A CollApi we do not keep under a group we keep: the group's function recovery must still know
  // that it holds a collective (func_recovery.h). Its parent is null when the group is not kept.
  if (type == kSentinelProfileCollApi && parent != nullptr) {
    NoteCollApiInGroup(parent, ThreadStates::Current());
  }
  return true;
}

}  // namespace sentinel::plugin
