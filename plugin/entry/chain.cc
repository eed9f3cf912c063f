// The chained second profiler plugin (chain.h). Slow paths (load, init, finalize) may lock and
// log; start/stop/record take no lock, never allocate and never log.
#include "plugin/entry/chain.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "absl/base/attributes.h"

#include "common/sentinel_env.h"
#include "plugin/base/log.h"
#include "plugin/base/plugin_dlopen.h"
#include "plugin/base/status.h"
#include "plugin/entry/common_shims.h"

extern "C" {
extern const SentinelProfilerV4 ncclProfiler_v4;
extern const SentinelProfilerV5 ncclProfiler_v5;
extern const SentinelProfilerV6 ncclProfiler_v6;
}

namespace sentinel::plugin {

ABSL_CONST_INIT std::atomic<bool> g_chain_on{false};

namespace {

constexpr int kMaxContexts = 1024;
// Pair slots are reused in FIFO order, so a stale handle (NCCL stops its old CollApi again,
// docs/nccl-facts.md "5.6 Pitfalls" item 1) still maps to its own pair until the cursor wraps.
// Plain .bss: untouched pages cost nothing.
constexpr uint32_t kSlots = 1u << 16;
constexpr int kClaimProbes = 16;

enum SlotState : uint32_t { kSlotFree = 0, kSlotLive = 1, kSlotStopped = 2 };

struct alignas(32) PairSlot {
  std::atomic<uint32_t> state{kSlotFree};
  std::atomic<void*> own{nullptr};
  std::atomic<void*> theirs{nullptr};
};

struct alignas(64) ChainContext {
  std::atomic<bool> used{false};
  void* own = nullptr;
  void* theirs = nullptr;
};

// The chained plugin's table, copied at load (NCCL's adapters copy it too,
// docs/nccl-facts.md "3.1 The exported symbol").
struct Target {
  int version = 0;  // the table we use: 4, 5 or 6
  const char* name = nullptr;
  SentinelProfilerV4 v4{};
  SentinelProfilerV6 v6{};  // v5 tables are stored here too (same types)
  SentinelNcclResult (*stop)(void*) = nullptr;
  SentinelNcclResult (*record)(void*, SentinelNcclEventState, SentinelEventStateArgs*) = nullptr;
  SentinelNcclResult (*finalize)(void*) = nullptr;
};

ABSL_CONST_INIT PairSlot g_slots[kSlots] = {};
ABSL_CONST_INIT ChainContext g_contexts[kMaxContexts] = {};
ABSL_CONST_INIT std::atomic<uint64_t> g_slot_cursor{0};
ABSL_CONST_INIT Target g_target = {};  // written once under g_load_mu before g_chain_on is set
ABSL_CONST_INIT int g_host_version = 0;
ABSL_CONST_INIT pid_t g_pid = 0;
// The two private activation masks; NCCL's int gets their union.
ABSL_CONST_INIT int g_own_mask = 0;
ABSL_CONST_INIT int g_their_mask = 0;
ABSL_CONST_INIT std::atomic<uint64_t> g_their_errors{0};
ABSL_CONST_INIT std::atomic<uint64_t> g_slots_exhausted{0};
ABSL_CONST_INIT std::atomic<uint64_t> g_contexts_exhausted{0};

ABSL_CONST_INIT std::mutex g_load_mu;
ABSL_CONST_INIT bool g_load_decided = false;

uint32_t LoadMask(int* m) {
  // relaxed: the same rule NCCL applies to its own mask
  // (docs/nccl-facts.md "4.5 The activation mask").
  return static_cast<uint32_t>(
      reinterpret_cast<std::atomic<int>*>(m)->load(std::memory_order_relaxed));
}

PairSlot* FindSlot(void* h) {
  auto p = reinterpret_cast<uintptr_t>(h);
  auto base = reinterpret_cast<uintptr_t>(&g_slots[0]);
  if (p < base || p >= base + sizeof(g_slots) || (p - base) % sizeof(PairSlot) != 0) return nullptr;
  return reinterpret_cast<PairSlot*>(h);
}

ChainContext* FindContext(void* c) {
  auto p = reinterpret_cast<uintptr_t>(c);
  auto base = reinterpret_cast<uintptr_t>(&g_contexts[0]);
  if (p < base || p >= base + sizeof(g_contexts) || (p - base) % sizeof(ChainContext) != 0) {
    return nullptr;
  }
  return reinterpret_cast<ChainContext*>(c);
}

// A free or stopped slot near the cursor, or null (the chained plugin then misses the event).
PairSlot* ClaimSlot(void* own, void* theirs) {
  uint64_t start = g_slot_cursor.fetch_add(1, std::memory_order_relaxed);
  for (int i = 0; i < kClaimProbes; ++i) {
    PairSlot& s = g_slots[(start + static_cast<uint64_t>(i)) % kSlots];
    uint32_t st = s.state.load(std::memory_order_relaxed);
    if (st == kSlotLive) continue;
    if (!s.state.compare_exchange_strong(st, kSlotLive, std::memory_order_relaxed)) continue;
    s.own.store(own, std::memory_order_relaxed);
    s.theirs.store(theirs, std::memory_order_relaxed);
    return &s;
  }
  g_slots_exhausted.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

void CountTheirResult(SentinelNcclResult rc) {
  if (rc != kSentinelNcclSuccess) g_their_errors.fetch_add(1, std::memory_order_relaxed);
}

// Calls into the chained plugin: its errors and exceptions stop here.
template <typename Fn>
void CallTheirs(Fn&& fn) noexcept {
  try {
    CountTheirResult(fn());
  } catch (...) {
    g_their_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

// Splits a handle NCCL gave back (a parent) into each side's handle.
void SplitHandle(void* h, void** own, void** theirs) {
  if (PairSlot* s = FindSlot(h)) {
    *own = s->own.load(std::memory_order_relaxed);
    *theirs = s->theirs.load(std::memory_order_relaxed);
  } else {
    *own = h;           // the core's handle, unchanged
    *theirs = nullptr;  // the chained plugin never saw that event
  }
}

// The handle NCCL gets for an event both, one or neither side holds.
void PublishHandle(void** handle, void* own_h, void* their_h) {
  if (their_h == nullptr) {
    *handle = own_h;
    return;
  }
  PairSlot* s = ClaimSlot(own_h, their_h);
  if (s != nullptr) {
    *handle = s;
    return;
  }
  // No slot: keep our data; the chained plugin's event is never stopped (counted).
  *handle = own_h;
}

// Loads the plugin SENTINEL_CHAIN_PROFILER names (`value`) and takes its table for host ABI
// `version`. kUnavailable: it does not load (the message says what was tried and dlerror's
// word); kNotFound: it has no usable table (or it is sentinel itself).
Status LoadTarget(const char* value, int version) {
  char tried[1100];
  void* dl = DlopenLikeNccl(value, "nccl-profiler", tried, sizeof(tried));
  if (dl == nullptr) {
    const char* err = dlerror();
    return Status::Format(StatusCode::kUnavailable, "cannot load (tried %s): %s", tried,
                          err != nullptr ? err : "unknown error");
  }
  Target t;
  if (version == 4) {
    const auto* v4 = static_cast<const SentinelProfilerV4*>(dlsym(dl, "ncclProfiler_v4"));
    if (v4 == &ncclProfiler_v4) v4 = nullptr;  // ourselves: never chain to our own table
    if (v4 != nullptr) {
      t.version = 4;
      t.v4 = *v4;
      t.name = v4->name;
      t.stop = v4->stop_event;
      t.record = v4->record_event_state;
      t.finalize = v4->finalize;
    }
  } else {
    // A v6 host can chain a v5-only plugin: same descriptor layout; CE events are not forwarded.
    const char* names[] = {version == 6 ? "ncclProfiler_v6" : "ncclProfiler_v5", "ncclProfiler_v5"};
    for (const char* sym : names) {
      const auto* tab = static_cast<const SentinelProfilerV6*>(dlsym(dl, sym));
      if (tab == &ncclProfiler_v6 ||
          tab == reinterpret_cast<const SentinelProfilerV6*>(&ncclProfiler_v5)) {
        tab = nullptr;
      }
      if (tab == nullptr) continue;
      t.version = sym[strlen(sym) - 1] - '0';
      t.v6 = *tab;
      t.name = tab->name;
      t.stop = tab->stop_event;
      t.record = tab->record_event_state;
      t.finalize = tab->finalize;
      break;
    }
  }
  if (t.version == 0 || t.stop == nullptr || t.record == nullptr || t.finalize == nullptr ||
      (t.version == 4 ? (t.v4.init == nullptr || t.v4.start_event == nullptr)
                      : (t.v6.init == nullptr || t.v6.start_event == nullptr))) {
    // The library stays loaded: dlclose of an unknown plugin is not worth the risk.
    return Status::Format(StatusCode::kNotFound,
                          "no usable ncclProfiler_v%d table (or it is sentinel itself)", version);
  }
  g_target = t;
  Log(LogLevel::kInfo, "chained profiler plugin %s (%s) as v%d", t.name != nullptr ? t.name : "?",
      value, t.version);
  return Status::Ok();
}

}  // namespace

bool NcclEmits(uint32_t mask, uint32_t type, int version) noexcept {
  constexpr uint32_t kNet = kSentinelProfileNetPlugin;
  constexpr uint32_t kProxy = kSentinelProfileProxyOp | kSentinelProfileProxyStep | kNet;
  constexpr uint32_t kBelowColl = kProxy | kSentinelProfileKernelCh;
  constexpr uint32_t kCe =
      kSentinelProfileCeColl | kSentinelProfileCeSync | kSentinelProfileCeBatch;
  uint32_t row = type;
  switch (type) {
    case kSentinelProfileGroupApi:
      row =
          (0xFFFu & ~static_cast<uint32_t>(kSentinelProfileProxyCtrl)) | (version >= 6 ? kCe : 0u);
      break;
    case kSentinelProfileCollApi:
      row = kSentinelProfileCollApi | kSentinelProfileColl | kBelowColl;
      break;
    case kSentinelProfileP2pApi:
      row = kSentinelProfileP2pApi | kSentinelProfileP2p | kBelowColl;
      break;
    case kSentinelProfileGroup:
      row = kSentinelProfileGroup | kSentinelProfileColl | kSentinelProfileP2p | kBelowColl;
      break;
    case kSentinelProfileColl:
    case kSentinelProfileP2p:
      row = type | kBelowColl;
      break;
    case kSentinelProfileProxyOp:
      row = kProxy;
      break;
    case kSentinelProfileProxyStep:
      row = kSentinelProfileProxyStep | kNet;
      break;
    case kSentinelProfileCeColl:
      row = kCe;
      break;
    default:
      break;  // KernelCh, NetPlugin, ProxyCtrl, KernelLaunch, CeSync, CeBatch: their own bit
  }
  return (mask & row) != 0;
}

bool ChainRequested(int version) noexcept {
  if (ChainOn()) return true;
  try {
    std::lock_guard<std::mutex> lock(g_load_mu);
    if (g_load_decided) return ChainOn();
    g_load_decided = true;
    const char* value = rules::ProcessSentinelEnv().Text(rules::Var::kChainProfiler);
    if (value == nullptr || value[0] == '\0') return false;
    const Status loaded = LoadTarget(value, version);
    if (!loaded.ok()) {
      Log(LogLevel::kWarn, "SENTINEL_CHAIN_PROFILER=%s: %s; no chained plugin", value,
          loaded.message());
      return false;
    }
    g_host_version = version;
    g_pid = getpid();
    g_chain_on.store(true, std::memory_order_relaxed);
    return true;
  } catch (...) {
    return false;  // std::mutex failure: no chain
  }
}

SentinelNcclResult ChainInit(void** context, int* nccl_mask, const ChainInitArgs& a,
                             OwnInitFn own) noexcept {
  if (context == nullptr) return kSentinelNcclSuccess;
  void* own_ctx = nullptr;
  own(&own_ctx, &g_own_mask, a);  // never fails; leaves a non-null context
  void* their_ctx = nullptr;
  SentinelNcclResult rc = kSentinelNcclInternalError;
  try {
    if (g_target.version == 4) {
      rc = g_target.v4.init(&their_ctx, &g_their_mask, a.comm_name, a.comm_hash, a.n_nodes,
                            a.nranks, a.rank, a.logfn);
    } else {
      rc = g_target.v6.init(&their_ctx, a.comm_hash, &g_their_mask, a.comm_name, a.n_nodes,
                            a.nranks, a.rank, a.logfn);
    }
  } catch (...) {
    rc = kSentinelNcclInternalError;
  }
  if (rc != kSentinelNcclSuccess) {
    // Unlike NCCL 2.28 (docs/nccl-facts.md "4.2 `init`") we stop talking to a plugin whose init
    // failed, for this communicator.
    g_their_errors.fetch_add(1, std::memory_order_relaxed);
    SENTINEL_LOG_ONCE(LogLevel::kWarn,
                      "chained profiler plugin %s: init failed (%d); its events are not forwarded "
                      "for that communicator",
                      g_target.name != nullptr ? g_target.name : "?", static_cast<int>(rc));
    their_ctx = nullptr;
  }
  ChainContext* slot = nullptr;
  if (their_ctx != nullptr) {
    for (ChainContext& c : g_contexts) {
      bool expected = false;
      if (c.used.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
        slot = &c;
        break;
      }
    }
    if (slot == nullptr) {
      g_contexts_exhausted.fetch_add(1, std::memory_order_relaxed);
      SENTINEL_LOG_ONCE(LogLevel::kWarn,
                        "chained profiler plugin: more than %d communicators; later ones are not "
                        "forwarded",
                        kMaxContexts);
      CallTheirs([&] { return g_target.finalize(their_ctx); });
    }
  }
  if (slot != nullptr) {
    slot->own = own_ctx;
    slot->theirs = their_ctx;
    *context = slot;
  } else {
    *context = own_ctx;
  }
  if (nccl_mask != nullptr) {
    int merged = static_cast<int>(LoadMask(&g_own_mask) | LoadMask(&g_their_mask));
    // relaxed: NCCL reads the mask with relaxed atomic loads
    // (docs/nccl-facts.md "4.5 The activation mask").
    reinterpret_cast<std::atomic<int>*>(nccl_mask)->store(merged, std::memory_order_relaxed);
  }
  return kSentinelNcclSuccess;
}

namespace {

// Translates a v5/v6 Coll/P2p parentGroup (v4 has none).
void SplitParentGroup(SentinelEventDescrV6* ours, SentinelEventDescrV6* theirs) {
  void** o = nullptr;
  void** t = nullptr;
  if (ours->type == kSentinelProfileColl) {
    o = &ours->coll.parent_group;
    t = &theirs->coll.parent_group;
  } else if (ours->type == kSentinelProfileP2p) {
    o = &ours->p2p.parent_group;
    t = &theirs->p2p.parent_group;
  }
  if (o != nullptr) SplitHandle(*o, o, t);
}
void SplitParentGroup(SentinelEventDescrV4*, SentinelEventDescrV4*) {}

template <typename Descr, typename OwnFn, typename TheirFn>
SentinelNcclResult StartImpl(void* context, void** handle, Descr* e, OwnFn own,
                             TheirFn theirs) noexcept {
  if (handle == nullptr) return kSentinelNcclSuccess;
  *handle = nullptr;
  if (e == nullptr) return kSentinelNcclSuccess;
  uint32_t type = static_cast<uint32_t>(e->type);
  Descr ours_d = *e;
  Descr theirs_d = *e;
  void* own_ctx = context;
  void* their_ctx = nullptr;
  // PXN (docs/nccl-facts.md "5.5 Special cases"): a foreign pid's context and parent belong to
  // another process; both sides get them raw, exactly as NCCL would have passed them.
  bool foreign = type == kSentinelProfileProxyOp && e->proxy_op.pid != g_pid;
  if (foreign) {
    their_ctx = context;
  } else {
    if (ChainContext* c = FindContext(context)) {
      own_ctx = c->own;
      their_ctx = c->theirs;
    }
    SplitHandle(e->parent_obj, &ours_d.parent_obj, &theirs_d.parent_obj);
    SplitParentGroup(&ours_d, &theirs_d);
  }
  void* own_h = nullptr;
  if (NcclEmits(LoadMask(&g_own_mask), type, g_host_version)) own(own_ctx, &own_h, &ours_d);
  void* their_h = nullptr;
  bool ce = type >= kSentinelProfileCeColl;  // v6 only: a v5 target never sees them
  if (their_ctx != nullptr && !(ce && g_target.version < 6) &&
      NcclEmits(LoadMask(&g_their_mask), type, g_target.version)) {
    CallTheirs([&] { return theirs(their_ctx, &their_h, &theirs_d); });
  }
  PublishHandle(handle, own_h, their_h);
  return kSentinelNcclSuccess;
}

}  // namespace

SentinelNcclResult ChainStartV4(void* context, void** handle, SentinelEventDescrV4* e,
                                OwnStartV4Fn own) noexcept {
  return StartImpl(context, handle, e, own, [](void* c, void** h, SentinelEventDescrV4* d) {
    return g_target.v4.start_event(c, h, d);
  });
}

SentinelNcclResult ChainStartV6(void* context, void** handle, SentinelEventDescrV6* e,
                                OwnStartV6Fn own) noexcept {
  return StartImpl(context, handle, e, own, [](void* c, void** h, SentinelEventDescrV6* d) {
    return g_target.v6.start_event(c, h, d);
  });
}

SentinelNcclResult ChainStop(void* handle) noexcept {
  PairSlot* s = FindSlot(handle);
  if (s == nullptr) return OwnStop(handle);
  // A repeated stop (docs/nccl-facts.md "5.6 Pitfalls" item 1) is forwarded again: each side would
  // have seen it alone.
  s->state.store(kSlotStopped, std::memory_order_relaxed);
  void* own_h = s->own.load(std::memory_order_relaxed);
  void* their_h = s->theirs.load(std::memory_order_relaxed);
  if (own_h != nullptr) OwnStop(own_h);
  if (their_h != nullptr) CallTheirs([&] { return g_target.stop(their_h); });
  return kSentinelNcclSuccess;
}

SentinelNcclResult ChainRecord(void* handle, SentinelNcclEventState state,
                               SentinelEventStateArgs* args) noexcept {
  PairSlot* s = FindSlot(handle);
  if (s == nullptr) return OwnRecord(handle, state, args);
  void* own_h = s->own.load(std::memory_order_relaxed);
  void* their_h = s->theirs.load(std::memory_order_relaxed);
  if (own_h != nullptr) OwnRecord(own_h, state, args);
  if (their_h != nullptr) CallTheirs([&] { return g_target.record(their_h, state, args); });
  return kSentinelNcclSuccess;
}

SentinelNcclResult ChainFinalize(void* context) noexcept {
  ChainContext* c = FindContext(context);
  if (c == nullptr) return OwnFinalize(context);
  void* own_ctx = c->own;
  void* their_ctx = c->theirs;
  c->used.store(false, std::memory_order_release);
  OwnFinalize(own_ctx);
  if (their_ctx != nullptr) CallTheirs([&] { return g_target.finalize(their_ctx); });
  return kSentinelNcclSuccess;
}

ChainCounters ChainCountersSnapshot() noexcept {
  ChainCounters c;
  c.their_errors = g_their_errors.load(std::memory_order_relaxed);
  c.slots_exhausted = g_slots_exhausted.load(std::memory_order_relaxed);
  c.contexts_exhausted = g_contexts_exhausted.load(std::memory_order_relaxed);
  return c;
}

}  // namespace sentinel::plugin
