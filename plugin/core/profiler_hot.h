// Private to the plugin core's hot-path files (profiler_hot.cc: entry points, per-kind starts,
// stops and states; profiler_groups.cc: GroupApi slots and a group's CollApi mark;
// profiler_kernel_ch.cc: the KernelCh start; profiler_emit.cc: a record at the last reference):
// what they share. Their ordering arguments are profiler_hot.cc's SYNCHRONIZATION.
#pragma once

#include <cstdint>

#include "plugin/core/event_model.h"
#include "plugin/core/profiler_core.h"
#include "plugin/core/profiler_state.h"
#include "plugin/core/slot_pool.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin::profiler_internal {

// ---- the open group (thread_state.h, OpenGroup) -------------------------------------------------
// Its handle is the address of the thread's OpenGroup plus 2: slots are 64-byte aligned and
// KernelCh handles odd, so bit 1 alone marks it, and AsSlot rejects it wherever else it goes.
inline bool IsOpenGroupHandle(const void* handle) {
  return (reinterpret_cast<uintptr_t>(handle) & 3) == 2;
}
inline void* OpenGroupHandle(ThreadState* ts) { return reinterpret_cast<char*>(&ts->group) + 2; }

// The calling thread's open group that `handle` names, or null (counted as stale): another
// thread's, or one already stopped.
inline OpenGroup* OpenGroupOf(const void* handle, ThreadState* ts) {
  if (handle == OpenGroupHandle(ts) && ts->group.open) return &ts->group;
  ts->Add(kCtrStaleHandles);
  return nullptr;
}

// The context NCCL passed to a start, or null: a handle of ours that is gone is counted (our own
// dummy context, of a communicator the plugin is off for, is not).
inline Context* StartContext(void* context, ThreadState* ts) noexcept {
  Context* ctx = g->contexts.AsContext(context);
  if (ctx == nullptr && context != g_dummy_context) ts->Add(kCtrStaleHandles);
  return ctx;
}

// Inline: without -mpopcnt, __builtin_popcountll is a libgcc call.
inline uint32_t Popcount64(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ull);
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
  return static_cast<uint32_t>((x * 0x0101010101010101ull) >> 56);
}

// ---- groups (profiler_groups.cc) ---------------------------------------------------------------

// A GroupApi's slot (not timed: kTimedStarts).
Slot* StartGroupApiSlot(Context* ctx, bool graph_captured, ThreadState* ts) noexcept;

// CollApi, P2pApi: children of GroupApi. A P2pApi holds its GroupApi until it stops: its P2p
// reads the group's recovered function through it (RecoveredFunc). A CollApi only marks the group
// at its start (NoteCollApiInGroup), kept or not (CoreSkipAncestorStart), and nothing reads its
// group later, so it holds no reference: a TryRef at its start and an Unref at its stop were two
// locked instructions per collective. A group already finished (count 0) is not marked, as TryRef
// would have refused it.
void NoteCollApiInGroup(void* group_handle, ThreadState* ts) noexcept;

// The handle of every Group start we do not keep (ancestor_skip.h): never written, never a slot
// (outside the slot arena, so AsSlot rejects it wherever it comes back as a parent), even (not a
// KernelCh handle).
extern const char g_skipped_group[64] __attribute__((visibility("hidden")));

}  // namespace sentinel::plugin::profiler_internal
