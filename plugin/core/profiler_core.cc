// The plugin core: the per-event logic and record completion, over the slot pools
// (slot_pool.h), reference counts (slot_refs.h), context table (context_table.h), function
// recovery (func_recovery.h) and record building (record_builder.h).
// See event_model.h for the lifetime rules and plugin/README.md for the completion rule.
#include "plugin/core/profiler_core.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include "absl/base/attributes.h"

#include "plugin/base/clock.h"
#include "plugin/base/env_config.h"
#include "plugin/base/event_mask.h"
#include "plugin/base/log.h"
#include "plugin/base/no_destructor.h"
#include "plugin/base/raw_log.h"
#include "plugin/core/api_context.h"
#include "plugin/core/callback_meter.h"
#include "plugin/core/context_table.h"
#include "plugin/core/drainer.h"
#include "plugin/core/event_model.h"
#include "plugin/core/func_recovery.h"
#include "plugin/core/names.h"
#include "plugin/core/overhead_budget.h"
#include "plugin/core/record_builder.h"
#include "plugin/core/slot_pool.h"
#include "plugin/core/slot_refs.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin {

ABSL_CONST_INIT std::atomic<int> g_gate{kGateUninit};
const EventDesc kBlankEventDesc{};

namespace {

// Kinds whose start time is read later: Coll/P2p/CeColl (enqueue_ns, CE timing), CollApi/P2pApi
// (api_ns). Not ProxyStep: NCCL records SendGPUWait (8) or RecvWait (10) right after a step's
// start, and the waits are timed from those states instead, which saves one clock read per
// network transfer. Not KernelCh: it reads the clock only when it feeds the GPU clock calibration
// (CalibrationSample).
constexpr uint32_t kTimedStarts = kSentinelProfileColl | kSentinelProfileP2p |
                                  kSentinelProfileCeColl | kSentinelProfileCollApi |
                                  kSentinelProfileP2pApi;
// GPU clock calibration samples (a host clock read at a KernelCh start): every collective's first
// channel for the first kCalibWarmup collectives of a communicator, then one collective in
// kCalibEvery. The offset is a running minimum, which later samples rarely lower, and a clock read
// is the costliest step of a KernelCh start (~25 ns on a VM; A/B with
// sentinel_collective_benchmark).
constexpr uint64_t kCalibWarmup = 256;
constexpr uint64_t kCalibEvery = 8;  // a power of two
constexpr uint32_t kProxyFamily =
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
  bool ready = false;    // pools and threads set up (false when disabled)
  std::mutex budget_mu;  // the budget's judgement (heartbeat snapshots), off the hot path
  OverheadBudget budget{0.0};
};

// Written once inside std::call_once; read afterwards only (call_once orders it).
Globals* g = nullptr;
std::once_flag g_once;
char g_dummy_context[64];
// The pid whose atfork child handler ran; the child is off for good.
std::atomic<bool> g_forked_child{false};

void ChildAfterFork() {
  g_forked_child.store(true, std::memory_order_relaxed);
  g_gate.store(kGateOff, std::memory_order_relaxed);
}

void GlobalInit() {
  auto* gl = new (std::nothrow) Globals();
  if (gl == nullptr) return;
  std::string errors;
  gl->config = ParseEnvConfig(&errors);
  gl->pid = getpid();
  ConfigureLog(gl->config.log_level);
  if (!errors.empty()) Log(LogLevel::kWarn, "bad settings ignored:\n%s", errors.c_str());
  uint32_t mask = kMaskDefault;
  if (!ParseEventMask(gl->config.events.c_str(), &mask)) {
    Log(LogLevel::kWarn,
        "SENTINEL_EVENTS='%s' is not a preset, event list or number; using "
        "'default'",
        gl->config.events.c_str());
    mask = kMaskDefault;
  }
  gl->mask.store(mask, std::memory_order_relaxed);
  gl->grace_ns = static_cast<int64_t>(gl->config.proxy_grace_ms) * 1000000;
  gl->budget = OverheadBudget(gl->config.budget_percent);
  if (gl->config.disable) {
    g = gl;
    g_gate.store(kGateOff, std::memory_order_relaxed);
    return;
  }
  if (!gl->slots.Map(gl->config.pool_size) || !gl->contexts.Map(gl->config.max_comms) ||
      !ThreadStates::Get().Init(gl->config.rings, gl->config.ring_records)) {
    Log(LogLevel::kWarn, "cannot map the plugin's pools; the plugin stays off");
    g = gl;
    g_gate.store(kGateOff, std::memory_order_relaxed);
    return;
  }
  gl->ready = true;
  pthread_atfork(nullptr, nullptr, &ChildAfterFork);
  atexit(&DrainerAtExit);
  g = gl;
  g_gate.store(kGateOn, std::memory_order_relaxed);
}

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
  s->send_wait_ns.store(0, std::memory_order_relaxed);
  s->send_xfer_ns.store(0, std::memory_order_relaxed);
  s->recv_wait_ns.store(0, std::memory_order_relaxed);
  s->recv_xfer_ns.store(0, std::memory_order_relaxed);
  s->send_bytes.store(0, std::memory_order_relaxed);
  s->recv_bytes.store(0, std::memory_order_relaxed);
  s->proxy_steps.store(0, std::memory_order_relaxed);
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

void OnLastRef(Slot* s, ThreadState* ts, bool emit);

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

inline void Unref(Slot* s, ThreadState* ts) { AfterDrop(DropRef(s), s, ts); }

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

// Once per collective: builds the record directly in the thread's ring slot.
void BuildAndPush(Slot* s, bool truncated, ThreadState* ts) {
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
  BuildCollRecord(*s, truncated, static_cast<uint32_t>(g->pid), slot);
  if (s->ordinal != 0 && g->budget_level.load(std::memory_order_relaxed) >=
                             static_cast<uint8_t>(BudgetLevel::kRecordsSampled)) {
    // Over budget: 1 Coll record in kBudgetSampleEvery is queued, marked as standing for the
    // others (the slot was filled; not committing it discards it).
    if ((s->ordinal & (kBudgetSampleEvery - 1)) != 0) return;
    slot->flags |= kSentinelCollSampled;
  }
  ts->ring.Commit();
  ts->Add(kCtrRecordsCompleted);
}

// `emit`: kDoneBit was clear before our CAS set it, so the record is ours to emit (exactly one of
// the last reference and finalize's truncation sets it).
void OnLastRef(Slot* s, ThreadState* ts, bool emit) {
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
  if (parent != nullptr && k != Kind::kColl && k != Kind::kP2p) Unref(parent, ts);
}

// ---- per-kind starts ------------------------------------------------------------------------

Slot* StartGroupApi(Context* ctx, const EventDesc& d, ThreadState* ts, int64_t now) {
  Slot* s = g->slots.Claim(Kind::kGroupApi, ts);
  if (s == nullptr) return nullptr;
  ResetSlot(s, ctx, nullptr, 1, now);
  ResetRecordFields(s);
  s->graph_captured.store(d.graph_captured ? 1 : 0, std::memory_order_relaxed);
  ResetGroupRecovery(s);
  return s;
}

// CollApi, P2pApi, KernelLaunch: children of GroupApi, holding it until they stop.
Slot* StartApiChild(Kind k, Context* ctx, const EventDesc& d, ThreadState* ts, int64_t now) {
  Slot* grp = g->slots.AsSlotOfKind(d.parent, Kind::kGroupApi);
  if (grp != nullptr && !TryRef(grp)) grp = nullptr;
  Slot* s = g->slots.Claim(k, ts);
  if (s == nullptr) {
    if (grp != nullptr) Unref(grp, ts);
    return nullptr;
  }
  ResetSlot(s, ctx, grp, 1, now);
  ResetRecordFields(s);
  if (k == Kind::kKernelLaunch) return s;
  s->func.store(FuncFromString(d.func), std::memory_order_relaxed);
  s->datatype.store(DatatypeFromString(d.datatype), std::memory_order_relaxed);
  s->root = d.root;
  s->graph_captured.store(d.graph_captured ? 1 : 0, std::memory_order_relaxed);
  s->api_override.store(kSentinelFuncUnknown, std::memory_order_relaxed);
  if (grp == nullptr) return s;
  if (k == Kind::kCollApi) {
    NoteCollApiPiece(grp);
  } else {
    NoteP2pApiPiece(grp, s, ctx, d.count, CurrentApiForThread());
  }
  return s;
}

// The reference count a new Coll/P2p starts with, from the mask NCCL snapshots for it; also
// meters its expected KernelCh callbacks (callback_meter.h).
inline void SetCompletionRefs(Slot* s, bool n_channels_valid, ThreadState* ts) {
  uint32_t mask = g->mask.load(std::memory_order_relaxed);
  uint32_t kch = 0;
  uint32_t waits_for = kProxyFamily | kSentinelProfileKernelCh;
  if (s->ordinal != 0 && (s->ordinal & (kBudgetSampleEvery - 1)) != 0 &&
      g->budget_level.load(std::memory_order_relaxed) >=
          static_cast<uint8_t>(BudgetLevel::kKernelChSampled)) {
    // Over budget: this collective's KernelCh events are ignored (see the KernelCh start).
    s->flags |= kSentinelCollGpuSkipped;
    waits_for = kProxyFamily;
  } else if ((mask & kSentinelProfileKernelCh) != 0 && n_channels_valid) {
    // Channels from kMaxKchHandles up get KernelCh slots, each with its own reference.
    kch = s->nchannels < kMaxKchHandles ? s->nchannels : kMaxKchHandles;
  }
  s->kch_expected = kch;
  s->kch_weight = MeterCollective(ts, kch);
  uint32_t grace = 0;
  if (kch == 0 && (mask & waits_for) != 0) grace = 1;
  s->grace.store(grace, std::memory_order_relaxed);
  // One reference of its own, one for all its expected KernelCh children (see StopKernelCh).
  s->refs.store(1 + (kch != 0 ? 1 : 0) + grace, std::memory_order_relaxed);
}

Slot* StartColl(Context* ctx, const EventDesc& d, ThreadState* ts, int64_t now) {
  uint8_t func = FuncFromString(d.func);
  // The ordinal is taken even when no slot is free, so that this rank's count of collectives
  // stays comparable with its peers' (a later completion moves `completed` past it).
  uint64_t ordinal = ctx->inflight.OnEnqueue(now, d.seq, func);
  Slot* s = g->slots.Claim(Kind::kColl, ts);
  if (s == nullptr) return nullptr;
  // The hottest start: every field a Coll record reads is written exactly once (what
  // ResetSlot + ResetRecordFields would do, without the double writes). relaxed throughout, as in
  // ResetSlot: NCCL's hand-off of the handle publishes them.
  uint8_t datatype = DatatypeFromString(d.datatype);
  s->ctx.store(ctx, std::memory_order_relaxed);
  s->parent.store(nullptr, std::memory_order_relaxed);
  s->start_ns.store(now, std::memory_order_relaxed);
  s->func.store(func, std::memory_order_relaxed);
  s->datatype.store(datatype, std::memory_order_relaxed);
  s->graph_captured.store(0, std::memory_order_relaxed);
  s->seq = d.seq;
  s->bytes = d.count * DatatypeSize(datatype);
  s->ordinal = ordinal;
  s->peer = -1;
  s->root = (func == kSentinelFuncBroadcast || func == kSentinelFuncReduce) ? d.root : -1;
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

// ProxyOp and KernelCh: children of a Coll/P2p. `reserved` says a reference was already counted
// at the parent's start (an expected KernelCh).
Slot* StartCollChild(Kind k, Slot* parent, bool reserved, ThreadState* ts, int64_t now) {
  if (!reserved && !TryRef(parent)) {
    ts->Add(kCtrOrphanChildren);
    return nullptr;
  }
  ReleaseGrace(parent, ts);  // we hold a reference, so this cannot finish the parent
  Slot* s = g->slots.Claim(k, ts);
  if (s == nullptr) {
    Unref(parent, ts);
    return nullptr;
  }
  ResetSlot(s, parent->ctx.load(std::memory_order_relaxed), parent, 1, now);
  return s;
}

// Children that only hold their parent alive (ProxyStep, NetPlugin, CeSync, CeBatch).
Slot* StartHoldingChild(Kind k, Kind parent_kind, const EventDesc& d, Context* ctx, ThreadState* ts,
                        int64_t now) {
  Slot* parent = g->slots.AsSlotOfKind(d.parent, parent_kind);
  if (parent != nullptr && !TryRef(parent)) {
    ts->Add(kCtrOrphanChildren);
    parent = nullptr;
  }
  Slot* s = g->slots.Claim(k, ts);
  if (s == nullptr) {
    if (parent != nullptr) Unref(parent, ts);
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

void StopProxyStep(Slot* s, int64_t now) {
  Slot* coll = StepOwner(s);
  if (coll == nullptr) return;
  uint8_t seen = s->step_states.load(std::memory_order_relaxed);
  // start_ns holds the SendGPUWait (8) time; a step start reads no clock.
  int64_t t8 = (seen & kStepSawSendGpuWait) ? s->start_ns.load(std::memory_order_relaxed) : 0;
  int64_t t9 = (seen & kStepSawSendWait) ? s->t_send_wait.load(std::memory_order_relaxed) : 0;
  int64_t t10 = (seen & kStepSawRecvWait) ? s->t_recv_wait.load(std::memory_order_relaxed) : 0;
  int64_t t11 = (seen & kStepSawRecvFlush) ? s->t_recv_flush.load(std::memory_order_relaxed) : 0;
  // relaxed: sums read by the completing thread after the acq_rel refcount release.
  if (t9 != 0) {
    if (t8 != 0) coll->send_wait_ns.fetch_add(t9 - t8, std::memory_order_relaxed);
    coll->send_xfer_ns.fetch_add(now - t9, std::memory_order_relaxed);
    coll->send_bytes.fetch_add(s->size_send.load(std::memory_order_relaxed),
                               std::memory_order_relaxed);
  }
  if (t11 != 0) {
    if (t10 != 0) coll->recv_wait_ns.fetch_add(t11 - t10, std::memory_order_relaxed);
    coll->recv_xfer_ns.fetch_add(now - t11, std::memory_order_relaxed);
    coll->recv_bytes.fetch_add(s->size_recv.load(std::memory_order_relaxed),
                               std::memory_order_relaxed);
  }
  if (t9 != 0 || t11 != 0) coll->proxy_steps.fetch_add(1, std::memory_order_relaxed);
}

// ---- KernelCh: the per-channel hot path (3 callbacks per channel at Inspector's mask) ----------
// Metered per collective (KernelChMeter), and usually without a slot of its own (KernelChHandle):
// one fetch_or on the parent at the start and one at the stop. The collective's expected channels
// share ONE reference on it (SetCompletionRefs), dropped by the stop that completes their set: a
// reference drop per channel was a CAS loop, the costliest step of the KernelCh stop (perf).

// Inline: without -mpopcnt, __builtin_popcountll is a libgcc call.
inline uint32_t Popcount64(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ull);
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
  return static_cast<uint32_t>((x * 0x0101010101010101ull) >> 56);
}

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
    // relaxed: only decides who owns the bit; the stops' kch_done and the refcount order the rest.
    uint64_t seen = parent->kch_seen.fetch_or(bit, std::memory_order_relaxed);
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
    // relaxed: read after the refcount's acq_rel drop (FoldKernelChTimes).
    KernelChTimes& t = g->slots.KernelChTimesOf(parent)[channel_id];
    t.start.store(gpu_start, std::memory_order_relaxed);
    t.end.store(0, std::memory_order_relaxed);
  } else if (p_timer != 0) {
    AtomicMin(parent->gpu_start_raw, gpu_start);  // a channel started twice: shared
  }
  return handle;
}

// A slot-less KernelCh handle's parent, if the handle is one and still open (started, not
// stopped); otherwise counts a stale handle and returns null.
// Inlined into both callers: a call frame was a tenth of its cost (perf annotate).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline Slot* OpenKernelCh(void* handle, uint32_t* channel,
                                                       ThreadState* ts, KernelChMeter& meter) {
  Slot* parent = g->slots.AsKernelChParent(handle, channel);
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
  // The first stop wins. acq_rel: each stop releases its channel's timers (KernelChTimes) to the
  // stop that completes the set, which passes them on through the refcount drop.
  const uint64_t before = parent->kch_done.fetch_or(bit, std::memory_order_acq_rel);
  if ((before & bit) != 0) {
    ts->Add(kCtrStaleHandles);
    return;
  }
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

void* CoreInit(const InitArgs& a) noexcept {
  std::call_once(g_once, &GlobalInit);
  if (g == nullptr || !g->ready || g_forked_child.load(std::memory_order_relaxed) ||
      g_gate.load(std::memory_order_relaxed) != kGateOn) {
    if (a.mask_ptr != nullptr) {
      // relaxed: NCCL reads the mask with relaxed atomic loads (§4.5).
      reinterpret_cast<std::atomic<int>*>(a.mask_ptr)->store(0, std::memory_order_relaxed);
    }
    return g_dummy_context;
  }
  SetNcclLogger(a.logfn);
  int* expected_ptr = nullptr;
  if (g->mask_ptr.compare_exchange_strong(expected_ptr, a.mask_ptr, std::memory_order_relaxed)) {
    SetLogRank(a.rank);
  }
  Context* ctx = g->contexts.Claim();
  if (ctx == nullptr) {
    SENTINEL_LOG_ONCE(LogLevel::kWarn,
                      "more than %u live communicators; extra ones are not "
                      "profiled (SENTINEL_MAX_COMMS)",
                      g->contexts.size());
    if (a.mask_ptr != nullptr) {
      reinterpret_cast<std::atomic<int>*>(a.mask_ptr)
          ->store(static_cast<int>(g->mask.load(std::memory_order_relaxed)),
                  std::memory_order_relaxed);
    }
    return g_dummy_context;
  }
  ctx->comm_hash = a.comm_hash;
  ctx->rank = a.rank;
  ctx->nranks = a.nranks;
  ctx->nnodes = a.n_nodes;
  ctx->abi_version = a.abi_version;
  ctx->init_ns = MonoNs();
  memset(ctx->name, 0, sizeof(ctx->name));
  if (a.comm_name != nullptr) strncpy(ctx->name, a.comm_name, sizeof(ctx->name) - 1);
  ctx->calib.Reset();
  // The per-peer table lives in its own anonymous mapping (zeroed; like the arena, it is
  // reachable only from mmap'ed memory). A reused context: nobody can reach the old table.
  if (ctx->p2p_seq != nullptr) munmap(ctx->p2p_seq, ctx->p2p_seq_size * sizeof(*ctx->p2p_seq));
  ctx->p2p_seq = nullptr;
  ctx->p2p_seq_size = 0;
  if (a.nranks > 0 && a.nranks <= (1 << 20)) {
    uint32_t n = static_cast<uint32_t>(a.nranks) * 2;
    void* table = mmap(nullptr, n * sizeof(*ctx->p2p_seq), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (table != MAP_FAILED) {
      ctx->p2p_seq = static_cast<std::atomic<uint64_t>*>(table);
      for (uint32_t i = 0; i < n; ++i) new (&ctx->p2p_seq[i]) std::atomic<uint64_t>(0);
      ctx->p2p_seq_size = n;
    }
  }
  ctx->fallback_seq.store(0, std::memory_order_relaxed);
  for (auto& s : ctx->recovered_seq) s.store(0, std::memory_order_relaxed);
  ctx->inflight.Reset();
  ContextTable::Publish(ctx);

  uint32_t mask = g->mask.load(std::memory_order_relaxed);
  if (a.mask_ptr != nullptr) {
    // The mask is process-global (§4.5): every communicator stores the same value.
    reinterpret_cast<std::atomic<int>*>(a.mask_ptr)
        ->store(static_cast<int>(mask), std::memory_order_relaxed);
  }
  SentinelWireCommInit ci;
  memset(&ci, 0, sizeof(ci));
  ci.comm_hash = a.comm_hash;
  ci.init_ns = ctx->init_ns;
  ci.rank = a.rank;
  ci.nranks = a.nranks;
  ci.nnodes = a.n_nodes;
  ci.pid = static_cast<uint32_t>(g->pid);
  ci.abi_version = static_cast<uint32_t>(a.abi_version);
  ci.event_mask = mask;
  memcpy(ci.comm_name, ctx->name, sizeof(ci.comm_name));
  DrainerOnCommInit(ci, g->config);
  return ctx;
}

void CoreFinalize(void* context) noexcept {
  if (g == nullptr || !g->ready) return;
  Context* ctx = g->contexts.AsContext(context);
  if (ctx == nullptr) return;
  ThreadState* ts = ThreadStates::Current();
  // Records still waiting for children are emitted now, marked truncated. Only the slots ever
  // handed out can hold one (Pool::Touched): the cost follows the job, not SENTINEL_POOL_SIZE.
  for (Kind k : {Kind::kColl, Kind::kP2p, Kind::kCeColl}) {
    Pool& pool = g->slots.pool(k);
    const uint32_t touched = pool.Touched();
    for (uint32_t i = 0; i < touched; ++i) {
      Slot* s = pool.begin + i;
      if (s->state.load(std::memory_order_acquire) != SlotState::kLive) continue;
      if (s->ctx.load(std::memory_order_relaxed) != ctx) continue;
      // Otherwise the last reference emits it.
      if (ClaimForTruncation(s)) BuildAndPush(s, true, ts);
    }
  }
  if (!ContextTable::MarkFinalized(ctx)) return;
  DrainerOnCommEnd(ctx->comm_hash, ctx->rank);
}

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
  Context* ctx = g->contexts.AsContext(context);
  if (ctx == nullptr) {
    meter.Count(1);
    if (context != g_dummy_context) ts->Add(kCtrStaleHandles);
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

void CoreStartEvent(void* context, void** handle, const EventDesc& d) noexcept {
  if (d.type == kSentinelProfileKernelCh) {
    CoreStartKernelCh(context, handle, d.parent, d.channel_id, d.p_timer);
    return;
  }
  ThreadState* ts = ThreadStates::Current();
  *handle = nullptr;
  CallbackMeter meter(ts);
  // PXN (§5.5): a ProxyOp of another process carries that process's pointers. Check the pid
  // before touching context or parent.
  if (d.type == kSentinelProfileProxyOp && d.pid != g->pid) {
    ts->Add(kCtrPxnForeign);
    return;
  }
  Context* ctx = g->contexts.AsContext(context);
  if (ctx == nullptr) {
    if (context != g_dummy_context) ts->Add(kCtrStaleHandles);
    return;
  }
  // The clock is the most expensive thing here (~25 ns on a VM): read it only for the kinds whose
  // start time is used (record times, ProxyStep waits, GPU calibration).
  int64_t now = (d.type & kTimedStarts) != 0 ? MonoNs() : 0;
  Slot* s = nullptr;
  switch (d.type) {
    case kSentinelProfileGroupApi:
      s = StartGroupApi(ctx, d, ts, now);
      break;
    case kSentinelProfileCollApi:
      s = StartApiChild(Kind::kCollApi, ctx, d, ts, now);
      break;
    case kSentinelProfileP2pApi:
      s = StartApiChild(Kind::kP2pApi, ctx, d, ts, now);
      break;
    case kSentinelProfileKernelLaunch:
      s = StartApiChild(Kind::kKernelLaunch, ctx, d, ts, now);
      break;
    case kSentinelProfileColl:
      s = StartColl(ctx, d, ts, now);
      break;
    case kSentinelProfileP2p:
      s = StartP2p(ctx, d, ts, now);
      break;
    case kSentinelProfileProxyOp: {
      Slot* parent = g->slots.AsSlot(d.parent);
      if (parent == nullptr || (KindOf(parent) != Kind::kColl && KindOf(parent) != Kind::kP2p)) {
        ts->Add(kCtrOrphanChildren);
        break;
      }
      s = StartCollChild(Kind::kProxyOp, parent, false, ts, now);
      break;
    }
    case kSentinelProfileProxyStep:
      s = StartHoldingChild(Kind::kProxyStep, Kind::kProxyOp, d, ctx, ts, now);
      break;
    case kSentinelProfileNetPlugin:
      s = StartHoldingChild(Kind::kNetPlugin, Kind::kProxyStep, d, ctx, ts, now);
      break;
    case kSentinelProfileCeSync:
      s = StartHoldingChild(Kind::kCeSync, Kind::kCeColl, d, ctx, ts, now);
      break;
    case kSentinelProfileCeBatch:
      s = StartHoldingChild(Kind::kCeBatch, Kind::kCeColl, d, ctx, ts, now);
      break;
    case kSentinelProfileGroup:
    case kSentinelProfileProxyCtrl: {
      Kind k = d.type == kSentinelProfileGroup ? Kind::kGroup : Kind::kProxyCtrl;
      s = g->slots.Claim(k, ts);
      if (s != nullptr) ResetSlot(s, ctx, nullptr, 1, now);
      break;
    }
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
  ThreadState* ts = ThreadStates::Current();
  if ((reinterpret_cast<uintptr_t>(handle) & 1) != 0) {  // slots are aligned: a KernelCh handle
    StopKernelCh(handle, ts);
    return;
  }
  CallbackMeter meter(ts);
  Slot* s = g->slots.AsSlot(handle);
  if (s == nullptr || s->state.load(std::memory_order_acquire) != SlotState::kLive) {
    ts->Add(kCtrStaleHandles);
    return;
  }
  // Repeated stops (e.g. NCCL's stale CollApi, §5.6.1) and stops of finished slots are counted
  // and ignored; see MarkStopped.
  RefDrop stopped = MarkStopped(s);
  if (stopped == RefDrop::kStale) {
    ts->Add(kCtrStaleHandles);
    return;
  }
  // The slot stays ours until OnLastRef (by us below, or by the last child): with the count at 0
  // no new child can reference it, and its parent is held until OnLastRef.
  switch (KindOf(s)) {
    case Kind::kProxyStep:
      StopProxyStep(s, MonoNs());
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
    Unref(s, ts);  // our own reference, after the stop's work above
  } else {
    AfterDrop(stopped, s, ts);
  }
}

void CoreRecordState(void* handle, int state, const SentinelEventStateArgs* args) noexcept {
  ThreadState* ts = ThreadStates::Current();
  if ((reinterpret_cast<uintptr_t>(handle) & 1) != 0) {  // slots are aligned: a KernelCh handle
    RecordKernelCh(handle, state, args, ts);
    return;
  }
  CallbackMeter meter(ts);
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
      uint8_t seen = s->step_states.load(std::memory_order_relaxed);
      if (state == kSentinelStateProxyStepSendGpuWait) {
        s->start_ns.store(MonoNs(), std::memory_order_relaxed);
        s->step_states.store(seen | kStepSawSendGpuWait, std::memory_order_relaxed);
      } else if (state == kSentinelStateProxyStepSendWait) {
        s->t_send_wait.store(MonoNs(), std::memory_order_relaxed);
        s->size_send.store(size, std::memory_order_relaxed);
        s->step_states.store(seen | kStepSawSendWait, std::memory_order_relaxed);
      } else if (state == kSentinelStateProxyStepRecvWait) {
        s->t_recv_wait.store(MonoNs(), std::memory_order_relaxed);
        s->step_states.store(seen | kStepSawRecvWait, std::memory_order_relaxed);
      } else if (state == kSentinelStateProxyStepRecvFlushWait) {
        s->t_recv_flush.store(MonoNs(), std::memory_order_relaxed);
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

void TurnOff(const char* where, const char* why) noexcept {
  if (g_gate.exchange(kGateOff, std::memory_order_relaxed) == kGateOff) return;
  if (g != nullptr) {
    g->turn_offs.fetch_add(1, std::memory_order_relaxed);
    if (int* m = g->mask_ptr.load(std::memory_order_relaxed)) {
      reinterpret_cast<std::atomic<int>*>(m)->store(0, std::memory_order_relaxed);
    }
  }
  Log(LogLevel::kWarn, "turned off for the rest of the process at %s: %s", where, why);
}

uint64_t TurnOffCount() noexcept {
  return g == nullptr ? 0 : g->turn_offs.load(std::memory_order_relaxed);
}

uint32_t CurrentEventMask() noexcept {
  return g == nullptr ? 0 : g->mask.load(std::memory_order_relaxed);
}

void* DummyContext() noexcept { return g_dummy_context; }

bool ContextIdentity(void* context, uint64_t* comm_hash, int* rank) noexcept {
  if (g == nullptr || !g->ready) return false;
  Context* ctx = g->contexts.AsContext(context);
  if (ctx == nullptr) return false;
  *comm_hash = ctx->comm_hash;
  *rank = ctx->rank;
  return true;
}

void SweepGrace(int64_t now_ns) noexcept {
  if (g == nullptr || !g->ready) return;
  ThreadState* ts = ThreadStates::Current();
  for (Kind k : {Kind::kColl, Kind::kP2p}) {
    Pool& pool = g->slots.pool(k);
    // As in CoreFinalize: slots never handed out hold no grace (and stay unfaulted).
    const uint32_t touched = pool.Touched();
    for (uint32_t i = 0; i < touched; ++i) {
      Slot* s = pool.begin + i;
      if (s->state.load(std::memory_order_acquire) != SlotState::kLive) continue;
      if (s->grace.load(std::memory_order_relaxed) == 0) continue;
      // acquire: pairs with the stop's acq_rel CAS. The stop stores stop_ns just after that
      // CAS, so stop_ns == 0 below catches a stop still in progress.
      if ((s->refs.load(std::memory_order_acquire) & kStoppedBit) == 0) continue;
      int64_t stop = s->stop_ns.load(std::memory_order_relaxed);
      if (stop == 0 || now_ns - stop < g->grace_ns) continue;
      ReleaseGrace(s, ts);
    }
  }
}

void SnapshotInFlight(std::vector<InFlightSample>* out) noexcept {
  out->clear();
  if (g == nullptr || !g->ready) return;
  bool kernel_ch = (g->mask.load(std::memory_order_relaxed) & kSentinelProfileKernelCh) != 0;
  bool out_of_memory = false;
  g->contexts.ForEachLive([&](Context* c) {
    if (out_of_memory) return;
    InFlightSample sample;
    sample.comm_hash = c->comm_hash;
    sample.rank = c->rank;
    sample.nranks = c->nranks;
    sample.pid = static_cast<uint32_t>(g->pid);
    sample.kernel_ch = kernel_ch;
    sample.snap = c->inflight.Read();
    try {
      out->push_back(sample);
    } catch (...) {
      out_of_memory = true;  // fewer records this drain, nothing else
    }
  });
}

namespace {

// Once per heartbeat: the budget's judgement, and the step it takes when over budget.
uint32_t JudgeBudget(int64_t now_ns, uint64_t callback_ns_total) noexcept {
  std::lock_guard<std::mutex> lock(g->budget_mu);
  if (!g->budget.Observe(now_ns, callback_ns_total))
    return static_cast<uint32_t>(g->budget.level());
  BudgetLevel level = g->budget.level();
  if (level >= BudgetLevel::kNoProxy) {
    // The mask is process-global in NCCL (§4.5): new events of every communicator stop coming.
    uint32_t mask = g->mask.load(std::memory_order_relaxed) &
                    ~(kProxyFamily | static_cast<uint32_t>(kSentinelProfileProxyCtrl));
    g->mask.store(mask, std::memory_order_relaxed);
    if (int* m = g->mask_ptr.load(std::memory_order_relaxed)) {
      reinterpret_cast<std::atomic<int>*>(m)->store(static_cast<int>(mask),
                                                    std::memory_order_relaxed);
    }
  }
  g->budget_level.store(static_cast<uint8_t>(level), std::memory_order_relaxed);
  Log(LogLevel::kWarn,
      "own overhead %.3f%% of the time exceeds SENTINEL_BUDGET=%.3f%%: degraded to step %u (%s)",
      g->budget.last_ratio() * 100.0, g->budget.fraction() * 100.0, static_cast<unsigned>(level),
      BudgetLevelName(level));
  return static_cast<uint32_t>(level);
}

}  // namespace

SentinelWireHeartbeat SnapshotCounters() noexcept {
  SentinelWireHeartbeat hb;
  memset(&hb, 0, sizeof(hb));
  hb.now_ns = MonoNs();
  if (g == nullptr || !g->ready) return hb;
  ThreadStates& st = ThreadStates::Get();
  hb.records_completed = st.Sum(kCtrRecordsCompleted);
  hb.records_dropped_ring = st.Sum(kCtrRecordsDroppedRing);
  hb.events_dropped_pool = st.Sum(kCtrEventsDroppedPool);
  hb.events_dropped_threads = st.Sum(kCtrEventsDroppedThreads);
  hb.stale_handles = st.Sum(kCtrStaleHandles) + st.Sum(kCtrOrphanChildren);
  hb.pxn_foreign = st.Sum(kCtrPxnForeign);
  hb.records_truncated = st.Sum(kCtrRecordsTruncated);
  hb.callback_ns_total = st.Sum(kCtrCallbackNs);
  hb.callbacks_total = st.Sum(kCtrCallbacks) + st.Sum(kCtrKernelChCallbacks);
  hb.records_dropped_sink = g->sink_drops.load(std::memory_order_relaxed);
  hb.pid = static_cast<uint32_t>(g->pid);
  hb.budget_level = JudgeBudget(hb.now_ns, hb.callback_ns_total);
  return hb;
}

void AddSinkDrops(uint64_t n) noexcept {
  if (g != nullptr) g->sink_drops.fetch_add(n, std::memory_order_relaxed);
}

}  // namespace sentinel::plugin
