// The hot path of the plugin core: its entry points, the per-kind starts, the stops and the
// state records. The groups (GroupApi slots and marks, the skipped ancestors: profiler_groups.cc),
// the KernelCh start (profiler_kernel_ch.cc) and the emission of a record when its event's last
// reference goes (profiler_emit.cc) are its other parts, and this SYNCHRONIZATION block is theirs
// too. See event_model.h for the lifetime rules and plugin/README.md for the completion rule.
//
// SYNCHRONIZATION
// - Callers: NCCL's application, launcher, CUDA host-function and proxy progress threads call the
//   four entry points below at once, also for one context
//   (docs/nccl-facts.md "5.4 Threads and concurrency"). An event's start, states and stop may come
//   from different threads: NCCL's hand-off of the handle orders them and publishes what a start
//   wrote with relaxed or plain stores (ResetSlot). No lock here.
// - Globals (profiler_state.h) are set up under std::call_once before the gate opens and only read
//   here, but for `mask` and `budget_level`, lowered by the drainer's budget judgement: relaxed, an
//   event that still sees the old value is handled at the old step.
// - A thread writes only its own ThreadState (ring and counters, single writer), or the shared
//   overflow state (fetch_add counters, records dropped).
// - Pointers from NCCL are validated (range, alignment, tag) before anything else is read. Slots
//   are claimed from a chunk of the pool the calling thread's state owns (slot_pool.h, "Claim
//   chunks"): an acquire load of kFree, which pairs with OnLastRef's release store of kFree on any
//   thread, and a store of kLive; stops and states also need an acquire load of kLive. Children
//   that hold their parent take it by TryRef (a Coll/P2p only reads its API parent, validated:
//   event_model.h).
// - `refs` (slot_refs.h): one acq_rel CAS per transition. Children add to their parent with
//   relaxed RMWs (GPU min/max, KernelChTimes), or with relaxed loads and stores where those fields
//   have one writing thread (the proxy sums: ProxySumAdd), before dropping their reference, so the
//   thread that drops the last one (any caller above, or the drainer's SweepGrace) sees them all
//   and alone frees the slot and emits the record; kDoneBit decides between it and finalize's
//   truncation (CoreFinalize). `grace`: a relaxed check, then an acq_rel exchange, so exactly one
//   of the first child start and the drainer's sweep drops that reference.
// - Slot-less KernelCh: `kch_seen` (set by a relaxed load and store: one writer thread,
//   KernelChBits) picks the start that owns a channel's timers; `kch_done` (likewise) picks the
//   first stop, and the stop that completes the set drops the collective's KernelCh reference.
// - Events the records do not need (CoreSkipAncestorStart, ancestor_skip.h): at most one relaxed
//   load of `mask` (and a GroupApi's read of its own thread's p2p_thread flag, which only that
//   thread writes), and NCCL's out-parameter written, nothing else (but a skipped CollApi's mark
//   on a group we keep: the calling thread's own open group, or a group slot as a kept CollApi
//   marks it); the shared Group handle is never written and is recognised by its address before
//   anything is read through a handle.
// - Contexts: published by a release store, checked by acquire loads (context_table.h); their
//   in-flight counters and GPU clock offset have their own orders (in_flight.h, calibration.h).
#include "plugin/core/profiler_hot.h"

#include <atomic>
#include <cstdint>

#include "absl/base/attributes.h"

#include "common/dcheck.h"
#include "plugin/base/clock.h"
#include "plugin/core/ancestor_skip.h"
#include "plugin/core/api_context.h"
#include "plugin/core/callback_meter.h"
#include "plugin/core/context_table.h"
#include "plugin/core/event_model.h"
#include "plugin/core/func_recovery.h"
#include "plugin/core/names.h"
#include "plugin/core/overhead_budget.h"
#include "plugin/core/profiler_core.h"
#include "plugin/core/profiler_state.h"
#include "plugin/core/slot_pool.h"
#include "plugin/core/slot_refs.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin {

const EventDesc kBlankEventDesc{};

using profiler_internal::AfterDrop;
using profiler_internal::AtomicMax;
using profiler_internal::g;
using profiler_internal::g_skipped_group;
using profiler_internal::IsOpenGroupHandle;
using profiler_internal::kProxyFamily;
using profiler_internal::NoteCollApiInGroup;
using profiler_internal::OpenGroupHandle;
using profiler_internal::OpenGroupOf;
using profiler_internal::Popcount64;
using profiler_internal::ReleaseGrace;
using profiler_internal::ResetCompletionState;
using profiler_internal::ResetRecordFields;
using profiler_internal::ResetSlot;
using profiler_internal::StartContext;
using profiler_internal::StartGroupApiSlot;
using profiler_internal::Unref;

namespace {

// Kinds whose start time is read later: Coll/P2p/CeColl (enqueue_ns, CE timing), CollApi/P2pApi
// (api_ns). Not ProxyStep: NCCL records SendGPUWait (8) or RecvWait (10) right after a step's
// start, and the waits are timed from those states instead, which saves one clock read per
// network transfer. Not KernelCh: it reads the clock only when it feeds the GPU clock calibration
// (CalibrationSample).
constexpr uint32_t kTimedStarts = kSentinelProfileColl | kSentinelProfileP2p |
                                  kSentinelProfileCeColl | kSentinelProfileCollApi |
                                  kSentinelProfileP2pApi;

// A ProxyStep's state or stop time: a tick of the interval clock (tick_clock.h; the TSC where it
// serves), not MonoNs. Only differences within one step are read, and a ProxyStep makes up
// to three clock reads per network step, the most of any event: 6 of the 8 a 1-channel
// all-reduce reads at the `all` mask.
inline int64_t ProxyTick() { return static_cast<int64_t>(g->ticks.Now()); }

// ---- per-kind starts ------------------------------------------------------------------------
// The API kinds (GroupApi, CollApi, P2pApi) write only what is read of them: the slot header,
// func/datatype/graph_captured/api_override and GroupApi's recovery fields (func_recovery.h). Their
// record fields (ResetRecordFields) are never read: pools are per kind, and only Coll/P2p/CeColl
// slots are built into records, truncated by finalize or swept. Not writing them keeps a start on
// the slot's first line (GroupApi: and its recovery line) instead of four lines that a FIFO reuse
// of a large pool finds cold.

// A GroupApi start: the thread's open group; a slot on the overflow state, which several threads
// share.
void* StartGroupApi(Context* ctx, bool graph_captured, ThreadState* ts) {
  if (ts->shared) return StartGroupApiSlot(ctx, graph_captured, ts);
  // A group still open here was failed by NCCL before its stop; its slot, if it had one, stays
  // live as a slot NCCL never stops would.
  ts->group = OpenGroup{ctx, nullptr, true, graph_captured, false};
  return OpenGroupHandle(ts);
}

// What an API child's start reads of its descriptor (CoreStartCollApi passes NCCL's fields
// straight; CoreStartKeptEvent takes them from the EventDesc).
struct ApiDesc {
  void* parent;
  const char* func;
  const char* datatype;
  uint64_t count;
  bool graph_captured;
};

// The group's slot, made at its first P2pApi piece from what the open group noted so far.
Slot* OpenGroupSlot(OpenGroup* og, ThreadState* ts) {
  if (og->slot == nullptr) {
    og->slot = StartGroupApiSlot(og->ctx, og->graph_captured, ts);
    if (og->slot != nullptr && og->has_coll) NoteCollApiPiece(og->slot);
  }
  return og->slot;
}

// CollApi, P2pApi. File-local with its callers: as a function of another file it took 7 more
// instructions per CollApi start (callgrind).
Slot* StartApiChild(Kind k, Context* ctx, const ApiDesc& d, ThreadState* ts, int64_t now) {
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

// The reference count a new Coll/P2p starts with, from the mask NCCL snapshots for it; also
// meters its expected KernelCh callbacks (callback_meter.h).
inline void SetCompletionRefs(Slot* s, bool n_channels_valid, ThreadState* ts) {
  uint32_t mask = g->mask.load(std::memory_order_relaxed);
  uint32_t kch = 0;
  uint32_t waits_for = kProxyFamily | kSentinelProfileKernelCh;
  if (!InBudgetBurst(s->ordinal) && g->budget_level.load(std::memory_order_relaxed) >=
                                        static_cast<uint8_t>(BudgetLevel::kKernelChSampled)) {
    // Over budget: this collective's KernelCh events are ignored (see the KernelCh start).
    s->flags |= kSentinelCollGpuSkipped;
    waits_for = kProxyFamily;
  } else if ((mask & kSentinelProfileKernelCh) != 0 && n_channels_valid) {
    // Channels from kMaxKchHandles up get KernelCh slots, each with its own reference.
    kch = s->nchannels < kMaxKchHandles ? s->nchannels : kMaxKchHandles;
  }
  SENTINEL_DCHECK(kch <= kMaxKchHandles);  // KernelChTimes has kMaxKchHandles per collective
  s->kch_expected = kch;
  s->kch_weight = MeterCollective(ts, kch);
  uint32_t grace = 0;
  if (kch == 0 && (mask & waits_for) != 0) grace = 1;
  s->grace.store(grace, std::memory_order_relaxed);
  // One reference of its own, one for all its expected KernelCh children (see StopKernelCh).
  s->refs.store(1 + (kch != 0 ? 1 : 0) + grace, std::memory_order_relaxed);
}

Slot* StartColl(Context* ctx, const CollDesc& d, ThreadState* ts, int64_t now) {
  uint8_t func = FuncFromString(d.func);
  InFlightSignature sig;
  sig.datatype = DatatypeFromString(d.datatype);
  sig.bytes = d.count * DatatypeSize(sig.datatype);
  sig.root = (func == kSentinelFuncBroadcast || func == kSentinelFuncReduce) ? d.root : -1;
  // The ordinal is taken even when no slot is free, so that this rank's count of collectives
  // stays comparable with its peers' (a later completion moves `completed` past it).
  uint64_t ordinal = ctx->inflight.OnEnqueue(now, d.seq, func, sig);
  Slot* s = g->slots.Claim(Kind::kColl, ts);
  if (s == nullptr) return nullptr;
  // The hottest start: every field a Coll record reads is written exactly once (what
  // ResetSlot + ResetRecordFields would do, without the double writes). relaxed throughout, as in
  // ResetSlot: NCCL's hand-off of the handle publishes them.
  const uint8_t datatype = sig.datatype;
  s->ctx.store(ctx, std::memory_order_relaxed);
  s->parent.store(nullptr, std::memory_order_relaxed);
  s->start_ns.store(now, std::memory_order_relaxed);
  s->func.store(func, std::memory_order_relaxed);
  s->datatype.store(datatype, std::memory_order_relaxed);
  s->graph_captured.store(0, std::memory_order_relaxed);
  s->seq = d.seq;
  s->bytes = sig.bytes;
  s->ordinal = ordinal;
  s->peer = -1;
  s->root = sig.root;
  s->algo = AlgoFromString(d.algo);
  s->proto = ProtoFromString(d.proto);
  s->nchannels = d.n_channels;
  ResetCompletionState(s);
  // Graph replays point at CollApi handles stopped at capture time: use the parent only if it
  // is still a CollApi slot describing the same function.
  int64_t api_ns = 0;
  uint16_t flags = 0;
  Slot* api = d.parent != nullptr ? g->slots.AsSlotOfKind(d.parent, Kind::kCollApi) : nullptr;
  if (api != nullptr && api->func.load(std::memory_order_relaxed) == func) {
    api_ns = api->start_ns.load(std::memory_order_relaxed);
    flags |= kSentinelCollApiTimeValid;
    if (api->graph_captured.load(std::memory_order_relaxed)) flags |= kSentinelCollGraphCaptured;
  }
  s->api_ns = api_ns;
  s->flags = flags;
  SetCompletionRefs(s, true, ts);  // also sets kch_expected, grace and refs (clearing the bits)
  return s;
}

Slot* StartP2p(Context* ctx, const EventDesc& d, ThreadState* ts, int64_t now) {
  Slot* s = g->slots.Claim(Kind::kP2p, ts);
  if (s == nullptr) return nullptr;
  ResetSlot(s, ctx, nullptr, 1, now);
  ResetRecordFields(s);
  uint8_t func = FuncFromString(d.func);
  s->func.store(func, std::memory_order_relaxed);
  s->datatype.store(DatatypeFromString(d.datatype), std::memory_order_relaxed);
  s->bytes = d.count * DatatypeSize(s->datatype.load(std::memory_order_relaxed));
  s->nchannels = d.n_channels_valid ? d.n_channels : 0;
  s->peer = d.peer;
  s->flags = kSentinelCollIsP2p;
  bool recovered = false;
  Slot* api = g->slots.AsSlotOfKind(d.parent, Kind::kP2pApi);
  if (api != nullptr && api->func.load(std::memory_order_relaxed) == func) {
    s->api_ns = api->start_ns.load(std::memory_order_relaxed);
    s->flags |= kSentinelCollApiTimeValid;
    if (api->graph_captured.load(std::memory_order_relaxed)) s->flags |= kSentinelCollGraphCaptured;
    uint8_t rfunc = 0;
    uint64_t rseq = 0;
    if (RecoveredFunc(api, &rfunc, &rseq)) {
      s->func.store(rfunc, std::memory_order_relaxed);
      s->seq = rseq;
      s->flags |= kSentinelCollFuncRecovered;
      recovered = true;
    }
  }
  if (!recovered) {
    uint32_t idx = static_cast<uint32_t>(d.peer) * 2 + (func == kSentinelFuncRecv ? 1 : 0);
    if (d.peer >= 0 && idx < ctx->p2p_seq_size) {
      s->seq = ctx->p2p_seq[idx].fetch_add(1, std::memory_order_relaxed);  // relaxed: a counter
    } else {
      s->seq = ctx->fallback_seq.fetch_add(1, std::memory_order_relaxed);
    }
  }
  SetCompletionRefs(s, d.n_channels_valid, ts);
  return s;
}

// ProxyOp: a child of a Coll/P2p. A collective's open ProxyOps share ONE reference on it, taken
// by the ProxyOp that finds none open and dropped by the last one to finish (OnLastRef), and
// `proxy_open` counts them with loads and stores: every ProxyOp of a collective starts and ends on
// its communicator's proxy progress thread (docs/nccl-facts.md, Threads and concurrency; ends:
// a ProxyOp's count changes on that thread only, slot_refs.h). A TryRef and an Unref per ProxyOp
// were two locked instructions on the collective's line per channel and direction. A host that
// broke the rule could leak the collective's reference (the record is then truncated at
// finalize) or drop it early (its later ProxyOps are orphans), nothing worse.
// Not timed (kTimedStarts): its start_ns is 0.
Slot* StartProxyOp(Slot* parent, ThreadState* ts) {
  const uint32_t open = parent->proxy_open.load(std::memory_order_relaxed);
  // Open ProxyOps hold their shared reference, so the collective cannot have finished.
  SENTINEL_DCHECK(open == 0 || (parent->refs.load(std::memory_order_relaxed) & kRefCountMask) != 0);
  if (open == 0 && !TryRef(parent)) {
    ts->Add(kCtrOrphanChildren);
    return nullptr;
  }
  ReleaseGrace(parent, ts);  // a reference is held for us, so this cannot finish the parent
  Slot* s = g->slots.Claim(Kind::kProxyOp, ts);
  if (s == nullptr) {
    if (open == 0) Unref(parent, ts);
    return nullptr;
  }
  parent->proxy_open.store(open + 1, std::memory_order_relaxed);
  ResetSlot(s, parent->ctx.load(std::memory_order_relaxed), parent, 1, 0);
  return s;
}

// Children that only hold their parent alive (ProxyStep, CeSync, CeBatch).
Slot* StartHoldingChild(Kind k, Kind parent_kind, void* parent_handle, Context* ctx,
                        ThreadState* ts, int64_t now) {
  Slot* parent = g->slots.AsSlotOfKind(parent_handle, parent_kind);
  // A ProxyStep's ProxyOp changes its count on one thread only (slot_refs.h).
  const bool one_thread = parent_kind == Kind::kProxyOp;
  if (parent != nullptr && !(one_thread ? TryRefOneThread(parent) : TryRef(parent))) {
    ts->Add(kCtrOrphanChildren);
    parent = nullptr;
  }
  Slot* s = g->slots.Claim(k, ts);
  if (s == nullptr) {
    if (parent != nullptr) {
      AfterDrop(one_thread ? DropRefOneThread(parent) : DropRef(parent), parent, ts);
    }
    return nullptr;
  }
  ResetSlot(s, ctx, parent, 1, now);
  // The state times (another cache line) are valid only once their bit is set, so they need no
  // reset here.
  s->step_states.store(0, std::memory_order_relaxed);
  return s;
}

// The Coll/P2p a ProxyStep contributes to (its ProxyOp's parent), or null.
inline Slot* StepOwner(Slot* step) {
  Slot* op = step->parent.load(std::memory_order_relaxed);
  if (op == nullptr || KindOf(op) != Kind::kProxyOp) return nullptr;
  Slot* coll = op->parent.load(std::memory_order_relaxed);
  if (coll == nullptr) return nullptr;
  Kind k = KindOf(coll);
  return (k == Kind::kColl || k == Kind::kP2p) ? coll : nullptr;
}

// Adds to a collective's proxy sum. Every ProxyOp and ProxyStep of one collective comes from its
// communicator's one proxy progress thread (docs/nccl-facts.md, Threads and concurrency), so the
// sums have one writer: a load and a store, no RMW. A fetch_add per sum was four locked
// instructions per network step, each waiting for the stores before it: the costliest part of a
// ProxyStep stop (perf). Atomics only so that finalize's truncation may read them while a step
// still adds; were a host ever to stop one collective's steps on two threads at once, a sum
// could lose an addition, never more.
template <typename T, typename V>
inline void ProxySumAdd(std::atomic<T>& sum, V v) {
  sum.store(sum.load(std::memory_order_relaxed) + static_cast<T>(v), std::memory_order_relaxed);
}

// The ticks from `from` to `to`, never negative: the proxy thread may move to another CPU within a
// step, and the TSCs the kernel keeps time with are in step to within a few cycles, not exactly.
inline int64_t TickSpan(int64_t from, int64_t to) { return to > from ? to - from : 0; }

// `now`: the stop's tick. Every time here is a tick of the interval clock (g->ticks,
// tick_clock.h), read on the proxy thread; the record converts the sums to ns.
void StopProxyStep(Slot* s, int64_t now) {
  Slot* coll = StepOwner(s);
  if (coll == nullptr) return;
  uint8_t seen = s->step_states.load(std::memory_order_relaxed);
  // start_ns holds the SendGPUWait (8) tick; a step start reads no clock.
  int64_t t8 = (seen & kStepSawSendGpuWait) ? s->start_ns.load(std::memory_order_relaxed) : 0;
  int64_t t9 = (seen & kStepSawSendWait) ? s->t_send_wait.load(std::memory_order_relaxed) : 0;
  int64_t t10 = (seen & kStepSawRecvWait) ? s->t_recv_wait.load(std::memory_order_relaxed) : 0;
  int64_t t11 = (seen & kStepSawRecvFlush) ? s->t_recv_flush.load(std::memory_order_relaxed) : 0;
  // relaxed: sums read by the completing thread after the acq_rel refcount release.
  if (t9 != 0) {
    if (t8 != 0) ProxySumAdd(coll->send_wait_ticks, TickSpan(t8, t9));
    ProxySumAdd(coll->send_xfer_ticks, TickSpan(t9, now));
    ProxySumAdd(coll->send_bytes, s->size_send.load(std::memory_order_relaxed));
  }
  if (t11 != 0) {
    if (t10 != 0) ProxySumAdd(coll->recv_wait_ticks, TickSpan(t10, t11));
    ProxySumAdd(coll->recv_xfer_ticks, TickSpan(t11, now));
    ProxySumAdd(coll->recv_bytes, s->size_recv.load(std::memory_order_relaxed));
  }
  if (t9 != 0 || t11 != 0) ProxySumAdd(coll->proxy_steps, 1u);
}
// ---- KernelCh stops and states (its start and KernelChBits: profiler_kernel_ch.cc) ------------

// A slot-less KernelCh handle's parent, if the handle is one and still open (started, not
// stopped); otherwise counts a stale handle and returns null.
// Inlined into both callers: a call frame was a tenth of its cost (perf annotate).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline Slot* OpenKernelCh(void* handle, uint32_t* channel,
                                                       ThreadState* ts, KernelChMeter& meter) {
  Slot* parent = g->slots.AsKernelChParent(handle, channel);
  // The handle's decoding bounds the channel: it indexes KernelChTimes and shifts a 64-bit mask.
  SENTINEL_DCHECK(parent == nullptr || *channel < kMaxKchHandles);
  // The parent stays live while an open KernelCh holds its reference.
  if (parent == nullptr || parent->state.load(std::memory_order_acquire) != SlotState::kLive ||
      (parent->kch_seen.load(std::memory_order_relaxed) & (uint64_t{1} << *channel)) == 0 ||
      (parent->kch_done.load(std::memory_order_relaxed) & (uint64_t{1} << *channel)) != 0) {
    meter.Count(1);
    ts->Add(kCtrStaleHandles);
    return nullptr;
  }
  if (parent->kch_weight != 0) meter.Time(parent->kch_weight);
  return parent;
}

void StopKernelCh(void* handle, ThreadState* ts) {
  KernelChMeter meter(ts);
  uint32_t channel = 0;
  Slot* parent = OpenKernelCh(handle, &channel, ts, meter);
  if (parent == nullptr) return;
  uint64_t bit = uint64_t{1} << channel;
  // The first stop wins. One writer (KernelChBits): a load and a store; the stop that completes
  // the set passes the channels' timers on through the refcount drop (acq_rel), and the earlier
  // stops came before it on the same thread.
  const uint64_t before = parent->kch_done.load(std::memory_order_relaxed);
  if ((before & bit) != 0) {
    ts->Add(kCtrStaleHandles);
    return;
  }
  parent->kch_done.store(before | bit, std::memory_order_relaxed);
  // Slot-less handles go only to expected channels, so exactly one stop completes the set.
  if (Popcount64(before | bit) == parent->kch_expected) Unref(parent, ts);
}

void RecordKernelCh(void* handle, int state, const SentinelEventStateArgs* args, ThreadState* ts) {
  KernelChMeter meter(ts);
  uint32_t channel = 0;
  Slot* parent = OpenKernelCh(handle, &channel, ts, meter);
  if (parent == nullptr) return;
  if (state == kSentinelStateKernelChStop && args != nullptr && args->kernel_ch.p_timer != 0) {
    // A slot-less handle's channel is its own (KernelChTimes); relaxed: see StopKernelCh.
    g->slots.KernelChTimesOf(parent)[channel].end.store(
        static_cast<int64_t>(args->kernel_ch.p_timer), std::memory_order_relaxed);
  }
}

}  // namespace

// ---- entry points ---------------------------------------------------------------------------

namespace {
// The handle of every Group start we do not keep (g_skipped_group, profiler_groups.cc).
inline bool IsSkippedGroup(const void* handle) { return handle == g_skipped_group; }

}  // namespace

void CoreStartGroupApi(void* context, void** handle, bool graph_captured) noexcept {
  ThreadState* ts = ThreadStates::Current();
  *handle = nullptr;
  CallbackMeter meter(ts);
  Context* ctx = StartContext(context, ts);
  if (ctx == nullptr) return;
  *handle = StartGroupApi(ctx, graph_captured, ts);
}

void CoreStartCollApi(void* context, void** handle, void* parent, const char* func,
                      const char* datatype, bool graph_captured) noexcept {
  ThreadState* ts = ThreadStates::Current();
  *handle = nullptr;
  CallbackMeter meter(ts);
  Context* ctx = StartContext(context, ts);
  if (ctx == nullptr) return;
  *handle =
      StartApiChild(Kind::kCollApi, ctx, {parent, func, datatype, 0, graph_captured}, ts, MonoNs());
}

void CoreStartColl(void* context, void** handle, const CollDesc& d) noexcept {
  ThreadState* ts = ThreadStates::Current();
  *handle = nullptr;
  CallbackMeter meter(ts);
  Context* ctx = StartContext(context, ts);
  if (ctx == nullptr) return;
  *handle = StartColl(ctx, d, ts, MonoNs());
}

void CoreStartProxyOp(void* context, void** handle, void* parent_handle, pid_t pid) noexcept {
  ThreadState* ts = ThreadStates::Current();
  *handle = nullptr;
  CallbackMeter meter(ts);
  // PXN (docs/nccl-facts.md "5.5 Special cases"): a ProxyOp of another process carries that
  // process's pointers. Check the pid before touching context or parent.
  if (pid != g->pid) {
    ts->Add(kCtrPxnForeign);
    return;
  }
  if (StartContext(context, ts) == nullptr) return;
  Slot* parent = g->slots.AsSlot(parent_handle);
  if (parent == nullptr || (KindOf(parent) != Kind::kColl && KindOf(parent) != Kind::kP2p)) {
    ts->Add(kCtrOrphanChildren);
    return;
  }
  *handle = StartProxyOp(parent, ts);
}

void CoreStartProxyStep(void* context, void** handle, void* parent_handle) noexcept {
  ThreadState* ts = ThreadStates::Current();
  *handle = nullptr;
  CallbackMeter meter(ts);
  Context* ctx = StartContext(context, ts);
  if (ctx == nullptr) return;
  // Not timed: its waits are timed from its states (kTimedStarts).
  *handle = StartHoldingChild(Kind::kProxyStep, Kind::kProxyOp, parent_handle, ctx, ts, 0);
}

void CoreStartEvent(void* context, void** handle, const EventDesc& d) noexcept {
  if (d.type == kSentinelProfileKernelCh) {
    CoreStartKernelCh(context, handle, d.parent, d.channel_id, d.p_timer);
    return;
  }
  if (SkipAncestorStart(d.type, d.parent, handle)) return;
  CoreStartKeptEvent(context, handle, d);
}

void CoreStartKeptEvent(void* context, void** handle, const EventDesc& d) noexcept {
  if (d.type == kSentinelProfileKernelCh) {
    CoreStartKernelCh(context, handle, d.parent, d.channel_id, d.p_timer);
    return;
  }
  if (d.type == kSentinelProfileProxyOp) {
    CoreStartProxyOp(context, handle, d.parent, d.pid);
    return;
  }
  if (d.type == kSentinelProfileProxyStep) {
    CoreStartProxyStep(context, handle, d.parent);
    return;
  }
  ThreadState* ts = ThreadStates::Current();
  *handle = nullptr;
  CallbackMeter meter(ts);
  Context* ctx = StartContext(context, ts);
  if (ctx == nullptr) return;
  // The clock is the most expensive thing here (~25 ns on a VM): read it only for the kinds whose
  // start time is used (record times, ProxyStep waits, GPU calibration).
  int64_t now = (d.type & kTimedStarts) != 0 ? MonoNs() : 0;
  Slot* s = nullptr;
  switch (d.type) {
    case kSentinelProfileGroupApi:
      *handle = StartGroupApi(ctx, d.graph_captured, ts);
      return;
    case kSentinelProfileCollApi:
      s = StartApiChild(Kind::kCollApi, ctx,
                        {d.parent, d.func, d.datatype, d.count, d.graph_captured}, ts, now);
      break;
    case kSentinelProfileP2pApi:
      s = StartApiChild(Kind::kP2pApi, ctx,
                        {d.parent, d.func, d.datatype, d.count, d.graph_captured}, ts, now);
      break;
    case kSentinelProfileColl:
      s = StartColl(
          ctx,
          {d.parent, d.func, d.datatype, d.algo, d.proto, d.seq, d.count, d.root, d.n_channels}, ts,
          now);
      break;
    case kSentinelProfileP2p:
      s = StartP2p(ctx, d, ts, now);
      break;
    case kSentinelProfileNetPlugin:
      // No reference on its ProxyStep: no record reads a NetPlugin event, and the net plugin may
      // raise it on any thread, while a ProxyStep's count changes on the proxy progress thread
      // only (slot_refs.h); a reference dropped from here was also a ProxyOp's, dropped off it.
      s = g->slots.Claim(Kind::kNetPlugin, ts);
      if (s != nullptr) ResetSlot(s, ctx, nullptr, 1, now);
      break;
    case kSentinelProfileCeSync:
      s = StartHoldingChild(Kind::kCeSync, Kind::kCeColl, d.parent, ctx, ts, now);
      break;
    case kSentinelProfileCeBatch:
      s = StartHoldingChild(Kind::kCeBatch, Kind::kCeColl, d.parent, ctx, ts, now);
      break;
    case kSentinelProfileProxyCtrl:
      s = g->slots.Claim(Kind::kProxyCtrl, ts);
      if (s != nullptr) ResetSlot(s, ctx, nullptr, 1, now);
      break;
    case kSentinelProfileCeColl: {
      s = g->slots.Claim(Kind::kCeColl, ts);
      if (s == nullptr) break;
      ResetSlot(s, ctx, nullptr, 1, now);
      ResetRecordFields(s);
      s->func.store(FuncFromString(d.func), std::memory_order_relaxed);
      s->seq = d.seq;
      s->datatype.store(DatatypeFromString(d.datatype), std::memory_order_relaxed);
      s->bytes = d.count * DatatypeSize(s->datatype.load(std::memory_order_relaxed));
      if (s->func.load(std::memory_order_relaxed) == kSentinelFuncBroadcast ||
          s->func.load(std::memory_order_relaxed) == kSentinelFuncReduce)
        s->root = d.root;
      break;
    }
    default:
      break;
  }
  *handle = s;
}

void CoreStopEvent(void* handle) noexcept {
  if (IsSkippedGroup(handle)) return;
  ThreadState* ts = ThreadStates::Current();
  if ((reinterpret_cast<uintptr_t>(handle) & 1) != 0) {  // slots are aligned: a KernelCh handle
    StopKernelCh(handle, ts);
    return;
  }
  CallbackMeter meter(ts);
  Slot* s = nullptr;
  if (IsOpenGroupHandle(handle)) {
    OpenGroup* og = OpenGroupOf(handle, ts);
    if (og == nullptr) return;
    s = og->slot;
    *og = OpenGroup{};
    if (s == nullptr) return;  // a group without P2pApi pieces: nothing to recover or release
  } else {
    s = g->slots.AsSlot(handle);
  }
  if (s == nullptr || s->state.load(std::memory_order_acquire) != SlotState::kLive) {
    ts->Add(kCtrStaleHandles);
    return;
  }
  // Repeated stops (e.g. NCCL's stale CollApi, docs/nccl-facts.md "5.6 Pitfalls" item 1) and stops
  // of finished slots are counted and ignored; see MarkStopped.
  // ProxyOp, ProxyStep, GroupApi, CollApi: their counts change on one thread only (slot_refs.h).
  const bool one_thread = CountsOnOneThread(KindOf(s));
  RefDrop stopped = one_thread ? MarkStoppedOneThread(s) : MarkStopped(s);
  if (stopped == RefDrop::kStale) {
    ts->Add(kCtrStaleHandles);
    return;
  }
  // The slot stays ours until OnLastRef (by us below, or by the last child): with the count at 0
  // no new child can reference it, and its parent is held until OnLastRef.
  switch (KindOf(s)) {
    case Kind::kProxyStep:
      StopProxyStep(s, ProxyTick());
      break;
    case Kind::kGroupApi:
      RecoverGroupFunc(s);
      break;
    case Kind::kColl:
    case Kind::kP2p:
      if (s->grace.load(std::memory_order_relaxed) != 0) {
        s->stop_ns.store(MonoNs(), std::memory_order_relaxed);
      }
      break;
    case Kind::kCeColl:
      s->stop_ns.store(MonoNs(), std::memory_order_relaxed);
      break;
    default:
      break;
  }
  if (stopped == RefDrop::kHeld) {
    // Our own reference, after the stop's work above.
    if (one_thread) {
      AfterDrop(DropRefOneThread(s), s, ts);
    } else {
      Unref(s, ts);
    }
  } else {
    AfterDrop(stopped, s, ts);
  }
}

void CoreRecordState(void* handle, int state, const SentinelEventStateArgs* args) noexcept {
  // A state no record or recovery reads (kStatesRead: GroupStartApiStop right after a GroupApi's
  // start, a ProxyOp's InProgress, ...) changes nothing: answered before any lookup, like the
  // ancestors we skip (ancestor_skip.h), and so not metered either.
  if (!CoreReadsState(state) || IsSkippedGroup(handle)) return;
  ThreadState* ts = ThreadStates::Current();
  if ((reinterpret_cast<uintptr_t>(handle) & 1) != 0) {  // slots are aligned: a KernelCh handle
    RecordKernelCh(handle, state, args, ts);
    return;
  }
  CallbackMeter meter(ts);
  if (IsOpenGroupHandle(handle)) {  // GroupEndApiStart (24) on the thread's open group
    OpenGroup* og = OpenGroupOf(handle, ts);
    if (og == nullptr || og->slot == nullptr) return;  // no P2pApi piece: nothing to recover
    handle = og->slot;
  }
  Slot* s = g->slots.AsSlot(handle);
  if (s == nullptr || s->state.load(std::memory_order_acquire) != SlotState::kLive ||
      (s->refs.load(std::memory_order_relaxed) & kStoppedBit) != 0) {
    ts->Add(kCtrStaleHandles);
    return;
  }
  switch (KindOf(s)) {
    case Kind::kProxyStep: {
      uint64_t size = args != nullptr ? args->proxy_step.trans_size : 0;
      // relaxed: read by the same slot's stop, which NCCL issues after these states.
      // step_states: a plain load+store, no RMW: one proxy thread records a step's states.
      // The times are ticks of the interval clock (ProxyTick): only differences are read.
      uint8_t seen = s->step_states.load(std::memory_order_relaxed);
      if (state == kSentinelStateProxyStepSendGpuWait) {
        s->start_ns.store(ProxyTick(), std::memory_order_relaxed);
        s->step_states.store(seen | kStepSawSendGpuWait, std::memory_order_relaxed);
      } else if (state == kSentinelStateProxyStepSendWait) {
        s->t_send_wait.store(ProxyTick(), std::memory_order_relaxed);
        s->size_send.store(size, std::memory_order_relaxed);
        s->step_states.store(seen | kStepSawSendWait, std::memory_order_relaxed);
      } else if (state == kSentinelStateProxyStepRecvWait) {
        s->t_recv_wait.store(ProxyTick(), std::memory_order_relaxed);
        s->step_states.store(seen | kStepSawRecvWait, std::memory_order_relaxed);
      } else if (state == kSentinelStateProxyStepRecvFlushWait) {
        s->t_recv_flush.store(ProxyTick(), std::memory_order_relaxed);
        s->size_recv.store(size, std::memory_order_relaxed);
        s->step_states.store(seen | kStepSawRecvFlush, std::memory_order_relaxed);
      }
      break;
    }
    case Kind::kKernelCh:
      if (state == kSentinelStateKernelChStop && args != nullptr && args->kernel_ch.p_timer != 0 &&
          s->parent.load(std::memory_order_relaxed) != nullptr) {
        AtomicMax(s->parent.load(std::memory_order_relaxed)->gpu_end_raw,
                  static_cast<int64_t>(args->kernel_ch.p_timer));
      }
      break;
    case Kind::kGroupApi:
      if (state == kSentinelStateGroupEndApiStart) RecoverGroupFunc(s);
      break;
    default:
      break;
  }
}

}  // namespace sentinel::plugin
