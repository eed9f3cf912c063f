// The plugin core's KernelCh start: the per-channel hot path (3 callbacks per channel at NCCL
// Inspector's mask), its stop and states in profiler_hot.cc. Ordering: profiler_hot.cc's
// SYNCHRONIZATION and KernelChBits below.
#include <atomic>
#include <cstdint>

#include "common/dcheck.h"
#include "plugin/base/clock.h"
#include "plugin/core/callback_meter.h"
#include "plugin/core/context_table.h"
#include "plugin/core/event_model.h"
#include "plugin/core/profiler_core.h"
#include "plugin/core/profiler_hot.h"
#include "plugin/core/profiler_state.h"
#include "plugin/core/slot_pool.h"
#include "plugin/core/slot_refs.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin {

using profiler_internal::AtomicMin;
using profiler_internal::g;
using profiler_internal::Popcount64;
using profiler_internal::ReleaseGrace;
using profiler_internal::ResetSlot;
using profiler_internal::StartContext;
using profiler_internal::Unref;

namespace {

// GPU clock calibration samples (a host clock read at a KernelCh start): every collective's first
// channel for the first kCalibWarmup collectives of a communicator, then one collective in
// kCalibEvery. The offset is a running minimum, which later samples rarely lower, and a clock read
// is the costliest step of a KernelCh start (~25 ns on a VM; A/B with
// sentinel_collective_benchmark).
constexpr uint64_t kCalibWarmup = 256;
constexpr uint64_t kCalibEvery = 8;  // a power of two

// ---- KernelCh: the per-channel hot path (3 callbacks per channel at Inspector's mask) ----------
// KernelChBits: a collective's kch_seen and kch_done have one writer, its communicator's proxy
// progress thread, which makes every KernelCh start and stop (docs/nccl-facts.md, Threads and
// concurrency): each is set with a relaxed load and store, not a fetch_or, which was a locked
// instruction per channel at each start and stop. Other threads only read them (the record's
// builder after the refcount's acq_rel drop, finalize's truncation). A host that started or
// stopped one collective's channels on two threads at once could lose a bit: the collective's
// KernelCh reference is then dropped never (the record is truncated at finalize) or by the wrong
// stop, and a channel's timers may be missed; nothing worse.
// Metered per collective (KernelChMeter), and usually without a slot of its own (KernelChHandle):
// one bit set in the parent at the start and one at the stop. The collective's expected channels
// share ONE reference on it (SetCompletionRefs), dropped by the stop that completes their set: a
// reference drop per channel was a CAS loop, the costliest step of the KernelCh stop (perf).

// The handle for a KernelCh of `parent` (a live Coll/P2p of `ctx`), or null.
void* StartKernelCh(Context* ctx, Slot* parent, uint32_t channel_id, uint64_t p_timer,
                    ThreadState* ts, KernelChMeter& meter) {
  // Skipped under the overhead budget: no handle, so NCCL's stop and states cost nothing.
  if ((parent->flags & kSentinelCollGpuSkipped) != 0) {
    meter.Count(1);
    return nullptr;
  }
  if (parent->kch_weight != 0) meter.Time(parent->kch_weight);
  // The first kch_expected distinct channels (below kMaxKchHandles) of a Coll/P2p that expects
  // KernelCh children (KernelCh in the mask) get slot-less handles under the collective's one
  // KernelCh reference; any other channel, or a channel started twice, gets a KernelCh slot that
  // holds a reference of its own.
  bool own_bit = false;  // this start set the channel's bit: it owns the channel's timers
  bool expected = false;
  bool first_channel = true;
  if (channel_id < kMaxKchHandles) {
    uint64_t bit = uint64_t{1} << channel_id;
    // One writer (KernelChBits): a load and a store. relaxed: only decides who owns the bit; the
    // refcount orders the rest.
    const uint64_t seen = parent->kch_seen.load(std::memory_order_relaxed);
    if ((seen & bit) == 0) parent->kch_seen.store(seen | bit, std::memory_order_relaxed);
    own_bit = (seen & bit) == 0;
    if (own_bit) {
      expected = seen == 0 ? parent->kch_expected != 0 : Popcount64(seen) < parent->kch_expected;
      first_channel = seen == 0;
    }
  }
  if (!expected && !TryRef(parent)) {
    meter.Count(1);
    ts->Add(kCtrOrphanChildren);
    return nullptr;
  }
  // Not counted at the collective's start: a KernelCh slot's state and stop count themselves.
  if (!expected) meter.Count(1);
  ReleaseGrace(parent, ts);  // a reference is held for us, so this cannot finish the parent
  void* handle = nullptr;
  if (expected) {
    handle = KernelChHandle(parent, channel_id);
  } else {
    Slot* s = g->slots.Claim(Kind::kKernelCh, ts);
    if (s == nullptr) {
      Unref(parent, ts);
      return nullptr;
    }
    ResetSlot(s, ctx, parent, 1, 0);
    handle = s;
  }
  // The collective's kernel runs (P2p ordinals are 0: not counted). The parent's fields are
  // stable while this child holds a reference.
  uint64_t ordinal = parent->ordinal;
  if (ordinal != 0) ctx->inflight.OnGpuStart(ordinal);
  if (p_timer != 0 && first_channel &&
      (ordinal <= kCalibWarmup || (ordinal & (kCalibEvery - 1)) == 0)) {
    ctx->calib.Observe(MonoNs(), p_timer);
  }
  const int64_t gpu_start = p_timer != 0 ? static_cast<int64_t>(p_timer) : kNoGpuStart;
  if (own_bit) {
    SENTINEL_DCHECK(channel_id < kMaxKchHandles);  // own_bit is set only below it
    // relaxed: read after the refcount's acq_rel drop (FoldKernelChTimes).
    KernelChTimes& t = g->slots.KernelChTimesOf(parent)[channel_id];
    t.start.store(gpu_start, std::memory_order_relaxed);
    t.end.store(0, std::memory_order_relaxed);
  } else if (p_timer != 0) {
    AtomicMin(parent->gpu_start_raw, gpu_start);  // a channel started twice: shared
  }
  return handle;
}

}  // namespace

void CoreStartKernelCh(void* context, void** handle, void* parent_handle, uint8_t channel_id,
                       uint64_t p_timer) noexcept {
  ThreadState* ts = ThreadStates::Current();
  *handle = nullptr;
  KernelChMeter meter(ts);
  // The usual case, checked from the parent: a live Coll/P2p of this (live) context. Cheaper than
  // validating the context pointer on its own, which the other cases below still do.
  Slot* parent = g->slots.AsSlot(parent_handle);
  if (parent != nullptr && (KindOf(parent) == Kind::kColl || KindOf(parent) == Kind::kP2p) &&
      parent->state.load(std::memory_order_acquire) == SlotState::kLive) {
    Context* ctx = parent->ctx.load(std::memory_order_relaxed);
    if (ctx == context && ContextTable::IsLive(ctx)) {
      *handle = StartKernelCh(ctx, parent, channel_id, p_timer, ts, meter);
      return;
    }
  }
  Context* ctx = StartContext(context, ts);
  if (ctx == nullptr) {
    meter.Count(1);
    return;
  }
  if (parent == nullptr || (KindOf(parent) != Kind::kColl && KindOf(parent) != Kind::kP2p) ||
      parent->state.load(std::memory_order_acquire) != SlotState::kLive) {
    meter.Count(1);
    ts->Add(kCtrOrphanChildren);
    return;
  }
  *handle = StartKernelCh(ctx, parent, channel_id, p_timer, ts, meter);
}
}  // namespace sentinel::plugin
