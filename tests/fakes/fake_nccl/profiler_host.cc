// Plugin loading and ABI adapters of the fake NCCL; see profiler_host.h.
#include "tests/fakes/fake_nccl/profiler_host.h"

#include <dlfcn.h>
#include <link.h>
#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "tests/fakes/fake_nccl/debug_log.h"

namespace sentinel::testing {
namespace {

enum class LoadState { kReady, kLoaded, kFailed };

struct Host {
  std::mutex mu;
  LoadState state = LoadState::kReady;
  int refcount = 0;
  void* lib = nullptr;
  int version = 0;
  const SentinelProfilerV6* v6 = nullptr;
  const SentinelProfilerV5* v5 = nullptr;
  const SentinelProfilerV4* v4 = nullptr;
  const char* name = "";
};

Host& H() {
  static Host* host = new Host();  // leaked on purpose: used until exit
  return *host;
}

// The single process-global mask int whose address every init receives
// (docs/nccl-facts.md "4.2 `init`", docs/nccl-facts.md "4.5 The activation mask").
int g_event_mask = 0;

bool IsNotFound(const char* err) {
  return err != nullptr && strstr(err, "No such file or directory") != nullptr;
}

void Logger(SentinelNcclLogLevel level, unsigned long flags, const char* file, int line,
            const char* fmt, ...) __attribute__((format(printf, 5, 6)));
void Logger(SentinelNcclLogLevel level, unsigned long flags, const char* file, int line,
            const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  DebugLog(static_cast<int>(level), flags, file, line, "%s", msg);
}

// Caller holds mu. Returns true when loaded.
bool LoadLocked(Host& h) {
  if (h.state == LoadState::kFailed) return false;  // sticky for the life of the process
  if (h.state == LoadState::kLoaded) {
    ++h.refcount;
    return true;
  }
  const char* value = getenv("NCCL_PROFILER_PLUGIN");
  std::string not_found;
  void* lib = nullptr;
  bool is_static = false;
  if (value != nullptr) {
    FAKE_INFO(kSubInit | kSubEnv, "NCCL_PROFILER_PLUGIN set by environment to %s", value);
    if (strcasecmp(value, "none") == 0) {
      h.state = LoadState::kFailed;
      return false;
    }
    size_t len = strlen(value);
    if (len > 0 && strncasecmp(value, "STATIC_PLUGIN", len) == 0) {
      // Case-insensitive prefix match of the value: "static" or even "s"
      // (docs/nccl-facts.md "4.1 Finding the library" quirk).
      is_static = true;
      lib = dlopen(nullptr, RTLD_NOW | RTLD_LOCAL);
    } else {
      lib = dlopen(value, RTLD_NOW | RTLD_LOCAL);
      if (lib == nullptr) {
        const char* err = dlerror();
        if (IsNotFound(err)) {
          not_found += " ";
          not_found += value;
        } else {
          FAKE_INFO(kSubInit, "PROFILER/Plugin: %s: %s", value, err != nullptr ? err : "");
        }
        bool lib_so =
            len > 6 && strncmp(value, "lib", 3) == 0 && strcmp(value + len - 3, ".so") == 0;
        if (strchr(value, '/') == nullptr && !lib_so) {
          std::string alt = std::string("libnccl-profiler-") + value + ".so";
          lib = dlopen(alt.c_str(), RTLD_NOW | RTLD_LOCAL);
          if (lib == nullptr) {
            err = dlerror();
            if (IsNotFound(err)) {
              not_found += " " + alt;
            } else {
              FAKE_INFO(kSubInit, "PROFILER/Plugin: %s: %s", alt.c_str(),
                        err != nullptr ? err : "");
            }
          }
        }
      }
    }
  } else {
    lib = dlopen("libnccl-profiler.so", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* err = dlerror();
      if (IsNotFound(err)) {
        not_found += " libnccl-profiler.so";
      } else {
        FAKE_INFO(kSubInit, "PROFILER/Plugin: libnccl-profiler.so: %s", err != nullptr ? err : "");
      }
    }
  }
  if (lib == nullptr) {
    if (!not_found.empty())
      FAKE_INFO(kSubInit, "PROFILER/Plugin: Could not find:%s", not_found.c_str());
    h.state = LoadState::kFailed;
    return false;
  }
  // Probe order: v5, v4 (2.28.9); v6 first with FAKE_NCCL_PROFILER_MAX_VERSION=6 (2.29 behaviour);
  // only v4 with FAKE_NCCL_PROFILER_VERSION=4.
  int max_version = 5;
  const char* max_env = getenv("FAKE_NCCL_PROFILER_MAX_VERSION");
  if (max_env != nullptr && atoi(max_env) >= 6) max_version = 6;
  const char* only_env = getenv("FAKE_NCCL_PROFILER_VERSION");
  int only = only_env != nullptr ? atoi(only_env) : 0;
  int found = 0;
  for (int v = max_version; v >= 4 && found == 0; --v) {
    if (only != 0 && v != only) continue;
    std::string sym = "ncclProfiler_v" + std::to_string(v);
    void* table = dlsym(lib, sym.c_str());
    if (table == nullptr) continue;
    found = v;
    if (v == 6) h.v6 = static_cast<const SentinelProfilerV6*>(table);
    if (v == 5) h.v5 = static_cast<const SentinelProfilerV5*>(table);
    if (v == 4) h.v4 = static_cast<const SentinelProfilerV4*>(table);
  }
  if (found == 0) {
    FAKE_INFO(kSubInit, "External profiler plugin %s is unsupported",
              value != nullptr ? value : "libnccl-profiler.so");
    if (!is_static) dlclose(lib);
    h.state = LoadState::kFailed;
    return false;
  }
  const char* name = found == 6 ? h.v6->name : found == 5 ? h.v5->name : h.v4->name;
  h.name = name != nullptr ? name : "";
  FAKE_INFO(kSubInit, "PROFILER/Plugin: Loaded %s (v%d)", h.name, found);
  std::string path;
  if (!is_static) {
    struct link_map* map = nullptr;
    if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
      path = map->l_name;
    }
  }
  FAKE_INFO(kSubInit, "Successfully loaded external profiler plugin %s", path.c_str());
  h.lib = lib;
  // Release: event calls on other threads read the table after seeing the version.
  __atomic_store_n(&h.version, found, __ATOMIC_RELEASE);
  h.refcount = 1;
  h.state = LoadState::kLoaded;
  return true;
}

}  // namespace

bool ProfilerInitComm(uint64_t comm_hash, const char* comm_name, int n_nodes, int nranks, int rank,
                      void** context) {
  *context = nullptr;
  Host& h = H();
  int version = 0;  // read under mu below
  SentinelNcclResult rc = kSentinelNcclSuccess;
  {
    std::lock_guard<std::mutex> lock(h.mu);
    if (!LoadLocked(h)) return false;
    version = h.version;
  }
  // init runs outside the lock: NCCL runs inits of several communicators concurrently
  // (docs/nccl-facts.md "4.2 `init`").
  if (version == 6) {
    rc = h.v6->init(context, comm_hash, &g_event_mask, comm_name, n_nodes, nranks, rank, Logger);
  } else if (version == 5) {
    rc = h.v5->init(context, comm_hash, &g_event_mask, comm_name, n_nodes, nranks, rank, Logger);
  } else {
    rc = h.v4->init(context, &g_event_mask, comm_name, comm_hash, n_nodes, nranks, rank, Logger);
  }
  if (rc != kSentinelNcclSuccess) {
    // 2.28.9 keeps the plugin active and this context as written (docs/nccl-facts.md "4.2 `init`").
    FAKE_INFO(kSubInit, "Profiler init failed with error '%d': %s. Continue without profiler.",
              static_cast<int>(rc), strerror(errno));
  }
  return true;
}

void ProfilerFinalizeComm(void* context) {
  Host& h = H();
  std::lock_guard<std::mutex> lock(h.mu);
  if (h.state != LoadState::kLoaded) return;
  if (context != nullptr) {
    if (h.version == 6)
      h.v6->finalize(context);
    else if (h.version == 5)
      h.v5->finalize(context);
    else
      h.v4->finalize(context);
  }
  if (--h.refcount > 0) return;
  FAKE_INFO(kSubInit, "PROFILER/Plugin: Closing profiler plugin %s", h.name);
  __atomic_store_n(&g_event_mask, 0, __ATOMIC_RELAXED);  // nothing left to deliver to
  if (h.lib != nullptr) dlclose(h.lib);
  h.lib = nullptr;
  h.v4 = nullptr;
  h.v5 = nullptr;
  h.v6 = nullptr;
  __atomic_store_n(&h.version, 0, __ATOMIC_RELEASE);
  h.state = LoadState::kReady;  // a later communicator reloads with a fresh dlopen
}

int ProfilerMask() { return __atomic_load_n(&g_event_mask, __ATOMIC_RELAXED); }

SentinelNcclLogger PluginLogger() { return Logger; }

int ProfilerLoadedVersion() {
  Host& h = H();
  return __atomic_load_n(&h.version, __ATOMIC_ACQUIRE);
}

// The event calls below read the table without the lock: a table is only replaced after the last
// communicator (and so every event source) is gone, as in NCCL.
void ProfilerStart(void* context, void** handle, SentinelEventDescrV6* d) {
  *handle = nullptr;
  Host& h = H();
  int version = __atomic_load_n(&h.version, __ATOMIC_ACQUIRE);
  if (version == 6) {
    h.v6->start_event(context, handle, d);
  } else if (version == 5) {
    h.v5->start_event(context, handle, d);
  } else if (version == 4) {
    // docs/nccl-facts.md "3.8 What older plugin ABIs see": API events dropped (handle not written);
    // Coll/P2p parent = legacy Group handle.
    if (d->type >= kSentinelProfileGroupApi) return;
    SentinelEventDescrV4 d4;
    memset(&d4, 0, sizeof(d4));
    d4.type = static_cast<uint8_t>(d->type);
    d4.parent_obj = d->parent_obj;
    d4.rank = d->rank;
    switch (d->type) {
      case kSentinelProfileColl:
        d4.parent_obj = d->coll.parent_group;
        d4.coll.seq_number = d->coll.seq_number;
        d4.coll.func = d->coll.func;
        d4.coll.send_buff = d->coll.send_buff;
        d4.coll.recv_buff = d->coll.recv_buff;
        d4.coll.count = d->coll.count;
        d4.coll.root = d->coll.root;
        d4.coll.datatype = d->coll.datatype;
        d4.coll.n_channels = d->coll.n_channels;
        d4.coll.n_warps = d->coll.n_warps;
        d4.coll.algo = d->coll.algo;
        d4.coll.proto = d->coll.proto;
        break;
      case kSentinelProfileP2p:
        d4.parent_obj = d->p2p.parent_group;
        d4.p2p.func = d->p2p.func;
        d4.p2p.buff = d->p2p.buff;
        d4.p2p.datatype = d->p2p.datatype;
        d4.p2p.count = d->p2p.count;
        d4.p2p.peer = d->p2p.peer;
        // NCCL does not copy it: garbage on 2.28
        // (docs/nccl-facts.md "3.8 What older plugin ABIs see")
        d4.p2p.n_channels = 0xA5;
        break;
      case kSentinelProfileProxyOp:
        d4.proxy_op.pid = d->proxy_op.pid;
        d4.proxy_op.channel_id = d->proxy_op.channel_id;
        d4.proxy_op.peer = d->proxy_op.peer;
        d4.proxy_op.n_steps = d->proxy_op.n_steps;
        d4.proxy_op.chunk_size = d->proxy_op.chunk_size;
        d4.proxy_op.is_send = d->proxy_op.is_send;
        break;
      case kSentinelProfileProxyStep:
        d4.proxy_step.step = d->proxy_step.step;
        break;
      case kSentinelProfileKernelCh:
        d4.kernel_ch.channel_id = d->kernel_ch.channel_id;
        d4.kernel_ch.p_timer = d->kernel_ch.p_timer;
        break;
      case kSentinelProfileNetPlugin:
        d4.net_plugin.id = d->net_plugin.id;
        d4.net_plugin.data = d->net_plugin.data;
        break;
      default:
        break;
    }
    h.v4->start_event(context, handle, &d4);
  }
}

void ProfilerStop(void* handle) {
  Host& h = H();
  int version = __atomic_load_n(&h.version, __ATOMIC_ACQUIRE);
  if (handle == nullptr) return;
  if (version == 6)
    h.v6->stop_event(handle);
  else if (version == 5)
    h.v5->stop_event(handle);
  else if (version == 4)
    h.v4->stop_event(handle);
}

void ProfilerRecord(void* handle, int state, SentinelEventStateArgs* args) {
  Host& h = H();
  int version = __atomic_load_n(&h.version, __ATOMIC_ACQUIRE);
  if (handle == nullptr) return;
  if (version == 6) {
    h.v6->record_event_state(handle, state, args);
  } else if (version == 5) {
    h.v5->record_event_state(handle, state, args);
  } else if (version == 4) {
    if (state == kSentinelStateGroupStartApiStop || state == kSentinelStateGroupEndApiStart) return;
    h.v4->record_event_state(handle, state, args);
  }
}

}  // namespace sentinel::testing
