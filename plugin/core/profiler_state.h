// Private to the profiler files that implement profiler_core.h (profiler_hot.cc and its parts,
// profiler_hot.h: event callbacks and emission; profiler_lifecycle.cc: init/teardown;
// profiler_heartbeat.cc: the drainer's calls):
// the process-wide state they share, the emission functions and the hot path's inline helpers.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "absl/base/attributes.h"

#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/base/env_config.h"
#include "plugin/base/tick_clock.h"
#include "plugin/core/context_table.h"
#include "plugin/core/event_model.h"
#include "plugin/core/overhead_budget.h"
#include "plugin/core/slot_pool.h"
#include "plugin/core/slot_refs.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin::profiler_internal {

// The proxy events: the events a stopped Coll/P2p may still wait for (SetCompletionRefs), and
// what the overhead budget's first step takes out of the mask (JudgeBudget).
inline constexpr uint32_t kProxyFamily =
    kSentinelProfileProxyOp | kSentinelProfileProxyStep | kSentinelProfileNetPlugin;

// Process-wide state, created at the first init and never destroyed (leaked on purpose: NCCL
// may call us from threads that outlive every communicator, and dlclose never unmaps us).
struct Globals {
  EnvConfig config;
  pid_t pid = 0;
  SlotArena slots;
  ContextTable contexts;
  std::atomic<int*> mask_ptr{nullptr};
  std::atomic<uint32_t> mask{0};
  // The overhead budget's step (a BudgetLevel), read on the hot path next to `mask`.
  std::atomic<uint8_t> budget_level{0};
  std::atomic<uint64_t> turn_offs{0};
  std::atomic<uint64_t> sink_drops{0};
  int64_t grace_ns = 0;
  // The interval clock of the ProxyStep times (tick_clock.h): started at setup, its rate refined at
  // each heartbeat (SnapshotCounters).
  TickClock ticks;
  bool ready = false;    // pools and threads set up (false when disabled)
  std::mutex budget_mu;  // the budget's judgement (heartbeat snapshots), off the hot path
  OverheadBudget budget{0.0};
};

// Written once inside std::call_once (profiler_lifecycle.cc); read afterwards only (call_once
// orders it). Hidden on the declaration too, so the other files load it PC-relative, as they did
// when it was file-local, instead of through the GOT.
extern Globals* g __attribute__((visibility("hidden")));
// The context init hands out when the plugin is off or out of contexts; its events are ignored.
extern char g_dummy_context[64] __attribute__((visibility("hidden")));

// ---- record emission (profiler_emit.cc) --------------------------------------------------------
// noexcept: the hot path calls them from another file, and a callee that might throw made its
// callers keep their meters in memory for the unwinder.

// Once per collective: builds the record directly in the thread's ring slot (also finalize's
// truncation, profiler_lifecycle.cc).
void BuildAndPush(Slot* s, bool truncated, ThreadState* ts) noexcept;
// The last reference of `s` went: emits its record when `emit`, frees the slot, and drops the
// reference it held on its parent.
void OnLastRef(Slot* s, ThreadState* ts, bool emit) noexcept;

// ---- inline slot helpers of the hot path (the grace sweep shares the reference drops) ----------
// Header inline functions; every call was inlined when they were file-local, and the hot path's
// machine code is the same with them here (compared with objdump) but for Unref, see there.

// Resets the fields every kind uses. The handle is not yet visible to anyone else.
inline void ResetSlot(Slot* s, Context* ctx, Slot* parent, uint32_t refs, int64_t now) {
  // relaxed throughout: these become visible to other threads through NCCL's hand-off of the
  // handle (or, for parents, through the acq_rel refcount).
  s->refs.store(refs, std::memory_order_relaxed);  // also clears kStoppedBit
  s->ctx.store(ctx, std::memory_order_relaxed);
  s->parent.store(parent, std::memory_order_relaxed);
  s->start_ns.store(now, std::memory_order_relaxed);
}

// What a Coll/P2p slot accumulates until its record completes: stop and GPU times, proxy sums,
// KernelCh starts. Relaxed stores: the slot is not yet published to any other thread.
inline void ResetCompletionState(Slot* s) {
  s->kch_seen.store(0, std::memory_order_relaxed);
  s->kch_done.store(0, std::memory_order_relaxed);
  s->stop_ns.store(0, std::memory_order_relaxed);
  s->gpu_start_raw.store(kNoGpuStart, std::memory_order_relaxed);
  s->gpu_end_raw.store(0, std::memory_order_relaxed);
  s->send_wait_ticks.store(0, std::memory_order_relaxed);
  s->send_xfer_ticks.store(0, std::memory_order_relaxed);
  s->recv_wait_ticks.store(0, std::memory_order_relaxed);
  s->recv_xfer_ticks.store(0, std::memory_order_relaxed);
  s->send_bytes.store(0, std::memory_order_relaxed);
  s->recv_bytes.store(0, std::memory_order_relaxed);
  s->proxy_steps.store(0, std::memory_order_relaxed);
  s->proxy_open.store(0, std::memory_order_relaxed);
}

inline void ResetRecordFields(Slot* s) {
  s->seq = 0;
  s->bytes = 0;
  s->ordinal = 0;
  s->api_ns = 0;
  s->peer = -1;
  s->root = -1;
  s->func.store(kSentinelFuncUnknown, std::memory_order_relaxed);
  s->datatype.store(kSentinelDatatypeUnknown, std::memory_order_relaxed);
  s->algo = kSentinelAlgoUnknown;
  s->proto = kSentinelProtoUnknown;
  s->nchannels = 0;
  s->graph_captured.store(0, std::memory_order_relaxed);
  s->flags = 0;
  s->kch_expected = 0;
  s->kch_weight = 0;
  s->grace.store(0, std::memory_order_relaxed);
  ResetCompletionState(s);
}

// Finishes what a dropped reference decided: the last one frees the slot and emits its record
// unless finalize already emitted it (truncated).
inline void AfterDrop(RefDrop drop, Slot* s, ThreadState* ts) {
  switch (drop) {
    case RefDrop::kStale:
      ts->Add(kCtrStaleHandles);
      break;
    case RefDrop::kHeld:
      break;
    case RefDrop::kLast:
      OnLastRef(s, ts, true);
      break;
    case RefDrop::kLastEmitted:
      OnLastRef(s, ts, false);
      break;
  }
}

// Always inlined: as a header inline function GCC left one of its calls in CoreStartEvent out of
// line, which it inlined when Unref was file-local.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void Unref(Slot* s, ThreadState* ts) {
  AfterDrop(DropRef(s), s, ts);
}

// Drops the "ProxyOp children may still come" reference once (a child arrived, or the grace
// period ran out).
inline void ReleaseGrace(Slot* s, ThreadState* ts) {
  if (s->grace.load(std::memory_order_relaxed) != 0 &&
      s->grace.exchange(0, std::memory_order_acq_rel) == 1) {
    Unref(s, ts);
  }
}

inline void AtomicMin(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load(std::memory_order_relaxed);
  // relaxed: a self-contained value, read after the acq_rel refcount release.
  while (v < cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}
inline void AtomicMax(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

}  // namespace sentinel::plugin::profiler_internal
