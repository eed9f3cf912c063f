// A tiny profiler plugin for fidelity tests of the fake NCCL: exports ncclProfiler_v4/_v5/_v6 and
// writes one line per callback (thread id and name, handle ids, descriptor fields) to
// RECORDING_PLUGIN_LOG (`%p` -> pid). Never dereferences a pointer it did not hand out.
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "plugin/abi/nccl_profiler_abi.h"

namespace sentinel::testing {
namespace {

struct RecCtx {
  int id;
  uint64_t comm;
  int rank;
};

struct RecHandle {
  uint64_t id;
  uint64_t type;
};

struct State {
  std::mutex mu;
  FILE* out = nullptr;
  int next_ctx = 1;
  uint64_t next_handle = 1;
  uint64_t line = 0;
  std::unordered_map<const void*, RecCtx*> contexts;
  std::unordered_map<const void*, RecHandle*> handles;
  pid_t pid = 0;
};

// Under ASan the state is marked as meant to outlive everything: the fake NCCL dlcloses this
// library as NCCL does, after which LeakSanitizer could no longer see the static pointer and would
// report the state and every record it holds.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RECORDING_PLUGIN_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define RECORDING_PLUGIN_ASAN 1
#endif
#ifdef RECORDING_PLUGIN_ASAN
#include <sanitizer/lsan_interface.h>
#define RECORDING_PLUGIN_KEEP(p) __lsan_ignore_object(p)
#else
#define RECORDING_PLUGIN_KEEP(p) static_cast<void>(p)
#endif

State& S() {
  static State* s = [] {
    auto* state = new State();     // leaked on purpose: calls may come during exit
    RECORDING_PLUGIN_KEEP(state);  // and what it holds stays reachable through it
    return state;
  }();
  return *s;
}

const char* TypeName(uint64_t type) {
  switch (type) {
    case kSentinelProfileGroup:
      return "Group";
    case kSentinelProfileColl:
      return "Coll";
    case kSentinelProfileP2p:
      return "P2p";
    case kSentinelProfileProxyOp:
      return "ProxyOp";
    case kSentinelProfileProxyStep:
      return "ProxyStep";
    case kSentinelProfileProxyCtrl:
      return "ProxyCtrl";
    case kSentinelProfileKernelCh:
      return "KernelCh";
    case kSentinelProfileNetPlugin:
      return "NetPlugin";
    case kSentinelProfileGroupApi:
      return "GroupApi";
    case kSentinelProfileCollApi:
      return "CollApi";
    case kSentinelProfileP2pApi:
      return "P2pApi";
    case kSentinelProfileKernelLaunch:
      return "KernelLaunch";
    default:
      return "Unknown";
  }
}

const char* Str(const char* s) { return s != nullptr ? s : "(null)"; }

// RECORDING_PLUGIN_RESULT=<n>: every callback still records, then returns n (a failing plugin).
SentinelNcclResult Result() {
  static const int result = [] {
    const char* v = getenv("RECORDING_PLUGIN_RESULT");
    return v != nullptr ? atoi(v) : 0;
  }();
  return static_cast<SentinelNcclResult>(result);
}

// Caller holds mu. Writes the common prefix, then `body`.
void Emit(State& s, const void* ctx, const std::string& body) {
  if (s.out == nullptr) return;
  char name[32] = {0};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  for (char& c : name) c = c == ' ' ? '_' : c;  // "NCCL Progress 0" -> one token
  auto it = s.contexts.find(ctx);
  int ctx_id = it != s.contexts.end() ? it->second->id : 0;
  fprintf(s.out, "%" PRIu64 " tid=%ld thread=%s ctx=%d %s\n", ++s.line,
          static_cast<long>(syscall(SYS_gettid)), name[0] != '\0' ? name : "-", ctx_id,
          body.c_str());
  fflush(s.out);
}

std::string HandleId(State& s, const void* h) {
  if (h == nullptr) return "0";
  auto it = s.handles.find(h);
  return it != s.handles.end() ? std::to_string(it->second->id) : "?";
}

int InitCommon(void** context, uint64_t comm, int* mask, const char* name, int nnodes, int nranks,
               int rank, int version) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.out == nullptr) {
    s.pid = getpid();
    const char* path = getenv("RECORDING_PLUGIN_LOG");
    if (path != nullptr) {
      std::string p;
      for (const char* c = path; *c != '\0'; ++c) {
        if (c[0] == '%' && c[1] == 'p') {
          p += std::to_string(getpid());
          ++c;
        } else {
          p += *c;
        }
      }
      s.out = fopen(p.c_str(), "ae");
    }
  }
  RecCtx* ctx = new RecCtx{s.next_ctx++, comm, rank};
  s.contexts[ctx] = ctx;
  *context = ctx;
  const char* mask_env = getenv("RECORDING_PLUGIN_MASK");
  int value = mask_env != nullptr ? static_cast<int>(strtol(mask_env, nullptr, 0))
                                  : (0xFFF & ~kSentinelProfileProxyCtrl);
  __atomic_store_n(mask, value, __ATOMIC_RELAXED);
  char body[256];
  snprintf(body, sizeof(body),
           "init v=%d comm=0x%016" PRIx64 " rank=%d nranks=%d nnodes=%d name=%s pid=%d", version,
           comm, rank, nranks, nnodes, Str(name), static_cast<int>(getpid()));
  Emit(s, ctx, body);
  return Result();
}

void StartCommon(void* context, void** handle, uint64_t type, void* parent, int rank,
                 const std::string& fields, bool foreign) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  RecHandle* h = new RecHandle{s.next_handle++, type};
  s.handles[h] = h;
  *handle = h;
  std::string body = "start type=" + std::string(TypeName(type)) + " h=" + std::to_string(h->id) +
                     " parent=" + (foreign ? std::string("foreign") : HandleId(s, parent)) +
                     " rank=" + std::to_string(rank) + fields;
  Emit(s, foreign ? nullptr : context, body);
}

SentinelNcclResult StartV6(void* context, void** handle, SentinelEventDescrV6* d) {
  char f[320] = {0};
  bool foreign = false;
  switch (d->type) {
    case kSentinelProfileGroupApi:
      snprintf(f, sizeof(f), " depth=%d captured=%d", d->group_api.group_depth,
               d->group_api.graph_captured);
      break;
    case kSentinelProfileCollApi:
      snprintf(f, sizeof(f), " func=%s count=%zu dtype=%s root=%d captured=%d",
               Str(d->coll_api.func), d->coll_api.count, Str(d->coll_api.datatype),
               d->coll_api.root, d->coll_api.graph_captured);
      break;
    case kSentinelProfileP2pApi:
      snprintf(f, sizeof(f), " func=%s count=%zu dtype=%s captured=%d", Str(d->p2p_api.func),
               d->p2p_api.count, Str(d->p2p_api.datatype), d->p2p_api.graph_captured);
      break;
    case kSentinelProfileColl: {
      std::string pg;
      {
        std::lock_guard<std::mutex> lock(S().mu);
        pg = HandleId(S(), d->coll.parent_group);
      }
      snprintf(f, sizeof(f),
               " seq=%" PRIu64 " func=%s count=%zu dtype=%s root=%d algo=%s proto=%s nch=%d pg=%s",
               d->coll.seq_number, Str(d->coll.func), d->coll.count, Str(d->coll.datatype),
               d->coll.root, Str(d->coll.algo), Str(d->coll.proto), d->coll.n_channels, pg.c_str());
      break;
    }
    case kSentinelProfileP2p: {
      std::string pg;
      {
        std::lock_guard<std::mutex> lock(S().mu);
        pg = HandleId(S(), d->p2p.parent_group);
      }
      snprintf(f, sizeof(f), " func=%s count=%zu dtype=%s peer=%d nch=%d pg=%s", Str(d->p2p.func),
               d->p2p.count, Str(d->p2p.datatype), d->p2p.peer, d->p2p.n_channels, pg.c_str());
      break;
    }
    case kSentinelProfileProxyOp:
      // PXN: check the pid before touching context or parent
      // (docs/nccl-facts.md "5.5 Special cases").
      foreign = d->proxy_op.pid != S().pid;
      snprintf(f, sizeof(f), " pid=%d ch=%d peer=%d nsteps=%d chunk=%d send=%d",
               static_cast<int>(d->proxy_op.pid), d->proxy_op.channel_id, d->proxy_op.peer,
               d->proxy_op.n_steps, d->proxy_op.chunk_size, d->proxy_op.is_send);
      break;
    case kSentinelProfileProxyStep:
      snprintf(f, sizeof(f), " step=%d", d->proxy_step.step);
      break;
    case kSentinelProfileKernelCh:
      snprintf(f, sizeof(f), " ch=%d ptimer=%" PRIu64, d->kernel_ch.channel_id,
               d->kernel_ch.p_timer);
      break;
    default:
      break;
  }
  StartCommon(context, handle, d->type, d->parent_obj, d->rank, f, foreign);
  return Result();
}

SentinelNcclResult StartV4(void* context, void** handle, SentinelEventDescrV4* d4) {
  // Re-express the v4 descriptor in the v6 layout (same offsets for every v4 member).
  SentinelEventDescrV6 d;
  memset(&d, 0, sizeof(d));
  memcpy(&d, d4, sizeof(*d4));
  d.type = d4->type;
  return StartV6(context, handle, &d);
}

SentinelNcclResult Stop(void* handle) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.handles.find(handle);
  std::string body = "stop h=" + HandleId(s, handle);
  if (it != s.handles.end()) body += std::string(" type=") + TypeName(it->second->type);
  Emit(s, nullptr, body);
  return Result();
}

SentinelNcclResult Record(void* handle, SentinelNcclEventState state,
                          SentinelEventStateArgs* args) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  char body[160];
  if (args == nullptr) {
    snprintf(body, sizeof(body), "state h=%s state=%d arg=null", HandleId(s, handle).c_str(),
             state);
  } else if (state == kSentinelStateProxyCtrlAppendEnd) {
    snprintf(body, sizeof(body), "state h=%s state=%d arg=%d", HandleId(s, handle).c_str(), state,
             args->proxy_ctrl.appended_proxy_ops);
  } else {
    snprintf(body, sizeof(body), "state h=%s state=%d arg=%" PRIu64, HandleId(s, handle).c_str(),
             state, static_cast<uint64_t>(args->kernel_ch.p_timer));
  }
  Emit(s, nullptr, body);
  return Result();
}

SentinelNcclResult Finalize(void* context) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  Emit(s, context, "finalize");
  return Result();
}

SentinelNcclResult InitV6(void** context, uint64_t comm_id, int* mask, const char* name, int nnodes,
                          int nranks, int rank, SentinelNcclLogger logfn) {
  (void)logfn;
  return static_cast<SentinelNcclResult>(
      InitCommon(context, comm_id, mask, name, nnodes, nranks, rank, 6));
}
SentinelNcclResult InitV5(void** context, uint64_t comm_id, int* mask, const char* name, int nnodes,
                          int nranks, int rank, SentinelNcclLogger logfn) {
  (void)logfn;
  return static_cast<SentinelNcclResult>(
      InitCommon(context, comm_id, mask, name, nnodes, nranks, rank, 5));
}
SentinelNcclResult InitV4(void** context, int* mask, const char* name, uint64_t comm_hash,
                          int nnodes, int nranks, int rank, SentinelNcclLogger logfn) {
  (void)logfn;
  return static_cast<SentinelNcclResult>(
      InitCommon(context, comm_hash, mask, name, nnodes, nranks, rank, 4));
}

}  // namespace
}  // namespace sentinel::testing

namespace st = sentinel::testing;

extern "C" {
__attribute__((visibility("default"))) extern const SentinelProfilerV6 ncclProfiler_v6;
__attribute__((visibility("default"))) extern const SentinelProfilerV5 ncclProfiler_v5;
__attribute__((visibility("default"))) extern const SentinelProfilerV4 ncclProfiler_v4;
const SentinelProfilerV6 ncclProfiler_v6 = {"recording", st::InitV6, st::StartV6,
                                            st::Stop,    st::Record, st::Finalize};
const SentinelProfilerV5 ncclProfiler_v5 = {"recording", st::InitV5, st::StartV6,
                                            st::Stop,    st::Record, st::Finalize};
const SentinelProfilerV4 ncclProfiler_v4 = {"recording", st::InitV4, st::StartV4,
                                            st::Stop,    st::Record, st::Finalize};
}
