// The LD_PRELOAD interposer (docs/nccl-facts.md "10. Facts for the LD_PRELOAD interposer"): defines
// NCCL's communicator-creation API and the collectives, calls the real pncclX, and lets the guard
// fail fast on a transport/placement mismatch. The same .so is also the profiler plugin; everything
// here is extern "C" glue.
#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "absl/base/attributes.h"

#include "plugin/base/raw_log.h"
#include "plugin/core/api_context.h"
#include "plugin/entry/hang_abort.h"
#include "plugin/guard/guard_runtime.h"
#include "plugin/guard/log_capture.h"
#include "schemas/wire/sentinel_wire.h"

extern "C" {
// Our own spellings of the NCCL types the signatures need (never NCCL's header).
typedef struct SentinelOpaqueComm* SentinelComm;
typedef struct {
  char internal[128];
} SentinelUniqueId;
typedef struct SentinelOpaqueStream* SentinelStream;
// Prototypes of the interposed API (the definitions below replace NCCL's weak ncclX).
__attribute__((visibility("default"))) int ncclCommInitRank(SentinelComm* comm, int nranks,
                                                            SentinelUniqueId id, int rank);
__attribute__((visibility("default"))) int ncclCommInitRankConfig(SentinelComm* comm, int nranks,
                                                                  SentinelUniqueId id, int rank,
                                                                  void* config);
__attribute__((visibility("default"))) int ncclCommInitRankScalable(SentinelComm* comm, int nranks,
                                                                    int rank, int n_ids,
                                                                    SentinelUniqueId* ids,
                                                                    void* config);
__attribute__((visibility("default"))) int ncclCommInitAll(SentinelComm* comms, int ndev,
                                                           const int* devlist);
__attribute__((visibility("default"))) int ncclCommSplit(SentinelComm comm, int color, int key,
                                                         SentinelComm* newcomm, void* config);
__attribute__((visibility("default"))) int ncclCommShrink(SentinelComm comm, int* exclude,
                                                          int n_exclude, SentinelComm* newcomm,
                                                          void* config, int flags);
__attribute__((visibility("default"))) int ncclCommAbort(SentinelComm comm);
__attribute__((visibility("default"))) int ncclCommDestroy(SentinelComm comm);
__attribute__((visibility("default"))) int ncclCommFinalize(SentinelComm comm);
__attribute__((visibility("default"))) int ncclCommGetAsyncError(SentinelComm comm, int* error);
__attribute__((visibility("default"))) int ncclAllReduce(const void* s, void* r_, size_t n, int dt,
                                                         int op, SentinelComm comm,
                                                         SentinelStream st);
__attribute__((visibility("default"))) int ncclBroadcast(const void* s, void* r_, size_t n, int dt,
                                                         int root, SentinelComm comm,
                                                         SentinelStream st);
__attribute__((visibility("default"))) int ncclBcast(void* buf, size_t n, int dt, int root,
                                                     SentinelComm comm, SentinelStream st);
__attribute__((visibility("default"))) int ncclReduce(const void* s, void* r_, size_t n, int dt,
                                                      int op, int root, SentinelComm comm,
                                                      SentinelStream st);
__attribute__((visibility("default"))) int ncclAllGather(const void* s, void* r_, size_t n, int dt,
                                                         SentinelComm comm, SentinelStream st);
__attribute__((visibility("default"))) int ncclReduceScatter(const void* s, void* r_, size_t n,
                                                             int dt, int op, SentinelComm comm,
                                                             SentinelStream st);
__attribute__((visibility("default"))) int ncclSend(const void* s, size_t n, int dt, int peer,
                                                    SentinelComm comm, SentinelStream st);
__attribute__((visibility("default"))) int ncclRecv(void* r_, size_t n, int dt, int peer,
                                                    SentinelComm comm, SentinelStream st);
__attribute__((visibility("default"))) int ncclAlltoAll(const void* s, void* r_, size_t n, int dt,
                                                        SentinelComm comm, SentinelStream st);
__attribute__((visibility("default"))) int ncclGather(const void* s, void* r_, size_t n, int dt,
                                                      int root, SentinelComm comm,
                                                      SentinelStream st);
__attribute__((visibility("default"))) int ncclScatter(const void* s, void* r_, size_t n, int dt,
                                                       int root, SentinelComm comm,
                                                       SentinelStream st);
}

namespace {

constexpr int kNcclSystemError = 2;
constexpr int kNcclRemoteError = 6;

// Nesting depth of our wrappers on this thread: NCCL calls some of its own API through the PLT
// (ncclBcast -> ncclBroadcast, ncclCommInitAll -> ncclGetUniqueId); those only forward.
thread_local int tls_depth = 0;

struct DepthGuard {
  DepthGuard() { ++tls_depth; }
  ~DepthGuard() { --tls_depth; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;
};

void* Resolve(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn == nullptr) fn = dlsym(RTLD_DEFAULT, name);
  return fn;
}

// One cached pointer per real function. Acquire/release so that a thread that sees the pointer
// also sees the resolved code (dlsym results are immutable; the order is for the sanitizers).
template <typename Fn>
Fn Real(std::atomic<void*>* slot, const char* name) {
  void* fn = slot->load(std::memory_order_acquire);
  if (fn == nullptr) {
    fn = Resolve(name);
    slot->store(fn, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(fn);
}

int NoReal(const char* name) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true, std::memory_order_relaxed)) {
    sentinel::plugin::RawLog(
        "%s: the real NCCL function p%s was not found: libnccl.so.2 is not loaded or is older than "
        "the API; returning ncclSystemError",
        name, name);
  }
  return kNcclSystemError;
}

bool Forwarding() {
  if (tls_depth > 0) return true;
  const sentinel::guard::GuardConfig& c = sentinel::guard::Config();
  return c.disabled || !c.active;
}

ABSL_CONST_INIT std::atomic<void*> g_abort{nullptr};
int AbortComm(void* comm) {
  auto fn = Real<int (*)(void*)>(&g_abort, "pncclCommAbort");
  return fn == nullptr ? kNcclSystemError : fn(comm);
}

// A created communicator's handle, for SENTINEL_ON_HANG (hang_abort.h): `r` unchanged.
int TrackCreate(int r, SentinelComm* comm) {
  if (r == 0 && comm != nullptr) sentinel::plugin::HangAbortEndCreate(static_cast<void*>(*comm));
  return r;
}

// `outer`: the call came from the application, not from NCCL re-entering through the PLT.
int AfterCollective(bool outer, const char* api, void* comm, int result) {
  if (!outer) return result;
  sentinel::guard::DrainLogAfterCollective(result);
  if (__builtin_expect(!sentinel::guard::CollectiveCheckPending(), 1)) return result;
  return sentinel::guard::OnCollectiveEnd(api, comm, result);
}

// Whether this object was loaded through LD_PRELOAD (and not dlopen()ed by NCCL as a profiler
// plugin, when it is too late to redirect NCCL's log).
bool LoadedByPreload() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&LoadedByPreload), &info) == 0 || info.dli_fname == nullptr) {
    return false;
  }
  const char* base = std::strrchr(info.dli_fname, '/');
  base = base == nullptr ? info.dli_fname : base + 1;
  const char* preload = getenv("LD_PRELOAD");
  return preload != nullptr && *base != '\0' && std::strstr(preload, base) != nullptr;
}

__attribute__((constructor)) void SentinelPreloadInit() {
  const bool preloaded = LoadedByPreload();
  sentinel::guard::InstallLogCapture(preloaded);
  // SENTINEL_ON_HANG=abort can act only where we see the handles: through LD_PRELOAD.
  if (preloaded) sentinel::plugin::HangAbortSetAbortFn(&AbortComm);
}

__attribute__((destructor)) void SentinelPreloadFini() { sentinel::guard::DrainLogCaptureAtExit(); }

}  // namespace

#define SENTINEL_EXPORT extern "C" __attribute__((visibility("default")))
#define SENTINEL_REAL(type, name)           \
  static std::atomic<void*> slot{nullptr};  \
  auto real = Real<type>(&slot, "p" #name); \
  if (real == nullptr) return NoReal(#name)

// ---- communicator creation --------------------------------------------------------------------

SENTINEL_EXPORT int ncclCommInitRank(SentinelComm* comm, int nranks, SentinelUniqueId id,
                                     int rank) {
  SENTINEL_REAL(int (*)(SentinelComm*, int, SentinelUniqueId, int), ncclCommInitRank);
  if (Forwarding()) {
    sentinel::plugin::HangAbortBeginCreate();
    return TrackCreate(real(comm, nranks, id, rank), comm);
  }
  DepthGuard depth;
  sentinel::guard::OnCreateBegin();
  sentinel::plugin::HangAbortBeginCreate();
  int r = real(comm, nranks, id, rank);
  void* c = comm != nullptr ? static_cast<void*>(*comm) : nullptr;
  if (r == 0) sentinel::plugin::HangAbortEndCreate(c);
  return sentinel::guard::OnCreateEnd("ncclCommInitRank", r, &c, 1, AbortComm);
}

SENTINEL_EXPORT int ncclCommInitRankConfig(SentinelComm* comm, int nranks, SentinelUniqueId id,
                                           int rank, void* config) {
  SENTINEL_REAL(int (*)(SentinelComm*, int, SentinelUniqueId, int, void*), ncclCommInitRankConfig);
  if (Forwarding()) {
    sentinel::plugin::HangAbortBeginCreate();
    return TrackCreate(real(comm, nranks, id, rank, config), comm);
  }
  DepthGuard depth;
  sentinel::guard::OnCreateBegin();
  sentinel::plugin::HangAbortBeginCreate();
  int r = real(comm, nranks, id, rank, config);
  void* c = comm != nullptr ? static_cast<void*>(*comm) : nullptr;
  if (r == 0) sentinel::plugin::HangAbortEndCreate(c);
  return sentinel::guard::OnCreateEnd("ncclCommInitRankConfig", r, &c, 1, AbortComm);
}

SENTINEL_EXPORT int ncclCommInitRankScalable(SentinelComm* comm, int nranks, int rank, int n_ids,
                                             SentinelUniqueId* ids, void* config) {
  SENTINEL_REAL(int (*)(SentinelComm*, int, int, int, SentinelUniqueId*, void*),
                ncclCommInitRankScalable);
  if (Forwarding()) {
    sentinel::plugin::HangAbortBeginCreate();
    return TrackCreate(real(comm, nranks, rank, n_ids, ids, config), comm);
  }
  DepthGuard depth;
  sentinel::guard::OnCreateBegin();
  sentinel::plugin::HangAbortBeginCreate();
  int r = real(comm, nranks, rank, n_ids, ids, config);
  void* c = comm != nullptr ? static_cast<void*>(*comm) : nullptr;
  if (r == 0) sentinel::plugin::HangAbortEndCreate(c);
  return sentinel::guard::OnCreateEnd("ncclCommInitRankScalable", r, &c, 1, AbortComm);
}

SENTINEL_EXPORT int ncclCommInitAll(SentinelComm* comms, int ndev, const int* devlist) {
  SENTINEL_REAL(int (*)(SentinelComm*, int, const int*), ncclCommInitAll);
  if (Forwarding()) return real(comms, ndev, devlist);
  DepthGuard depth;
  sentinel::guard::OnCreateBegin();
  int r = real(comms, ndev, devlist);
  int n = comms != nullptr && ndev > 0 ? ndev : 0;
  return sentinel::guard::OnCreateEnd("ncclCommInitAll", r, reinterpret_cast<void* const*>(comms),
                                      n, AbortComm);
}

SENTINEL_EXPORT int ncclCommSplit(SentinelComm comm, int color, int key, SentinelComm* newcomm,
                                  void* config) {
  SENTINEL_REAL(int (*)(SentinelComm, int, int, SentinelComm*, void*), ncclCommSplit);
  if (Forwarding()) {
    sentinel::plugin::HangAbortBeginCreate();
    return TrackCreate(real(comm, color, key, newcomm, config), newcomm);
  }
  DepthGuard depth;
  sentinel::guard::OnCreateBegin();
  sentinel::plugin::HangAbortBeginCreate();
  int r = real(comm, color, key, newcomm, config);
  // NCCL_SPLIT_NOCOLOR gives a null communicator: nothing to check or abort.
  void* c = newcomm != nullptr ? static_cast<void*>(*newcomm) : nullptr;
  if (r == 0) sentinel::plugin::HangAbortEndCreate(c);
  return sentinel::guard::OnCreateEnd("ncclCommSplit", r, &c, c != nullptr ? 1 : 0, AbortComm);
}

SENTINEL_EXPORT int ncclCommShrink(SentinelComm comm, int* exclude, int n_exclude,
                                   SentinelComm* newcomm, void* config, int flags) {
  SENTINEL_REAL(int (*)(SentinelComm, int*, int, SentinelComm*, void*, int), ncclCommShrink);
  if (Forwarding()) {
    sentinel::plugin::HangAbortBeginCreate();
    return TrackCreate(real(comm, exclude, n_exclude, newcomm, config, flags), newcomm);
  }
  DepthGuard depth;
  sentinel::guard::OnCreateBegin();
  sentinel::plugin::HangAbortBeginCreate();
  int r = real(comm, exclude, n_exclude, newcomm, config, flags);
  void* c = newcomm != nullptr ? static_cast<void*>(*newcomm) : nullptr;
  if (r == 0) sentinel::plugin::HangAbortEndCreate(c);
  return sentinel::guard::OnCreateEnd("ncclCommShrink", r, &c, c != nullptr ? 1 : 0, AbortComm);
}

// ---- teardown and error queries: a communicator SENTINEL_ON_HANG aborted is already freed; the
// log is drained at the return so that NCCL's teardown lines keep their place in the output ------

// Calls `real` as the application's call (NCCL's own re-entrant calls only forward), then drains
// what NCCL printed during it.
static int Teardown(int (*real)(SentinelComm), SentinelComm comm) {
  if (tls_depth > 0) return real(comm);
  int r;
  {
    DepthGuard depth;
    r = real(comm);
  }
  sentinel::guard::DrainLogAfterCall();
  return r;
}

SENTINEL_EXPORT int ncclCommAbort(SentinelComm comm) {
  SENTINEL_REAL(int (*)(SentinelComm), ncclCommAbort);
  if (sentinel::plugin::HangAbortHostTeardown(static_cast<void*>(comm))) return 0;
  return Teardown(real, comm);
}

SENTINEL_EXPORT int ncclCommDestroy(SentinelComm comm) {
  SENTINEL_REAL(int (*)(SentinelComm), ncclCommDestroy);
  if (sentinel::plugin::HangAbortHostTeardown(static_cast<void*>(comm))) return 0;
  return Teardown(real, comm);
}

SENTINEL_EXPORT int ncclCommFinalize(SentinelComm comm) {
  SENTINEL_REAL(int (*)(SentinelComm), ncclCommFinalize);
  if (sentinel::plugin::HangAbortIsAborted(static_cast<void*>(comm))) return kNcclRemoteError;
  return Teardown(real, comm);
}

// Also NCCL's own check in every enqueue (docs/nccl-facts.md "10.2 Internal calls"): one relaxed
// load until we abort something.
SENTINEL_EXPORT int ncclCommGetAsyncError(SentinelComm comm, int* error) {
  SENTINEL_REAL(int (*)(SentinelComm, int*), ncclCommGetAsyncError);
  if (sentinel::plugin::HangAbortIsAborted(static_cast<void*>(comm)) && error != nullptr) {
    *error = kNcclRemoteError;
    return 0;
  }
  return real(comm, error);
}

// ---- collectives: the runtime-connect check (one relaxed load when nothing is pending) ---------

// Shared entry: the real function, a communicator SENTINEL_ON_HANG aborted (already freed: never
// handed to NCCL), and whether the application made the call.
#define SENTINEL_COLLECTIVE_ENTRY(name, comm)                                                  \
  SENTINEL_REAL(Fn, name);                                                                     \
  if (sentinel::plugin::HangAbortIsAborted(static_cast<void*>(comm))) return kNcclRemoteError; \
  const bool outer = tls_depth == 0;                                                           \
  int r

// The depth is taken before the call and released before the check: the check runs for calls made
// by the application (depth 0 on entry), never for NCCL's own re-entrant ones.
#define SENTINEL_COLLECTIVE_BODY(name, comm, ...) \
  SENTINEL_COLLECTIVE_ENTRY(name, comm);          \
  {                                               \
    DepthGuard depth;                             \
    r = real(__VA_ARGS__);                        \
  }                                               \
  return AfterCollective(outer, #name, static_cast<void*>(comm), r)

SENTINEL_EXPORT int ncclAllReduce(const void* s, void* r_, size_t n, int dt, int op,
                                  SentinelComm comm, SentinelStream st) {
  using Fn = int (*)(const void*, void*, size_t, int, int, SentinelComm, SentinelStream);
  SENTINEL_COLLECTIVE_BODY(ncclAllReduce, comm, s, r_, n, dt, op, comm, st);
}

SENTINEL_EXPORT int ncclBroadcast(const void* s, void* r_, size_t n, int dt, int root,
                                  SentinelComm comm, SentinelStream st) {
  using Fn = int (*)(const void*, void*, size_t, int, int, SentinelComm, SentinelStream);
  SENTINEL_COLLECTIVE_BODY(ncclBroadcast, comm, s, r_, n, dt, root, comm, st);
}

// ncclBcast reaches ncclBroadcast through the PLT: the inner call only forwards (depth > 0).
SENTINEL_EXPORT int ncclBcast(void* buf, size_t n, int dt, int root, SentinelComm comm,
                              SentinelStream st) {
  using Fn = int (*)(void*, size_t, int, int, SentinelComm, SentinelStream);
  SENTINEL_COLLECTIVE_BODY(ncclBcast, comm, buf, n, dt, root, comm, st);
}

SENTINEL_EXPORT int ncclReduce(const void* s, void* r_, size_t n, int dt, int op, int root,
                               SentinelComm comm, SentinelStream st) {
  using Fn = int (*)(const void*, void*, size_t, int, int, int, SentinelComm, SentinelStream);
  SENTINEL_COLLECTIVE_BODY(ncclReduce, comm, s, r_, n, dt, op, root, comm, st);
}

SENTINEL_EXPORT int ncclAllGather(const void* s, void* r_, size_t n, int dt, SentinelComm comm,
                                  SentinelStream st) {
  using Fn = int (*)(const void*, void*, size_t, int, SentinelComm, SentinelStream);
  SENTINEL_COLLECTIVE_BODY(ncclAllGather, comm, s, r_, n, dt, comm, st);
}

SENTINEL_EXPORT int ncclReduceScatter(const void* s, void* r_, size_t n, int dt, int op,
                                      SentinelComm comm, SentinelStream st) {
  using Fn = int (*)(const void*, void*, size_t, int, int, SentinelComm, SentinelStream);
  SENTINEL_COLLECTIVE_BODY(ncclReduceScatter, comm, s, r_, n, dt, op, comm, st);
}

SENTINEL_EXPORT int ncclSend(const void* s, size_t n, int dt, int peer, SentinelComm comm,
                             SentinelStream st) {
  using Fn = int (*)(const void*, size_t, int, int, SentinelComm, SentinelStream);
  SENTINEL_COLLECTIVE_BODY(ncclSend, comm, s, n, dt, peer, comm, st);
}

SENTINEL_EXPORT int ncclRecv(void* r_, size_t n, int dt, int peer, SentinelComm comm,
                             SentinelStream st) {
  using Fn = int (*)(void*, size_t, int, int, SentinelComm, SentinelStream);
  SENTINEL_COLLECTIVE_BODY(ncclRecv, comm, r_, n, dt, peer, comm, st);
}

// AlltoAll, Gather and Scatter reach the profiler only as Send/Recv pieces
// (docs/nccl-facts.md "5.5 Special cases"): name them.
#define SENTINEL_NAMED_COLLECTIVE_BODY(name, func, comm, ...) \
  SENTINEL_COLLECTIVE_ENTRY(name, comm);                      \
  {                                                           \
    DepthGuard depth;                                         \
    sentinel::plugin::SetCurrentApiForThread(func);           \
    r = real(__VA_ARGS__);                                    \
    sentinel::plugin::ClearCurrentApiForThread();             \
  }                                                           \
  return AfterCollective(outer, #name, static_cast<void*>(comm), r)

SENTINEL_EXPORT int ncclAlltoAll(const void* s, void* r_, size_t n, int dt, SentinelComm comm,
                                 SentinelStream st) {
  using Fn = int (*)(const void*, void*, size_t, int, SentinelComm, SentinelStream);
  SENTINEL_NAMED_COLLECTIVE_BODY(ncclAlltoAll, kSentinelFuncAlltoAll, comm, s, r_, n, dt, comm, st);
}

SENTINEL_EXPORT int ncclGather(const void* s, void* r_, size_t n, int dt, int root,
                               SentinelComm comm, SentinelStream st) {
  using Fn = int (*)(const void*, void*, size_t, int, int, SentinelComm, SentinelStream);
  SENTINEL_NAMED_COLLECTIVE_BODY(ncclGather, kSentinelFuncGather, comm, s, r_, n, dt, root, comm,
                                 st);
}

SENTINEL_EXPORT int ncclScatter(const void* s, void* r_, size_t n, int dt, int root,
                                SentinelComm comm, SentinelStream st) {
  using Fn = int (*)(const void*, void*, size_t, int, int, SentinelComm, SentinelStream);
  SENTINEL_NAMED_COLLECTIVE_BODY(ncclScatter, kSentinelFuncScatter, comm, s, r_, n, dt, root, comm,
                                 st);
}
