// The plugin core's record emission: when an event's last reference goes (OnLastRef), its slot is
// freed, its parent's reference dropped, and a Coll/P2p/CeColl record built straight into the
// thread's ring (BuildAndPush). Ordering: profiler_hot.cc's SYNCHRONIZATION.
#include <atomic>
#include <cstdint>

#include "common/dcheck.h"
#include "plugin/core/event_model.h"
#include "plugin/core/overhead_budget.h"
#include "plugin/core/profiler_hot.h"
#include "plugin/core/profiler_state.h"
#include "plugin/core/record_builder.h"
#include "plugin/core/slot_pool.h"
#include "plugin/core/slot_refs.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin::profiler_internal {
namespace {

// Folds the per-channel GPU timers (KernelChTimes) of Coll/P2p `s` into its gpu_start_raw /
// gpu_end_raw. Atomic min/max: a truncating finalize may run while a duplicate channel's
// KernelCh slot still updates them.
void FoldKernelChTimes(Slot* s) {
  uint64_t channels = s->kch_seen.load(std::memory_order_relaxed);
  if (channels == 0) return;
  const KernelChTimes* times = g->slots.KernelChTimesOf(s);
  int64_t start = kNoGpuStart;
  int64_t end = 0;
  for (; channels != 0; channels &= channels - 1) {
    const KernelChTimes& t = times[__builtin_ctzll(channels)];
    const int64_t channel_start = t.start.load(std::memory_order_relaxed);
    const int64_t channel_end = t.end.load(std::memory_order_relaxed);
    start = channel_start < start ? channel_start : start;
    end = channel_end > end ? channel_end : end;
  }
  if (start != kNoGpuStart) AtomicMin(s->gpu_start_raw, start);
  if (end != 0) AtomicMax(s->gpu_end_raw, end);
}

}  // namespace

// Once per collective: builds the record directly in the thread's ring slot.
void BuildAndPush(Slot* s, bool truncated, ThreadState* ts) noexcept {
  // Only the record kinds reach here: OnLastRef's emit and finalize's truncation choose them.
  SENTINEL_DCHECK(KindOf(s) == Kind::kColl || KindOf(s) == Kind::kP2p ||
                  KindOf(s) == Kind::kCeColl);
  if (truncated) ts->Add(kCtrRecordsTruncated);
  if (ts->shared) {
    ts->Add(kCtrEventsDroppedThreads);
    return;
  }
  SentinelWireCollRecord* slot = ts->ring.TryClaim();
  if (slot == nullptr) {
    ts->Add(kCtrRecordsDroppedRing);
    return;
  }
  if (KindOf(s) != Kind::kCeColl) FoldKernelChTimes(s);
  BuildCollRecord(*s, truncated, static_cast<uint32_t>(g->pid), g->ticks, slot);
  if (s->ordinal != 0 && g->budget_level.load(std::memory_order_relaxed) >=
                             static_cast<uint8_t>(BudgetLevel::kRecordsSampled)) {
    // Over budget: 1 Coll record in kBudgetSampleEvery is queued (in bursts), marked as standing
    // for the others (the slot was filled; not committing it discards it).
    if (!InBudgetBurst(s->ordinal)) return;
    slot->flags |= kSentinelCollSampled;
  }
  ts->ring.Commit();
  ts->Add(kCtrRecordsCompleted);
}

// `emit`: kDoneBit was clear before our CAS set it, so the record is ours to emit (exactly one of
// the last reference and finalize's truncation sets it).
void OnLastRef(Slot* s, ThreadState* ts, bool emit) noexcept {
  // Exactly one caller frees a slot: the one whose drop took its count to 0, while it was live.
  SENTINEL_DCHECK((s->refs.load(std::memory_order_relaxed) & kRefCountMask) == 0);
  SENTINEL_DCHECK(s->state.load(std::memory_order_relaxed) == SlotState::kLive);
  Kind k = KindOf(s);
  if (emit && (k == Kind::kColl || k == Kind::kP2p || k == Kind::kCeColl)) {
    BuildAndPush(s, false, ts);
    // Counted complete even if the ring dropped the record: the collective did finish.
    Context* ctx = s->ctx.load(std::memory_order_relaxed);
    if (s->ordinal != 0 && ctx != nullptr) ctx->inflight.OnComplete(s->ordinal);
  }
  Slot* parent = s->parent.load(std::memory_order_relaxed);
  // release: everything we read or wrote in this slot happens before its next claimer.
  s->state.store(SlotState::kFree, std::memory_order_release);
  // Only Ref-holding kinds keep a parent reference (see CoreStartEvent).
  if (parent != nullptr && k != Kind::kColl && k != Kind::kP2p) {
    if (k == Kind::kProxyStep) {
      AfterDrop(DropRefOneThread(parent), parent, ts);  // a ProxyOp: one thread (slot_refs.h)
    } else if (k == Kind::kProxyOp) {
      // The last open ProxyOp of its collective drops their shared reference (StartProxyOp).
      // This ProxyOp was counted open at its start (StartProxyOp), on this same thread.
      const uint32_t was_open = parent->proxy_open.load(std::memory_order_relaxed);
      SENTINEL_DCHECK(was_open != 0);
      const uint32_t open = was_open - 1;
      parent->proxy_open.store(open, std::memory_order_relaxed);
      if (open == 0) Unref(parent, ts);
    } else {
      Unref(parent, ts);
    }
  }
}

}  // namespace sentinel::plugin::profiler_internal
