// The plugin core's API starts (GroupApi, CollApi, P2pApi) and the thread's open group: what a
// group's function recovery (func_recovery.h) needs, and nothing the records do not read.
// Ordering: profiler_hot.cc's SYNCHRONIZATION.
#include <atomic>
#include <cstdint>

#include "plugin/core/api_context.h"
#include "plugin/core/event_model.h"
#include "plugin/core/func_recovery.h"
#include "plugin/core/names.h"
#include "plugin/core/profiler_hot.h"
#include "plugin/core/profiler_state.h"
#include "plugin/core/slot_pool.h"
#include "plugin/core/slot_refs.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin::profiler_internal {

// The API kinds (GroupApi, CollApi, P2pApi) write only what is read of them: the slot header,
// func/datatype/graph_captured/api_override and GroupApi's recovery fields (func_recovery.h). Their
// record fields (ResetRecordFields) are never read: pools are per kind, and only Coll/P2p/CeColl
// slots are built into records, truncated by finalize or swept. Not writing them keeps a start on
// the slot's first line (GroupApi: and its recovery line) instead of four lines that a FIFO reuse
// of a large pool finds cold.

Slot* StartGroupApiSlot(Context* ctx, bool graph_captured, ThreadState* ts) noexcept {
  Slot* s = g->slots.Claim(Kind::kGroupApi, ts);
  if (s == nullptr) return nullptr;
  ResetSlot(s, ctx, nullptr, 1, 0);  // not timed (kTimedStarts)
  s->graph_captured.store(graph_captured ? 1 : 0, std::memory_order_relaxed);
  ResetGroupRecovery(s);
  return s;
}

namespace {

// The group's slot, made at its first P2pApi piece from what the open group noted so far.
Slot* OpenGroupSlot(OpenGroup* og, ThreadState* ts) {
  if (og->slot == nullptr) {
    og->slot = StartGroupApiSlot(og->ctx, og->graph_captured, ts);
    if (og->slot != nullptr && og->has_coll) NoteCollApiPiece(og->slot);
  }
  return og->slot;
}

}  // namespace

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

Slot* StartApiChild(Kind k, Context* ctx, const ApiDesc& d, ThreadState* ts, int64_t now) noexcept {
  Slot* grp = nullptr;
  // A P2pApi: this thread's next GroupApis are kept (CoreSkipAncestorStart).
  if (k == Kind::kP2pApi && !ts->shared) ts->p2p_thread = true;
  if (k == Kind::kCollApi) {
    NoteCollApiInGroup(d.parent, ts);
  } else if (IsOpenGroupHandle(d.parent)) {
    OpenGroup* og = OpenGroupOf(d.parent, ts);
    if (og != nullptr) grp = OpenGroupSlot(og, ts);
  } else {
    grp = g->slots.AsSlotOfKind(d.parent, Kind::kGroupApi);
  }
  if (grp != nullptr && !TryRef(grp)) grp = nullptr;
  Slot* s = g->slots.Claim(k, ts);
  if (s == nullptr) {
    if (grp != nullptr) Unref(grp, ts);
    return nullptr;
  }
  ResetSlot(s, ctx, grp, 1, now);
  s->func.store(FuncFromString(d.func), std::memory_order_relaxed);
  s->datatype.store(DatatypeFromString(d.datatype), std::memory_order_relaxed);
  s->graph_captured.store(d.graph_captured ? 1 : 0, std::memory_order_relaxed);
  s->api_override.store(kSentinelFuncUnknown, std::memory_order_relaxed);
  if (grp != nullptr) NoteP2pApiPiece(grp, s, ctx, d.count, CurrentApiForThread());
  return s;
}

}  // namespace sentinel::plugin::profiler_internal
