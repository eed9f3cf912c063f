// The plugin core: pools, contexts, the per-event logic and record completion.
// See event_model.h for the lifetime rules and plugin/README.md for the completion rule.
#include "plugin/core/profiler_core.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <string>

#include "absl/base/attributes.h"

#include "plugin/base/env_config.h"
#include "plugin/base/log.h"
#include "plugin/base/no_destructor.h"
#include "plugin/base/raw_log.h"
#include "plugin/core/api_context.h"
#include "plugin/core/clock.h"
#include "plugin/core/drainer.h"
#include "plugin/core/event_mask.h"
#include "plugin/core/event_model.h"
#include "plugin/core/names.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin {

ABSL_CONST_INIT std::atomic<int> g_gate{kGateUninit};
const EventDesc kBlankEventDesc{};

namespace {

constexpr int kClaimProbes = 4;
constexpr uint32_t kCallbackSample = 256;  // a power of two
// Pool indices a thread takes from a pool's cursor at once (pools of >= 8 chunks only).
constexpr uint32_t kClaimChunk = 8;
constexpr int64_t kNoGpuStart = std::numeric_limits<int64_t>::max();
// Kinds whose start time is read later: Coll/P2p/CeColl (enqueue_ns, CE timing), CollApi/P2pApi
// (api_ns), KernelCh (GPU clock calibration). Not ProxyStep: NCCL records SendGPUWait (8) or
// RecvWait (10) right after a step's start, and the waits are timed from those states instead,
// which saves one clock read per network transfer.
constexpr uint32_t kTimedStarts = kSentinelProfileColl | kSentinelProfileP2p |
                                  kSentinelProfileCeColl | kSentinelProfileCollApi |
                                  kSentinelProfileP2pApi | kSentinelProfileKernelCh;
constexpr uint32_t kProxyFamily =
    kSentinelProfileProxyOp | kSentinelProfileProxyStep | kSentinelProfileNetPlugin;

struct Pool {
  Slot* begin = nullptr;
  uint32_t size = 0;
  Kind kind = Kind::kNone;
  alignas(64) std::atomic<uint64_t> cursor{0};
};

// Process-wide state, created at the first init and never destroyed (leaked on purpose: NCCL
// may call us from threads that outlive every communicator, and dlclose never unmaps us).
struct Globals {
  EnvConfig config;
  pid_t pid = 0;
  Slot* arena = nullptr;
  size_t arena_slots = 0;
  Pool pools[static_cast<int>(Kind::kCount)];
  Context* contexts = nullptr;
  uint32_t n_contexts = 0;
  std::atomic<uint64_t> ctx_cursor{0};
  std::atomic<int*> mask_ptr{nullptr};
  std::atomic<uint32_t> mask{0};
  std::atomic<uint64_t> turn_offs{0};
  std::atomic<uint64_t> sink_drops{0};
  int64_t grace_ns = 0;
  bool ready = false;  // pools and threads set up (false when disabled)
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

uint32_t PoolSizeFor(Kind k, uint32_t p) {
  switch (k) {
    case Kind::kGroupApi:
    case Kind::kCollApi:
    case Kind::kColl:
      return p;
    case Kind::kP2pApi:
    case Kind::kP2p:
    case Kind::kProxyOp:
    case Kind::kProxyStep:
    case Kind::kKernelCh:
      return 4 * p;
    case Kind::kNetPlugin:
      return 2 * p;
    case Kind::kProxyCtrl:
      return 64;
    case Kind::kKernelLaunch:
    case Kind::kGroup:
    case Kind::kCeColl:
    case Kind::kCeSync:
    case Kind::kCeBatch:
      return p / 2 > 16 ? p / 2 : 16;
    default:
      return 0;
  }
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
  if (gl->config.disable) {
    g = gl;
    g_gate.store(kGateOff, std::memory_order_relaxed);
    return;
  }
  // The handle arena: one anonymous mapping (zero pages, resident only once used).
  size_t total = 0;
  for (int k = 1; k < static_cast<int>(Kind::kCount); ++k) {
    total += PoolSizeFor(static_cast<Kind>(k), gl->config.pool_size);
  }
  size_t ctx_bytes = sizeof(Context) * gl->config.max_comms;
  void* arena = mmap(nullptr, total * sizeof(Slot), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void* ctxs = mmap(nullptr, ctx_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (arena == MAP_FAILED || ctxs == MAP_FAILED ||
      !ThreadStates::Get().Init(gl->config.rings, gl->config.ring_records)) {
    Log(LogLevel::kWarn, "cannot map the plugin's pools; the plugin stays off");
    g = gl;
    g_gate.store(kGateOff, std::memory_order_relaxed);
    return;
  }
  gl->arena = static_cast<Slot*>(arena);
  gl->arena_slots = total;
  size_t offset = 0;
  for (int k = 1; k < static_cast<int>(Kind::kCount); ++k) {
    Pool& pool = gl->pools[k];
    pool.kind = static_cast<Kind>(k);
    pool.size = PoolSizeFor(pool.kind, gl->config.pool_size);
    pool.begin = gl->arena + offset;
    offset += pool.size;
  }
  gl->contexts = static_cast<Context*>(ctxs);
  gl->n_contexts = gl->config.max_comms;
  gl->ready = true;
  pthread_atfork(nullptr, nullptr, &ChildAfterFork);
  atexit(&DrainerAtExit);
  g = gl;
  g_gate.store(kGateOn, std::memory_order_relaxed);
}

inline Kind KindOf(const Slot* s) {
  return static_cast<Kind>(s->tag.load(std::memory_order_relaxed) & 0xFF);
}

// Any pointer NCCL gives back: range + alignment + tag, before reading anything else.
inline Slot* AsSlot(void* p) {
  auto u = reinterpret_cast<uintptr_t>(p);
  auto b = reinterpret_cast<uintptr_t>(g->arena);
  if (u < b || u >= b + g->arena_slots * sizeof(Slot) || (u - b) % sizeof(Slot) != 0) {
    return nullptr;
  }
  auto* s = static_cast<Slot*>(p);
  // relaxed: the tag of a slot never changes once set (one pool = one kind).
  uint64_t tag = s->tag.load(std::memory_order_relaxed);
  return (tag & kSlotMagicMask) == kSlotMagic ? s : nullptr;
}

inline Slot* AsLiveSlotOfKind(void* p, Kind k) {
  Slot* s = AsSlot(p);
  if (s == nullptr || KindOf(s) != k) return nullptr;
  return s;
}

inline Context* AsContext(void* p) {
  auto u = reinterpret_cast<uintptr_t>(p);
  auto b = reinterpret_cast<uintptr_t>(g->contexts);
  if (u < b || u >= b + g->n_contexts * sizeof(Context) || (u - b) % sizeof(Context) != 0) {
    return nullptr;
  }
  auto* c = static_cast<Context*>(p);
  if (c->tag.load(std::memory_order_relaxed) != kContextTag) return nullptr;
  // acquire: pairs with the release in CoreInit that published the context's fields.
  if (c->state.load(std::memory_order_acquire) != kCtxLive) return nullptr;
  return c;
}

static_assert(static_cast<int>(Kind::kCount) <= kMaxPoolKinds, "claim chunks per kind");

// The next pool index for this thread. An owned thread state takes a chunk of consecutive indices
// with one fetch_add and hands them out without atomics; the shared overflow state (several
// writers) takes one index at a time. Either way indices advance in ring order, so slots are
// reused FIFO up to the chunk size.
inline uint64_t NextIndex(Pool& pool, int k, ThreadState* ts) {
  // relaxed: the cursor only spreads claimers over slots; the CAS in Claim owns the slot.
  if (ts->shared) return pool.cursor.fetch_add(1, std::memory_order_relaxed);
  if (ts->claim_left[k] == 0) {
    uint32_t chunk = pool.size >= 8 * kClaimChunk ? kClaimChunk : 1;
    ts->claim_next[k] = pool.cursor.fetch_add(chunk, std::memory_order_relaxed);
    ts->claim_left[k] = chunk;
  }
  --ts->claim_left[k];
  return ts->claim_next[k]++;
}

// FIFO claim: a stale pointer aliases a new event only after (about) a full wrap. A few probes
// skip a slot held by a long-lived event (e.g. a ProxyOp NCCL never stops, §5.5) instead of
// dropping.
inline Slot* Claim(Kind k, ThreadState* ts) {
  Pool& pool = g->pools[static_cast<int>(k)];
  for (int probe = 0; probe < kClaimProbes; ++probe) {
    uint64_t i = NextIndex(pool, static_cast<int>(k), ts) % pool.size;
    Slot* s = pool.begin + i;
    uint32_t expected = kSlotFree;
    // acquire: pairs with the release store that freed the slot, so its old users are done.
    if (s->state.load(std::memory_order_relaxed) == kSlotFree &&
        s->state.compare_exchange_strong(expected, kSlotLive, std::memory_order_acquire,
                                         std::memory_order_relaxed)) {
      s->tag.store(TagFor(k), std::memory_order_relaxed);  // relaxed: constant per slot
      if (k == Kind::kColl || k == Kind::kP2p) {
        // The slot this thread most likely claims next (FIFO): start loading the three lines a
        // Coll/P2p uses now, so that claim does not wait for cache misses. (Measured: helps
        // Coll/P2p; costs the one-line child kinds more than it saves.)
        const char* next = reinterpret_cast<const char*>(pool.begin + (i + 1) % pool.size);
        __builtin_prefetch(next, 1, 3);
        __builtin_prefetch(next + 64, 1, 3);
        __builtin_prefetch(next + 128, 1, 3);
      }
      return s;
    }
  }
  ts->Add(kCtrEventsDroppedPool);
  return nullptr;
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
  s->kch_started.store(0, std::memory_order_relaxed);
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
  s->grace.store(0, std::memory_order_relaxed);
  ResetCompletionState(s);
}

// Adds a child reference unless the parent already finished (refs == 0).
inline bool TryRef(Slot* p) {
  uint32_t r = p->refs.load(std::memory_order_relaxed);
  do {
    if ((r & kRefCountMask) == 0) return false;
    // acq_rel: orders the child's later updates of the parent before the final release.
  } while (!p->refs.compare_exchange_weak(r, r + 1, std::memory_order_acq_rel,
                                          std::memory_order_relaxed));
  return true;
}

void OnLastRef(Slot* s, ThreadState* ts, bool emit);

// The refs value after dropping one reference from `r`: the last reference also sets kDoneBit,
// so "finished" and "who emits the record" are decided by the same CAS.
inline uint32_t AfterUnref(uint32_t r) {
  return (r & kRefCountMask) == 1 ? ((r - 1) | kDoneBit) : r - 1;
}

inline void Unref(Slot* s, ThreadState* ts) {
  uint32_t r = s->refs.load(std::memory_order_relaxed);
  do {
    if ((r & kRefCountMask) == 0) {
      ts->Add(kCtrStaleHandles);
      return;
    }
    // acq_rel: the thread that drops the last reference sees every child's accumulations.
  } while (!s->refs.compare_exchange_weak(r, AfterUnref(r), std::memory_order_acq_rel,
                                          std::memory_order_relaxed));
  // The record is emitted unless finalize already emitted it (truncated).
  if ((r & kRefCountMask) == 1) OnLastRef(s, ts, (r & kDoneBit) == 0);
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

// Once per collective: builds the record directly in the thread's ring slot. Every field is
// written exactly once (no memset: the record has no padding, and a `rep stos` start-up cost more
// than the stores).
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
  static_assert(sizeof(SentinelWireCollRecord) == 136, "every field is assigned below");
  Context* ctx = s->ctx.load(std::memory_order_relaxed);
  SentinelWireCollRecord& r = *slot;
  r.comm_hash = ctx != nullptr ? ctx->comm_hash : 0;
  r.rank = ctx != nullptr ? ctx->rank : 0;
  r.nranks = ctx != nullptr ? ctx->nranks : 0;
  r.seq = s->seq;
  r.bytes = s->bytes;
  r.api_ns = s->api_ns;
  int64_t start = s->start_ns.load(std::memory_order_relaxed);
  r.enqueue_ns = start;
  r.peer = s->peer;
  r.root = s->root;
  r.func = s->func.load(std::memory_order_relaxed);
  r.datatype = s->datatype.load(std::memory_order_relaxed);
  r.algo = s->algo;
  r.proto = s->proto;
  r.nchannels = s->nchannels;
  r.reserved0 = 0;
  r.pid = static_cast<uint32_t>(g->pid);
  r.reserved1 = 0;
  uint16_t flags = s->flags;
  int64_t gpu_start = 0;
  int64_t gpu_end = 0;
  if (KindOf(s) == Kind::kCeColl) {
    // CE collectives have no GPU timers: the plugin times them on the host (start..stop).
    int64_t stop = s->stop_ns.load(std::memory_order_relaxed);
    if (stop != 0) {
      gpu_start = start;
      gpu_end = stop;
      flags |= kSentinelCollGpuTimeValid;
    }
  } else {
    int64_t gs = s->gpu_start_raw.load(std::memory_order_relaxed);
    int64_t ge = s->gpu_end_raw.load(std::memory_order_relaxed);
    if (ctx != nullptr && gs != kNoGpuStart && ge != 0 && ctx->calib.Valid()) {
      gpu_start = ctx->calib.ToHost(static_cast<uint64_t>(gs));
      gpu_end = ctx->calib.ToHost(static_cast<uint64_t>(ge));
      flags |= kSentinelCollGpuTimeValid;
    }
  }
  r.gpu_start_ns = gpu_start;
  r.gpu_end_ns = gpu_end;
  if (s->proxy_steps.load(std::memory_order_relaxed) != 0) {
    r.proxy_send_wait_ns = s->send_wait_ns.load(std::memory_order_relaxed);
    r.proxy_send_xfer_ns = s->send_xfer_ns.load(std::memory_order_relaxed);
    r.proxy_send_bytes = s->send_bytes.load(std::memory_order_relaxed);
    r.proxy_recv_wait_ns = s->recv_wait_ns.load(std::memory_order_relaxed);
    r.proxy_recv_xfer_ns = s->recv_xfer_ns.load(std::memory_order_relaxed);
    r.proxy_recv_bytes = s->recv_bytes.load(std::memory_order_relaxed);
    flags |= kSentinelCollProxyValid;
  } else {
    r.proxy_send_wait_ns = 0;
    r.proxy_send_xfer_ns = 0;
    r.proxy_send_bytes = 0;
    r.proxy_recv_wait_ns = 0;
    r.proxy_recv_xfer_ns = 0;
    r.proxy_recv_bytes = 0;
  }
  if (truncated) flags |= kSentinelCollTruncated;
  r.flags = flags;
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
  s->state.store(kSlotFree, std::memory_order_release);
  // Only Ref-holding kinds keep a parent reference (see CoreStartEvent).
  if (parent != nullptr && k != Kind::kColl && k != Kind::kP2p) Unref(parent, ts);
}

// Decides, once, whether a GroupApi's P2pApi pieces form an AlltoAll (see README).
void RecoverGroupFunc(Slot* grp) {
  if (grp->recovered.load(std::memory_order_relaxed) != 0) return;
  uint32_t flags = grp->group_flags.load(std::memory_order_relaxed);
  uint32_t ns = grp->n_send.load(std::memory_order_relaxed);
  uint32_t nr = grp->n_recv.load(std::memory_order_relaxed);
  Context* ctx = grp->first_ctx.load(std::memory_order_relaxed);
  uint32_t result = kNoRecovery;
  if (ctx != nullptr && (flags & (kGroupHasColl | kGroupNotUniform | kGroupMixedCtx)) == 0 &&
      ctx->nranks >= 2 && ns == static_cast<uint32_t>(ctx->nranks) && nr == ns) {
    result = 1u + kSentinelFuncAlltoAll;
  }
  uint32_t expected = 0;
  // relaxed: the value is read by P2p starts that NCCL orders after this (state 24 / stop).
  if (grp->recovered.compare_exchange_strong(expected, result, std::memory_order_relaxed) &&
      result != kNoRecovery) {
    grp->recovered_seq.store(
        ctx->recovered_seq[kSentinelFuncAlltoAll].fetch_add(1, std::memory_order_relaxed),
        std::memory_order_relaxed);
  }
}

// ---- per-kind starts ------------------------------------------------------------------------

Slot* StartGroupApi(Context* ctx, const EventDesc& d, ThreadState* ts, int64_t now) {
  Slot* s = Claim(Kind::kGroupApi, ts);
  if (s == nullptr) return nullptr;
  ResetSlot(s, ctx, nullptr, 1, now);
  ResetRecordFields(s);
  s->graph_captured.store(d.graph_captured ? 1 : 0, std::memory_order_relaxed);
  s->n_send.store(0, std::memory_order_relaxed);
  s->n_recv.store(0, std::memory_order_relaxed);
  s->group_flags.store(0, std::memory_order_relaxed);
  s->recovered.store(0, std::memory_order_relaxed);
  s->first_count.store(0, std::memory_order_relaxed);
  s->recovered_seq.store(0, std::memory_order_relaxed);
  s->first_ctx.store(nullptr, std::memory_order_relaxed);
  s->api_override.store(kSentinelFuncUnknown, std::memory_order_relaxed);
  return s;
}

// CollApi, P2pApi, KernelLaunch: children of GroupApi, holding it until they stop.
Slot* StartApiChild(Kind k, Context* ctx, const EventDesc& d, ThreadState* ts, int64_t now) {
  Slot* grp = AsLiveSlotOfKind(d.parent, Kind::kGroupApi);
  if (grp != nullptr && !TryRef(grp)) grp = nullptr;
  Slot* s = Claim(k, ts);
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
    grp->group_flags.fetch_or(kGroupHasColl, std::memory_order_relaxed);
    return s;
  }
  // P2pApi: the interposer's current API wins; else feed the AlltoAll heuristic.
  uint8_t api = CurrentApiForThread();
  if (api != kSentinelFuncUnknown && api != kSentinelFuncSend && api != kSentinelFuncRecv) {
    s->api_override.store(api, std::memory_order_relaxed);
    uint32_t expected = 0;
    if (grp->recovered.compare_exchange_strong(expected, 1u + api, std::memory_order_relaxed)) {
      grp->recovered_seq.store(ctx->recovered_seq[api].fetch_add(1, std::memory_order_relaxed),
                               std::memory_order_relaxed);
    }
  }
  if (s->func.load(std::memory_order_relaxed) == kSentinelFuncSend) {
    grp->n_send.fetch_add(1, std::memory_order_relaxed);
  } else if (s->func.load(std::memory_order_relaxed) == kSentinelFuncRecv) {
    grp->n_recv.fetch_add(1, std::memory_order_relaxed);
  }
  uint32_t gf = grp->group_flags.load(std::memory_order_relaxed);
  if ((gf & kGroupHasFirst) == 0) {
    grp->first_count.store(d.count, std::memory_order_relaxed);
    grp->datatype.store(s->datatype.load(std::memory_order_relaxed), std::memory_order_relaxed);
    grp->first_ctx.store(ctx, std::memory_order_relaxed);
    grp->group_flags.fetch_or(kGroupHasFirst, std::memory_order_relaxed);
  } else {
    if (grp->first_count.load(std::memory_order_relaxed) != d.count ||
        grp->datatype.load(std::memory_order_relaxed) !=
            s->datatype.load(std::memory_order_relaxed)) {
      grp->group_flags.fetch_or(kGroupNotUniform, std::memory_order_relaxed);
    }
    if (grp->first_ctx.load(std::memory_order_relaxed) != ctx) {
      grp->group_flags.fetch_or(kGroupMixedCtx, std::memory_order_relaxed);
    }
  }
  return s;
}

// The reference count a new Coll/P2p starts with, from the mask NCCL snapshots for it.
inline void SetCompletionRefs(Slot* s, bool n_channels_valid) {
  uint32_t mask = g->mask.load(std::memory_order_relaxed);
  uint32_t kch = 0;
  if ((mask & kSentinelProfileKernelCh) != 0 && n_channels_valid) kch = s->nchannels;
  s->kch_expected = kch;
  uint32_t grace = 0;
  if (kch == 0 && (mask & (kProxyFamily | kSentinelProfileKernelCh)) != 0) grace = 1;
  s->grace.store(grace, std::memory_order_relaxed);
  s->refs.store(1 + kch + grace, std::memory_order_relaxed);
}

Slot* StartColl(Context* ctx, const EventDesc& d, ThreadState* ts, int64_t now) {
  uint8_t func = FuncFromString(d.func);
  // The ordinal is taken even when no slot is free, so that this rank's count of collectives
  // stays comparable with its peers' (a later completion moves `completed` past it).
  uint64_t ordinal = ctx->inflight.OnEnqueue(now, d.seq, func);
  Slot* s = Claim(Kind::kColl, ts);
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
  Slot* api = d.parent != nullptr ? AsLiveSlotOfKind(d.parent, Kind::kCollApi) : nullptr;
  if (api != nullptr && api->func.load(std::memory_order_relaxed) == func) {
    api_ns = api->start_ns.load(std::memory_order_relaxed);
    flags |= kSentinelCollApiTimeValid;
    if (api->graph_captured.load(std::memory_order_relaxed)) flags |= kSentinelCollGraphCaptured;
  }
  s->api_ns = api_ns;
  s->flags = flags;
  SetCompletionRefs(s, true);  // also sets kch_expected, grace and refs (clearing the bits)
  return s;
}

Slot* StartP2p(Context* ctx, const EventDesc& d, ThreadState* ts, int64_t now) {
  Slot* s = Claim(Kind::kP2p, ts);
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
  Slot* api = AsLiveSlotOfKind(d.parent, Kind::kP2pApi);
  if (api != nullptr && api->func.load(std::memory_order_relaxed) == func) {
    s->api_ns = api->start_ns.load(std::memory_order_relaxed);
    s->flags |= kSentinelCollApiTimeValid;
    if (api->graph_captured.load(std::memory_order_relaxed)) s->flags |= kSentinelCollGraphCaptured;
    Slot* grp = api->parent.load(std::memory_order_relaxed) != nullptr &&
                        KindOf(api->parent.load(std::memory_order_relaxed)) == Kind::kGroupApi
                    ? api->parent.load(std::memory_order_relaxed)
                    : nullptr;
    if (grp != nullptr) {
      if (api->api_override.load(std::memory_order_relaxed) == kSentinelFuncUnknown)
        RecoverGroupFunc(grp);
      uint32_t rec = grp->recovered.load(std::memory_order_relaxed);
      if (rec != 0 && rec != kNoRecovery) {
        s->func.store(static_cast<uint8_t>(rec - 1), std::memory_order_relaxed);
        s->seq = grp->recovered_seq.load(std::memory_order_relaxed);
        s->flags |= kSentinelCollFuncRecovered;
        recovered = true;
      }
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
  SetCompletionRefs(s, d.n_channels_valid);
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
  Slot* s = Claim(k, ts);
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
  Slot* parent = AsLiveSlotOfKind(d.parent, parent_kind);
  if (parent != nullptr && !TryRef(parent)) {
    ts->Add(kCtrOrphanChildren);
    parent = nullptr;
  }
  Slot* s = Claim(k, ts);
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

// Times one callback in kCallbackSample (two extra clock reads, ~50 ns here, so sampling rarely
// keeps their average cost under 0.5 ns), so callback_ns_total is an estimate.
class CallbackMeter {
 public:
  explicit CallbackMeter(ThreadState* ts) : ts_(ts) {
    ts->Add(kCtrCallbacks);
    if (!ts->shared && (++ts->tick & (kCallbackSample - 1)) == 0) t0_ = MonoNs();
  }
  ~CallbackMeter() {
    if (t0_ != 0) ts_->Add(kCtrCallbackNs, static_cast<uint64_t>(MonoNs() - t0_) * kCallbackSample);
  }
  CallbackMeter(const CallbackMeter&) = delete;
  CallbackMeter& operator=(const CallbackMeter&) = delete;

 private:
  ThreadState* ts_;
  int64_t t0_ = 0;
};

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
  // Claim a context (FIFO over the table; a finalized one is reused only after a full wrap).
  Context* ctx = nullptr;
  for (uint32_t probe = 0; probe < g->n_contexts && ctx == nullptr; ++probe) {
    uint64_t i = g->ctx_cursor.fetch_add(1, std::memory_order_relaxed) % g->n_contexts;
    Context* c = g->contexts + i;
    for (uint32_t st : {static_cast<uint32_t>(kCtxFree), static_cast<uint32_t>(kCtxFinalized)}) {
      uint32_t expected = st;
      // relaxed: the fields are published by the release store of kCtxLive below.
      if (c->state.compare_exchange_strong(expected, 3u, std::memory_order_relaxed)) {
        ctx = c;
        break;
      }
    }
  }
  if (ctx == nullptr) {
    SENTINEL_LOG_ONCE(LogLevel::kWarn,
                      "more than %u live communicators; extra ones are not "
                      "profiled (SENTINEL_MAX_COMMS)",
                      g->n_contexts);
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
  ctx->tag.store(kContextTag, std::memory_order_relaxed);
  ctx->state.store(kCtxLive, std::memory_order_release);  // release: publishes the fields above

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
  Context* ctx = AsContext(context);
  if (ctx == nullptr) return;
  ThreadState* ts = ThreadStates::Current();
  // Records still waiting for children are emitted now, marked truncated.
  for (Kind k : {Kind::kColl, Kind::kP2p, Kind::kCeColl}) {
    Pool& pool = g->pools[static_cast<int>(k)];
    for (uint32_t i = 0; i < pool.size; ++i) {
      Slot* s = pool.begin + i;
      if (s->state.load(std::memory_order_acquire) != kSlotLive) continue;
      if (s->ctx.load(std::memory_order_relaxed) != ctx) continue;
      // Claim the record by setting kDoneBit while references remain; if the count already hit 0
      // (or the bit is set) the last reference emits it. acq_rel: pairs with the children's
      // acq_rel refcount updates, so their accumulations so far are visible.
      uint32_t r = s->refs.load(std::memory_order_relaxed);
      bool claimed = false;
      while ((r & kDoneBit) == 0 && (r & kRefCountMask) != 0) {
        if (s->refs.compare_exchange_weak(r, r | kDoneBit, std::memory_order_acq_rel,
                                          std::memory_order_relaxed)) {
          claimed = true;
          break;
        }
      }
      if (claimed) BuildAndPush(s, true, ts);
    }
  }
  uint32_t expected = kCtxLive;
  // release: pairs with AsContext's acquire; later events for this context are ignored.
  if (!ctx->state.compare_exchange_strong(expected, kCtxFinalized, std::memory_order_release,
                                          std::memory_order_relaxed)) {
    return;
  }
  DrainerOnCommEnd(ctx->comm_hash, ctx->rank);
}

void CoreStartEvent(void* context, void** handle, const EventDesc& d) noexcept {
  ThreadState* ts = ThreadStates::Current();
  CallbackMeter meter(ts);
  *handle = nullptr;
  // PXN (§5.5): a ProxyOp of another process carries that process's pointers. Check the pid
  // before touching context or parent.
  if (d.type == kSentinelProfileProxyOp && d.pid != g->pid) {
    ts->Add(kCtrPxnForeign);
    return;
  }
  Context* ctx = AsContext(context);
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
      Slot* parent = AsSlot(d.parent);
      if (parent == nullptr || (KindOf(parent) != Kind::kColl && KindOf(parent) != Kind::kP2p)) {
        ts->Add(kCtrOrphanChildren);
        break;
      }
      s = StartCollChild(Kind::kProxyOp, parent, false, ts, now);
      break;
    }
    case kSentinelProfileKernelCh: {
      Slot* parent = AsSlot(d.parent);
      if (parent == nullptr || (KindOf(parent) != Kind::kColl && KindOf(parent) != Kind::kP2p) ||
          parent->state.load(std::memory_order_acquire) != kSlotLive) {
        ts->Add(kCtrOrphanChildren);
        break;
      }
      // Only a Coll/P2p that expects KernelCh children (KernelCh in the mask) reserved
      // references for them; otherwise skip the read-modify-write.
      bool reserved = false;
      if (parent->kch_expected != 0) {
        // relaxed: only hands out distinct indices; the refcount orders the rest.
        reserved =
            parent->kch_started.fetch_add(1, std::memory_order_relaxed) < parent->kch_expected;
      }
      s = StartCollChild(Kind::kKernelCh, parent, reserved, ts, now);
      // The collective's kernel runs (P2p ordinals are 0: not counted). The parent's fields are
      // stable while this child holds a reference.
      if (s != nullptr && parent->ordinal != 0) ctx->inflight.OnGpuStart(parent->ordinal);
      if (s != nullptr && d.p_timer != 0) {
        ctx->calib.Observe(now, d.p_timer);
        AtomicMin(parent->gpu_start_raw, static_cast<int64_t>(d.p_timer));
      }
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
      s = Claim(k, ts);
      if (s != nullptr) ResetSlot(s, ctx, nullptr, 1, now);
      break;
    }
    case kSentinelProfileCeColl: {
      s = Claim(Kind::kCeColl, ts);
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
  CallbackMeter meter(ts);
  Slot* s = AsSlot(handle);
  if (s == nullptr || s->state.load(std::memory_order_acquire) != kSlotLive) {
    ts->Add(kCtrStaleHandles);
    return;
  }
  // One CAS marks the event stopped (the first stop wins; repeated stops, e.g. NCCL's stale
  // CollApi (§5.6.1), and stops of finished slots are counted and ignored) and, when no child
  // holds a reference (the common case), also drops our own reference. acq_rel: as in Unref, the
  // thread that drops the last reference sees every child's accumulations.
  uint32_t r = s->refs.load(std::memory_order_relaxed);
  uint32_t next;
  do {
    if ((r & kStoppedBit) != 0 || (r & kRefCountMask) == 0) {
      ts->Add(kCtrStaleHandles);
      return;
    }
    // Sole reference: drop it now (which also sets kDoneBit); else only mark it stopped and drop
    // ours after the stop's work below.
    next = (r & kRefCountMask) == 1 ? AfterUnref(r | kStoppedBit) : (r | kStoppedBit);
  } while (!s->refs.compare_exchange_weak(r, next, std::memory_order_acq_rel,
                                          std::memory_order_relaxed));
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
  if ((r & kRefCountMask) == 1) {
    OnLastRef(s, ts, (r & kDoneBit) == 0);
  } else {
    Unref(s, ts);
  }
}

void CoreRecordState(void* handle, int state, const SentinelEventStateArgs* args) noexcept {
  ThreadState* ts = ThreadStates::Current();
  CallbackMeter meter(ts);
  Slot* s = AsSlot(handle);
  if (s == nullptr || s->state.load(std::memory_order_acquire) != kSlotLive ||
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
  Context* ctx = AsContext(context);
  if (ctx == nullptr) return false;
  *comm_hash = ctx->comm_hash;
  *rank = ctx->rank;
  return true;
}

void SweepGrace(int64_t now_ns) noexcept {
  if (g == nullptr || !g->ready) return;
  ThreadState* ts = ThreadStates::Current();
  for (Kind k : {Kind::kColl, Kind::kP2p}) {
    Pool& pool = g->pools[static_cast<int>(k)];
    for (uint32_t i = 0; i < pool.size; ++i) {
      Slot* s = pool.begin + i;
      if (s->state.load(std::memory_order_acquire) != kSlotLive) continue;
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
  // Only contexts ever claimed: the claim cursor bounds them (each claim advances it).
  uint64_t used = g->ctx_cursor.load(std::memory_order_relaxed);
  uint32_t n = used < g->n_contexts ? static_cast<uint32_t>(used) : g->n_contexts;
  bool kernel_ch = (g->mask.load(std::memory_order_relaxed) & kSentinelProfileKernelCh) != 0;
  for (uint32_t i = 0; i < n; ++i) {
    Context* c = g->contexts + i;
    // acquire: pairs with CoreInit's release of kCtxLive (identity fields and Reset()).
    if (c->state.load(std::memory_order_acquire) != kCtxLive) continue;
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
      return;  // out of memory: fewer records this drain, nothing else
    }
  }
}

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
  hb.callbacks_total = st.Sum(kCtrCallbacks);
  hb.records_dropped_sink = g->sink_drops.load(std::memory_order_relaxed);
  hb.pid = static_cast<uint32_t>(g->pid);
  return hb;
}

void AddSinkDrops(uint64_t n) noexcept {
  if (g != nullptr) g->sink_drops.fetch_add(n, std::memory_order_relaxed);
}

}  // namespace sentinel::plugin
