// libnccl-net-sentinel.so: a net plugin that wraps the real one (SENTINEL_NET_WRAP) and observes
// devices, connections and request latencies (plugin/net/README.md).
//
// Loading happens in the library constructor, before NCCL reads our table: the exported table then
// has the real plugin's name and exactly the real plugin's NULL slots, so NCCL sees the same plugin
// it would have seen without us. Every call is forwarded unchanged and its result returned
// unchanged.
//
// Data path (isend/irecv/test on NCCL's proxy thread): no lock, no allocation, no syscall. Comms
// are slots of a fixed array (never reused, so closed connections keep their counters); each comm
// owns a ring of request tags, used by the one proxy thread that drives it; counters are
// single-writer relaxed atomics that the snapshot reads from any thread.
#include <dlfcn.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "absl/base/optimization.h"

#include "common/sentinel_env.h"
#include "plugin/base/clock.h"
#include "plugin/base/plugin_dlopen.h"
#include "plugin/base/raw_log.h"
#include "plugin/net/net_abi.h"
#include "plugin/net/net_observer.h"
#include "plugin/net/net_reporter.h"
#include "plugin/net/net_versions.h"

namespace sentinel::net {
namespace {

constexpr int kReqsPerConn = 64;  // NCCL keeps at most 32 requests in flight per comm
constexpr int kMaxListens = 1024;
constexpr int kMaxRecvs = 64;  // multi-recv n an int-size plugin can be given (NCCL: <= 8)

inline void Bump(std::atomic<uint64_t>& c, uint64_t by) {
  // Single writer (the comm's proxy thread): a load and a store, no locked instruction.
  c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

// The plugin's one clock, unsigned for the tick arithmetic here.
uint64_t MonoNs() { return static_cast<uint64_t>(plugin::MonoNs()); }

inline uint64_t Ticks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return MonoNs();
#endif
}

// A (ticks, ns) pair read as close together as this thread can: the ticks on both sides of the
// clock read, the tightest of a few tries. A preemption between two plain reads would skew the
// ticks -> ns rate by its whole length (tens of ms on a loaded host) in a young process.
void ReadClockPair(uint64_t* ticks, uint64_t* ns) {
  uint64_t best = ~0ull;
  for (int i = 0; i < 4; ++i) {
    const uint64_t before = Ticks();
    const uint64_t mono = MonoNs();
    const uint64_t after = Ticks();
    if (after - before < best) {
      best = after - before;
      *ticks = before + (after - before) / 2;
      *ns = mono;
    }
  }
}

inline int SizeClass(uint64_t bytes) {
  int c = 0;
  for (uint64_t limit = 4096; c < SENTINEL_NET_SIZE_CLASSES - 1 && bytes >= limit; limit <<= 2) ++c;
  return c;
}

struct Req {
  void* real = nullptr;
  uint64_t t0 = 0;
  uint64_t bytes = 0;
  uint32_t conn = 0;
  int n = 1;
  std::atomic<uint32_t> used{0};
};

struct alignas(64) Conn {
  void* real = nullptr;
  uint64_t link_id = 0;
  int dev = -1;
  int is_send = 0;
  uint32_t cursor = 0;  // the proxy thread's next request tag
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> lat_sum{0};  // ticks
  std::atomic<uint64_t> lat_max{0};
  std::atomic<uint64_t> class_requests[SENTINEL_NET_SIZE_CLASSES] = {};
  std::atomic<uint64_t> class_lat[SENTINEL_NET_SIZE_CLASSES] = {};
  Req reqs[kReqsPerConn];
};

struct Listen {
  void* real = nullptr;
  uint64_t link_id = 0;
  int dev = -1;
};

// The real plugin's tables, copied at load; g_real_has[v]: it exports ncclNetPlugin_v<v>.
template <int V>
typename NetApi<V>::Table g_real{};
bool g_real_has[kNewestNetVersion + 1] = {};
const char* g_real_name = nullptr;
std::atomic<int> g_refcount{0};  // v11 table over an older plugin: NCCL's init-once rule
std::atomic<int> g_announced{0};
int g_wrapped_version = 0;
Conn g_conns[SENTINEL_NET_MAX_CONNS];
std::atomic<uint32_t> g_nconns{0};
Listen g_listens[kMaxListens];
std::atomic<uint32_t> g_nlistens{0};
SentinelNetDevice g_devices[SENTINEL_NET_MAX_DEVICES];
std::atomic<int> g_ndevices{0};
std::atomic<uint64_t> g_requests_untracked{0};
std::atomic<uint64_t> g_conns_untracked{0};
uint64_t g_tick0 = 0;
uint64_t g_mono0 = 0;

template <typename T, size_t N>
T* InArray(T (&arr)[N], void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  auto base = reinterpret_cast<uintptr_t>(&arr[0]);
  if (v < base || v >= base + sizeof(arr) || (v - base) % sizeof(T) != 0) return nullptr;
  return reinterpret_cast<T*>(p);
}

Req* AsReq(void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  auto base = reinterpret_cast<uintptr_t>(&g_conns[0]);
  if (v < base || v >= base + sizeof(g_conns)) return nullptr;
  size_t off = (v - base) % sizeof(Conn);
  size_t reqs_off = offsetof(Conn, reqs);
  if (off < reqs_off || (off - reqs_off) % sizeof(Req) != 0) return nullptr;
  return reinterpret_cast<Req*>(p);
}

void* RealComm(void* comm) {
  Conn* c = InArray(g_conns, comm);
  return c != nullptr ? c->real : comm;
}

uint64_t HashHandle(const void* handle) {
  // FNV-1a over the opaque handle: both ends see the same bytes (listen fills, connect reads).
  uint64_t h = 1469598103934665603ull;
  const auto* b = static_cast<const unsigned char*>(handle);
  for (int i = 0; i < SENTINEL_NET_HANDLE_MAXSIZE; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

void* NewConn(void* real, uint64_t link_id, int dev, int is_send) {
  uint32_t i = g_nconns.fetch_add(1, std::memory_order_relaxed);
  if (i >= SENTINEL_NET_MAX_CONNS) {
    g_nconns.store(SENTINEL_NET_MAX_CONNS, std::memory_order_relaxed);
    g_conns_untracked.fetch_add(1, std::memory_order_relaxed);
    return real;  // NCCL gets the real comm: forwarded, not observed
  }
  Conn& c = g_conns[i];
  c.real = real;
  c.link_id = link_id;
  c.dev = dev;
  c.is_send = is_send;
  for (Req& r : c.reqs) r.conn = i;
  return &c;
}

// A request tag of this comm, or null (ring full: the request is forwarded untracked).
Req* Claim(Conn* c) {
  for (int probe = 0; probe < kReqsPerConn; ++probe) {
    Req& r = c->reqs[c->cursor++ % kReqsPerConn];
    if (r.used.load(std::memory_order_relaxed) == 0) {
      r.used.store(1, std::memory_order_relaxed);
      return &r;
    }
  }
  g_requests_untracked.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

// Wraps a request the real plugin returned; null and NCCL's optional-completion marker stay raw.
void* Tag(Conn* c, void* real_req, uint64_t bytes, int n, uint64_t t0) {
  if (real_req == nullptr || real_req == SENTINEL_NET_OPTIONAL_RECV_COMPLETION) return real_req;
  Req* r = Claim(c);
  if (r == nullptr) return real_req;
  r->real = real_req;
  r->bytes = bytes;
  r->n = n;
  r->t0 = t0;
  return r;
}

// ---- the version-neutral core: observation around one forwarded call ---------------------------

void OnGetProperties(int dev, const char* name, const char* pci_path, uint64_t guid,
                     int ptr_support, int speed, int port, int max_comms, float latency) {
  if (dev < 0 || dev >= SENTINEL_NET_MAX_DEVICES) return;
  // Slow path (init time). Benign if two threads record the same device at once.
  SentinelNetDevice& d = g_devices[dev];
  snprintf(d.name, sizeof(d.name), "%s", name != nullptr ? name : "");
  snprintf(d.pci_path, sizeof(d.pci_path), "%s", pci_path != nullptr ? pci_path : "");
  d.guid = guid;
  d.ptr_support = ptr_support;
  d.speed_mbps = speed;
  d.port = port;
  d.max_comms = max_comms;
  d.latency_us = latency;
  int n = g_ndevices.load(std::memory_order_relaxed);
  while (n < dev + 1 && !g_ndevices.compare_exchange_weak(n, dev + 1, std::memory_order_release)) {
  }
}

template <typename P>
void ObserveProps(int dev, const P& p) {
  OnGetProperties(dev, p.name, p.pci_path, p.guid, p.ptr_support, p.speed, p.port, p.max_comms,
                  p.latency);
}

// After listen: NCCL gets our listen slot (or the real comm when we are full).
void OnListen(SentinelNcclResult rc, int dev, const void* handle, void* real, void** listen_comm) {
  *listen_comm = real;
  if (rc != kSentinelNcclSuccess || real == nullptr || handle == nullptr) return;
  uint32_t i = g_nlistens.fetch_add(1, std::memory_order_relaxed);
  if (i >= kMaxListens) return;  // forwarded, its accepted comms not observed
  g_listens[i].real = real;
  g_listens[i].link_id = HashHandle(handle);
  g_listens[i].dev = dev;
  *listen_comm = &g_listens[i];
}

void* ListenReal(void* listen_comm) {
  Listen* l = InArray(g_listens, listen_comm);
  return l != nullptr ? l->real : listen_comm;
}

void OnAccept(SentinelNcclResult rc, void* listen_comm, void* real, void** recv_comm) {
  *recv_comm = real;
  Listen* l = InArray(g_listens, listen_comm);
  if (rc == kSentinelNcclSuccess && real != nullptr && l != nullptr) {
    *recv_comm = NewConn(real, l->link_id, l->dev, 0);
  }
}

// After isend/irecv on an observed comm: errors counted, a successful request tagged. t0: the
// ticks read before the real call, so a request's latency covers the whole window the transport
// had it (the plugin's own clock starts inside that call, never before ours).
inline void OnPost(Conn* c, SentinelNcclResult rc, void* real_req, uint64_t bytes, int n,
                   uint64_t t0, void** request) {
  if (ABSL_PREDICT_FALSE(rc != kSentinelNcclSuccess)) {
    Bump(c->errors, 1);
    *request = real_req;
    return;
  }
  *request = Tag(c, real_req, bytes, n, t0);
}

inline void OnDone(Req* r, SentinelNcclResult rc, const int* done, const int* sizes) {
  Conn& c = g_conns[r->conn];
  if (ABSL_PREDICT_FALSE(rc != kSentinelNcclSuccess)) {
    Bump(c.errors, 1);
    return;
  }
  if (done == nullptr || *done == 0) return;
  uint64_t lat = Ticks() - r->t0;
  uint64_t bytes = r->bytes;
  if (sizes != nullptr) {  // what really arrived (recv) or went (send)
    bytes = 0;
    for (int i = 0; i < r->n; ++i) bytes += static_cast<uint64_t>(sizes[i]);
  }
  int cls = SizeClass(bytes);
  Bump(c.bytes, bytes);
  Bump(c.requests, 1);
  Bump(c.lat_sum, lat);
  if (lat > c.lat_max.load(std::memory_order_relaxed))
    c.lat_max.store(lat, std::memory_order_relaxed);
  Bump(c.class_requests[cls], 1);
  Bump(c.class_lat[cls], lat);
  // `real` stays readable until the tag is reused: irecvConsumed may name a completed request.
  r->used.store(0, std::memory_order_release);
}

void Announce(int exported, int real) {
  g_wrapped_version = real;
  if (g_announced.exchange(1, std::memory_order_relaxed) == 0) {
    plugin::RawLog("net: NCCL uses our ncclNetPlugin_v%d table over %s's v%d table", exported,
                   g_real_name != nullptr ? g_real_name : "?", real);
  }
}

// ---- per-version adapters ----------------------------------------------------------------------
// Fwd<K, M>: the functions of our exported table v<K> over the real plugin's table v<M> (M <= K).
// With K == M every argument and result passes unchanged (sizes are widened only for our
// counters). With K > M (NCCL picked a newer table than the plugin has) the arguments are converted
// as NCCL 2.28's own compat layer converts them for a v<M> plugin, so the plugin receives what it
// would have received without us.
template <int K, int M>
struct Fwd {
  using SizeK = typename NetApi<K>::Size;
  using SizeM = typename NetApi<M>::Size;
  static constexpr bool kNarrowSize = sizeof(SizeM) < sizeof(SizeK);
  static constexpr bool kNarrowReg =
      sizeof(typename NetApi<M>::RegSize) < sizeof(typename NetApi<K>::RegSize);
  static const typename NetApi<M>::Table& Real() { return g_real<M>; }

  static SentinelNcclResult DoInit(void** ctx, uint64_t comm_id, SentinelNetCommConfigV11* config,
                                   SentinelNcclLogger log_fn, SentinelNetProfilerCallback prof_fn) {
    SentinelNcclResult rc = kSentinelNcclSuccess;
    if constexpr (HasContext(M)) {
      rc = Real().init(ctx, comm_id, config, log_fn, prof_fn);
    } else if constexpr (HasContext(K)) {
      // NCCL 2.28 calls a v11 init per communicator; an older plugin is initialised once, and a v10
      // plugin gets the communicator's traffic class through connect.
      if constexpr (M == 10) {
        if (ctx != nullptr) {
          *ctx = new SentinelNetCommConfigV10{config != nullptr ? config->traffic_class : -1};
        }
      }
      if (g_refcount.fetch_add(1, std::memory_order_acq_rel) > 0) return kSentinelNcclSuccess;
      if constexpr (HasProfiler(M)) {
        rc = Real().init(log_fn, prof_fn);
      } else {
        rc = Real().init(log_fn);
      }
    } else if constexpr (HasProfiler(M)) {
      rc = Real().init(log_fn, prof_fn);
    } else {
      rc = Real().init(log_fn);
    }
    if (rc == kSentinelNcclSuccess) {
      Announce(K, M);
      StartReporter();  // slow path: once per process
    }
    return rc;
  }
  static SentinelNcclResult Init6(SentinelNcclLogger log_fn) {
    return DoInit(nullptr, 0, nullptr, log_fn, nullptr);
  }
  static SentinelNcclResult Init10(SentinelNcclLogger log_fn, SentinelNetProfilerCallback prof) {
    return DoInit(nullptr, 0, nullptr, log_fn, prof);
  }
  static SentinelNcclResult Init11(void** ctx, uint64_t comm_id, SentinelNetCommConfigV11* config,
                                   SentinelNcclLogger log_fn, SentinelNetProfilerCallback prof) {
    return DoInit(ctx, comm_id, config, log_fn, prof);
  }

  static SentinelNcclResult Devices(int* ndev) { return Real().devices(ndev); }

  static SentinelNcclResult GetProperties(int dev, typename NetApi<K>::Props* props) {
    if constexpr (K == M) {
      SentinelNcclResult rc = Real().get_properties(dev, props);
      if (rc == kSentinelNcclSuccess && props != nullptr) ObserveProps(dev, *props);
      return rc;
    } else {
      typename NetApi<M>::Props mine{};
      SentinelNcclResult rc = Real().get_properties(dev, &mine);
      if (rc != kSentinelNcclSuccess) return rc;
      ObserveProps(dev, mine);
      if (props != nullptr) ConvertProps<K, M>(dev, mine, props);
      return rc;
    }
  }

  static SentinelNcclResult DoListen(void* ctx, int dev, void* handle, void** listen_comm) {
    void* real = nullptr;
    SentinelNcclResult rc;
    if constexpr (HasContext(M)) {
      rc = Real().listen(ctx, dev, handle, &real);
    } else {
      rc = Real().listen(dev, handle, &real);
    }
    if (listen_comm != nullptr) OnListen(rc, dev, handle, real, listen_comm);
    return rc;
  }
  static SentinelNcclResult Listen6(int dev, void* handle, void** listen_comm) {
    return DoListen(nullptr, dev, handle, listen_comm);
  }
  static SentinelNcclResult Listen11(void* ctx, int dev, void* handle, void** listen_comm) {
    return DoListen(ctx, dev, handle, listen_comm);
  }

  static SentinelNcclResult DoConnect(void* ctx, SentinelNetCommConfigV10* config, int dev,
                                      void* handle, void** send_comm,
                                      SentinelNetDeviceHandleV11** send_dev_comm) {
    void* real = nullptr;
    SentinelNcclResult rc;
    if constexpr (HasContext(M)) {
      rc = Real().connect(ctx, dev, handle, &real, send_dev_comm);
    } else if constexpr (M == 10) {
      // From a v11 table the config is the one our init stored in the context.
      auto* cfg = K == 10 ? config : static_cast<SentinelNetCommConfigV10*>(ctx);
      rc = Real().connect(dev, cfg, handle, &real, send_dev_comm);
    } else if constexpr (HasDeviceMr(M)) {
      rc = Real().connect(dev, handle, &real, send_dev_comm);
    } else {
      rc = Real().connect(dev, handle, &real);
    }
    if (send_comm == nullptr) return rc;
    *send_comm = real;
    if (rc == kSentinelNcclSuccess && real != nullptr && handle != nullptr) {
      *send_comm = NewConn(real, HashHandle(handle), dev, 1);
    }
    return rc;
  }
  static SentinelNcclResult Connect6(int dev, void* handle, void** send_comm) {
    return DoConnect(nullptr, nullptr, dev, handle, send_comm, nullptr);
  }
  static SentinelNcclResult Connect7(int dev, void* handle, void** send_comm,
                                     SentinelNetDeviceHandleV7** dev_comm) {
    return DoConnect(nullptr, nullptr, dev, handle, send_comm, dev_comm);
  }
  static SentinelNcclResult Connect10(int dev, SentinelNetCommConfigV10* config, void* handle,
                                      void** send_comm, SentinelNetDeviceHandleV7** dev_comm) {
    return DoConnect(nullptr, config, dev, handle, send_comm, dev_comm);
  }
  static SentinelNcclResult Connect11(void* ctx, int dev, void* handle, void** send_comm,
                                      SentinelNetDeviceHandleV11** dev_comm) {
    return DoConnect(ctx, nullptr, dev, handle, send_comm, dev_comm);
  }

  static SentinelNcclResult DoAccept(void* listen_comm, void** recv_comm,
                                     SentinelNetDeviceHandleV11** recv_dev_comm) {
    void* real = nullptr;
    SentinelNcclResult rc;
    if constexpr (HasDeviceMr(M)) {
      rc = Real().accept(ListenReal(listen_comm), &real, recv_dev_comm);
    } else {
      rc = Real().accept(ListenReal(listen_comm), &real);
    }
    if (recv_comm != nullptr) OnAccept(rc, listen_comm, real, recv_comm);
    return rc;
  }
  static SentinelNcclResult Accept6(void* listen_comm, void** recv_comm) {
    return DoAccept(listen_comm, recv_comm, nullptr);
  }
  static SentinelNcclResult Accept7(void* listen_comm, void** recv_comm,
                                    SentinelNetDeviceHandleV7** dev_comm) {
    return DoAccept(listen_comm, recv_comm, dev_comm);
  }

  static SentinelNcclResult RegMr(void* comm, void* data, typename NetApi<K>::RegSize size,
                                  int type, void** mhandle) {
    if constexpr (kNarrowReg) {
      if (size >= kMaxIntRegBytes) return kSentinelNcclInternalError;
    }
    return Real().reg_mr(RealComm(comm), data, static_cast<typename NetApi<M>::RegSize>(size), type,
                         mhandle);
  }
  static SentinelNcclResult RegMrDmaBuf(void* comm, void* data, size_t size, int type,
                                        uint64_t offset, int fd, void** mhandle) {
    return Real().reg_mr_dma_buf(RealComm(comm), data, size, type, offset, fd, mhandle);
  }
  static SentinelNcclResult DeregMr(void* comm, void* mhandle) {
    return Real().dereg_mr(RealComm(comm), mhandle);
  }

  static SentinelNcclResult RealIsend(void* comm, void* data, SizeK size, int tag, void* mhandle,
                                      void* phandle, void** request) {
    if constexpr (kNarrowSize) {
      if (size > kMaxIntNetBytes) return kSentinelNcclInternalError;
    }
    if constexpr (HasProfiler(M)) {
      return Real().isend(comm, data, static_cast<SizeM>(size), tag, mhandle, phandle, request);
    } else {
      (void)phandle;
      return Real().isend(comm, data, static_cast<SizeM>(size), tag, mhandle, request);
    }
  }
  static SentinelNcclResult DoIsend(void* send_comm, void* data, SizeK size, int tag, void* mhandle,
                                    void* phandle, void** request) {
    Conn* c = InArray(g_conns, send_comm);
    if (ABSL_PREDICT_FALSE(c == nullptr || request == nullptr)) {
      return RealIsend(RealComm(send_comm), data, size, tag, mhandle, phandle, request);
    }
    void* real_req = nullptr;
    const uint64_t t0 = Ticks();
    SentinelNcclResult rc = RealIsend(c->real, data, size, tag, mhandle, phandle, &real_req);
    OnPost(c, rc, real_req, static_cast<uint64_t>(size), 1, t0, request);
    return rc;
  }
  static SentinelNcclResult Isend6(void* send_comm, void* data, SizeK size, int tag, void* mhandle,
                                   void** request) {
    return DoIsend(send_comm, data, size, tag, mhandle, nullptr, request);
  }
  static SentinelNcclResult Isend10(void* send_comm, void* data, SizeK size, int tag, void* mhandle,
                                    void* phandle, void** request) {
    return DoIsend(send_comm, data, size, tag, mhandle, phandle, request);
  }

  static SentinelNcclResult RealIrecv(void* comm, int n, void** data, SizeK* sizes, int* tags,
                                      void** mhandles, void** phandles, void** request) {
    if constexpr (K != M && M <= 8) {
      // NCCL's compat layer clears the optional-completion preset for these plugins.
      if (request != nullptr && *request == SENTINEL_NET_OPTIONAL_RECV_COMPLETION) {
        *request = nullptr;
      }
    }
    SizeM* msizes;
    SizeM narrow[kMaxRecvs];
    if constexpr (kNarrowSize) {
      if (n < 0 || n > kMaxRecvs || sizes == nullptr) return kSentinelNcclInternalError;
      for (int i = 0; i < n; ++i) {
        if (sizes[i] > kMaxIntNetBytes) return kSentinelNcclInternalError;
        narrow[i] = static_cast<SizeM>(sizes[i]);
      }
      msizes = narrow;
    } else {
      msizes = sizes;
    }
    if constexpr (HasProfiler(M)) {
      return Real().irecv(comm, n, data, msizes, tags, mhandles, phandles, request);
    } else {
      (void)phandles;
      return Real().irecv(comm, n, data, msizes, tags, mhandles, request);
    }
  }
  static SentinelNcclResult DoIrecv(void* recv_comm, int n, void** data, SizeK* sizes, int* tags,
                                    void** mhandles, void** phandles, void** request) {
    Conn* c = InArray(g_conns, recv_comm);
    if (ABSL_PREDICT_FALSE(c == nullptr || request == nullptr)) {
      return RealIrecv(RealComm(recv_comm), n, data, sizes, tags, mhandles, phandles, request);
    }
    void* real_req = *request;  // NCCL may preset NCCL_NET_OPTIONAL_RECV_COMPLETION (§7.3)
    const uint64_t t0 = Ticks();
    SentinelNcclResult rc = RealIrecv(c->real, n, data, sizes, tags, mhandles, phandles, &real_req);
    uint64_t posted = 0;
    if (sizes != nullptr) {
      for (int i = 0; i < n; ++i) posted += static_cast<uint64_t>(sizes[i]);
    }
    OnPost(c, rc, real_req, posted, n, t0, request);
    return rc;
  }
  static SentinelNcclResult Irecv6(void* recv_comm, int n, void** data, SizeK* sizes, int* tags,
                                   void** mhandles, void** request) {
    return DoIrecv(recv_comm, n, data, sizes, tags, mhandles, nullptr, request);
  }
  static SentinelNcclResult Irecv10(void* recv_comm, int n, void** data, SizeK* sizes, int* tags,
                                    void** mhandles, void** phandles, void** request) {
    return DoIrecv(recv_comm, n, data, sizes, tags, mhandles, phandles, request);
  }

  static SentinelNcclResult Iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                                   void** request) {
    return Real().iflush(RealComm(recv_comm), n, data, sizes, mhandles, request);
  }
  static SentinelNcclResult Test(void* request, int* done, int* sizes) {
    Req* r = AsReq(request);
    if (ABSL_PREDICT_FALSE(r == nullptr)) return Real().test(request, done, sizes);
    SentinelNcclResult rc = Real().test(r->real, done, sizes);
    OnDone(r, rc, done, sizes);
    return rc;
  }
  static SentinelNcclResult CloseSend(void* c) { return Real().close_send(RealComm(c)); }
  static SentinelNcclResult CloseRecv(void* c) { return Real().close_recv(RealComm(c)); }
  static SentinelNcclResult CloseListen(void* l) { return Real().close_listen(ListenReal(l)); }
  static SentinelNcclResult GetDeviceMr(void* comm, void* mhandle, void** dptr_mhandle) {
    return Real().get_device_mr(RealComm(comm), mhandle, dptr_mhandle);
  }
  static SentinelNcclResult IrecvConsumed(void* recv_comm, int n, void* request) {
    Req* r = AsReq(request);
    return Real().irecv_consumed(RealComm(recv_comm), n, r != nullptr ? r->real : request);
  }
  static SentinelNcclResult MakeVDevice(int* d, SentinelNetVDevicePropsV11* props) {
    return Real().make_v_device(d, props);
  }
  static SentinelNcclResult Finalize(void* ctx) {
    if constexpr (HasContext(M)) {
      return Real().finalize(ctx);
    } else {
      // NCCL's compat layer: an older plugin is never finalised; the count goes down.
      g_refcount.fetch_sub(1, std::memory_order_acq_rel);
      if constexpr (M == 10) delete static_cast<SentinelNetCommConfigV10*>(ctx);
      return kSentinelNcclSuccess;
    }
  }
  static SentinelNcclResult SetNetAttr(void* ctx, SentinelNetAttrV11* attr) {
    return Real().set_net_attr(ctx, attr);
  }
};

// Without a usable real plugin: init fails, so NCCL falls back exactly as it does when the plugin
// named in NCCL_NET_PLUGIN cannot be loaded or has no table NCCL knows (§7.1, §7.2).
SentinelNcclResult NoPluginDevices(int* ndev) {
  if (ndev != nullptr) *ndev = 0;
  return kSentinelNcclInternalError;
}
SentinelNcclResult NoPluginInit6(SentinelNcclLogger) { return kSentinelNcclInternalError; }
SentinelNcclResult NoPluginInit10(SentinelNcclLogger, SentinelNetProfilerCallback) {
  return kSentinelNcclInternalError;
}
SentinelNcclResult NoPluginInit11(void**, uint64_t, SentinelNetCommConfigV11*, SentinelNcclLogger,
                                  SentinelNetProfilerCallback) {
  return kSentinelNcclInternalError;
}

}  // namespace
}  // namespace sentinel::net

// The tables NCCL dlsym()s (§7.1: the first of v11..v6 found wins). All six are exported; each is
// filled by the constructor below, before dlopen returns to NCCL (plugin/net/README.md).
namespace sentinel::net {
namespace {
template <typename T, typename I>
constexpr T Unloaded(I init) noexcept {
  T t{};
  t.name = "sentinel";
  t.init = init;
  t.devices = &NoPluginDevices;
  return t;
}
}  // namespace
}  // namespace sentinel::net

extern "C" {
__attribute__((visibility("default"))) SentinelNetV6 ncclNetPlugin_v6 =
    sentinel::net::Unloaded<SentinelNetV6>(&sentinel::net::NoPluginInit6);
__attribute__((visibility("default"))) SentinelNetV7 ncclNetPlugin_v7 =
    sentinel::net::Unloaded<SentinelNetV7>(&sentinel::net::NoPluginInit6);
__attribute__((visibility("default"))) SentinelNetV8 ncclNetPlugin_v8 =
    sentinel::net::Unloaded<SentinelNetV8>(&sentinel::net::NoPluginInit6);
__attribute__((visibility("default"))) SentinelNetV9 ncclNetPlugin_v9 =
    sentinel::net::Unloaded<SentinelNetV9>(&sentinel::net::NoPluginInit6);
__attribute__((visibility("default"))) SentinelNetV10 ncclNetPlugin_v10 =
    sentinel::net::Unloaded<SentinelNetV10>(&sentinel::net::NoPluginInit10);
__attribute__((visibility("default"))) SentinelNetV11 ncclNetPlugin_v11 =
    sentinel::net::Unloaded<SentinelNetV11>(&sentinel::net::NoPluginInit11);
}

namespace sentinel::net {
namespace {

template <int V>
typename NetApi<V>::Table& Exported();
template <>
SentinelNetV6& Exported<6>() {
  return ncclNetPlugin_v6;
}
template <>
SentinelNetV7& Exported<7>() {
  return ncclNetPlugin_v7;
}
template <>
SentinelNetV8& Exported<8>() {
  return ncclNetPlugin_v8;
}
template <>
SentinelNetV9& Exported<9>() {
  return ncclNetPlugin_v9;
}
template <>
SentinelNetV10& Exported<10>() {
  return ncclNetPlugin_v10;
}
template <>
SentinelNetV11& Exported<11>() {
  return ncclNetPlugin_v11;
}

// A slot of ours exists exactly where the real one does.
template <typename F, typename R>
F Slot(F ours, R real) {
  return real != nullptr ? ours : nullptr;
}

// Fills our table v<K> to forward to the real table v<M>, NULL slots as NCCL would see them.
template <int K, int M>
void Fill() {
  using W = Fwd<K, M>;
  const auto& real = g_real<M>;
  typename NetApi<K>::Table t{};
  t.name = real.name;  // NCCL_NET=<real name> keeps matching (§7.2)
  if constexpr (HasContext(K)) {
    t.init = &W::Init11;
    t.listen = &W::Listen11;
    t.connect = &W::Connect11;
  } else {
    t.listen = &W::Listen6;
    if constexpr (HasProfiler(K)) {
      t.init = &W::Init10;
      t.connect = &W::Connect10;
    } else if constexpr (HasDeviceMr(K)) {
      t.init = &W::Init6;
      t.connect = &W::Connect7;
    } else {
      t.init = &W::Init6;
      t.connect = &W::Connect6;
    }
  }
  if constexpr (HasDeviceMr(K)) {
    t.accept = &W::Accept7;
  } else {
    t.accept = &W::Accept6;
  }
  if constexpr (HasProfiler(K)) {
    t.isend = &W::Isend10;
    t.irecv = &W::Irecv10;
  } else {
    t.isend = &W::Isend6;
    t.irecv = &W::Irecv6;
  }
  t.devices = &W::Devices;
  t.get_properties = &W::GetProperties;
  t.reg_mr = Slot(&W::RegMr, real.reg_mr);
  t.reg_mr_dma_buf = Slot(&W::RegMrDmaBuf, real.reg_mr_dma_buf);
  t.dereg_mr = Slot(&W::DeregMr, real.dereg_mr);
  t.iflush = Slot(&W::Iflush, real.iflush);
  t.test = &W::Test;
  t.close_send = Slot(&W::CloseSend, real.close_send);
  t.close_recv = Slot(&W::CloseRecv, real.close_recv);
  t.close_listen = Slot(&W::CloseListen, real.close_listen);
  if constexpr (HasDeviceMr(K) && HasDeviceMr(M)) {
    t.get_device_mr = Slot(&W::GetDeviceMr, real.get_device_mr);
    t.irecv_consumed = Slot(&W::IrecvConsumed, real.irecv_consumed);
  }
  if constexpr (HasVDevice(K) && HasVDevice(M)) {
    t.make_v_device = Slot(&W::MakeVDevice, real.make_v_device);
  }
  if constexpr (HasContext(K)) {
    if constexpr (HasContext(M)) {
      t.finalize = Slot(&W::Finalize, real.finalize);
      t.set_net_attr = Slot(&W::SetNetAttr, real.set_net_attr);
    } else {
      t.finalize = &W::Finalize;  // NCCL's compat layer always has one
    }
  }
  Exported<K>() = t;
}

// Our table v<K> forwards to the real table v<M>, M = the newest the plugin has that is <= K:
// exactly the table NCCL would have used without us when it picks v<K> (newer than the plugin:
// NCCL's compat rules; none: our init fails, as NCCL's load would).
template <int K>
int FillFor() {
  int m = K;
  while (m >= kOldestNetVersion && !g_real_has[m]) --m;
  if constexpr (K >= 6) {
    if (m == 6) Fill<K, 6>();
  }
  if constexpr (K >= 7) {
    if (m == 7) Fill<K, 7>();
  }
  if constexpr (K >= 8) {
    if (m == 8) Fill<K, 8>();
  }
  if constexpr (K >= 9) {
    if (m == 9) Fill<K, 9>();
  }
  if constexpr (K >= 10) {
    if (m == 10) Fill<K, 10>();
  }
  if constexpr (K >= 11) {
    if (m == 11) Fill<K, 11>();
  }
  return m >= kOldestNetVersion ? m : 0;
}

bool IsOurs(const void* table) {
  return table == &ncclNetPlugin_v6 || table == &ncclNetPlugin_v7 || table == &ncclNetPlugin_v8 ||
         table == &ncclNetPlugin_v9 || table == &ncclNetPlugin_v10 || table == &ncclNetPlugin_v11;
}

// Copies the real table v<V> if the plugin exports it; false if it is ours or incomplete.
template <int V>
bool Probe(void* dl, const char* value, int* newest) {
  char sym[32];
  snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", V);
  void* table = dlsym(dl, sym);
  if (table == nullptr) return true;
  if (IsOurs(table)) {
    plugin::RawLog("net: SENTINEL_NET_WRAP=%s names sentinel itself; nothing wrapped", value);
    return false;
  }
  const auto& real = *static_cast<const typename NetApi<V>::Table*>(table);
  if (real.init == nullptr || real.devices == nullptr || real.get_properties == nullptr ||
      real.listen == nullptr || real.connect == nullptr || real.accept == nullptr ||
      real.isend == nullptr || real.irecv == nullptr || real.test == nullptr) {
    plugin::RawLog("net: SENTINEL_NET_WRAP=%s: incomplete %s table; not used", value, sym);
    return true;
  }
  g_real<V> = real;
  g_real_has[V] = true;
  if (*newest == 0) {
    *newest = V;
    g_real_name = real.name;
  }
  return true;
}

void Load() {
  ReadClockPair(&g_tick0, &g_mono0);
  const char* value = rules::ProcessSentinelEnv().Text(rules::Var::kNetWrap);
  if (value == nullptr || value[0] == '\0') {
    plugin::RawLog(
        "net: NCCL_NET_PLUGIN=sentinel but SENTINEL_NET_WRAP is unset: no network to "
        "wrap; NCCL falls back to its internal transports");
    return;
  }
  char tried[1100];
  void* dl = plugin::DlopenLikeNccl(value, "nccl-net", tried, sizeof(tried));
  if (dl == nullptr) {
    const char* err = dlerror();
    plugin::RawLog(
        "net: SENTINEL_NET_WRAP=%s: cannot load (tried %s): %s; NCCL falls back to its "
        "internal transports, as without sentinel",
        value, tried, err != nullptr ? err : "unknown error");
    return;
  }
  // Every table the plugin has (NCCL 2.28 probes v11 down to v6 and takes the first).
  int newest = 0;
  if (!Probe<11>(dl, value, &newest) || !Probe<10>(dl, value, &newest) ||
      !Probe<9>(dl, value, &newest) || !Probe<8>(dl, value, &newest) ||
      !Probe<7>(dl, value, &newest) || !Probe<6>(dl, value, &newest)) {
    for (bool& has : g_real_has) has = false;
    return;
  }
  if (newest == 0) {
    plugin::RawLog(
        "net: SENTINEL_NET_WRAP=%s: no usable ncclNetPlugin_v11..v6 table; NCCL falls back "
        "to its internal transports",
        value);
    return;
  }
  g_wrapped_version = newest;
  int oldest = 0;
  for (int v = kOldestNetVersion; v <= kNewestNetVersion && oldest == 0; ++v) {
    if (g_real_has[v]) oldest = v;
  }
  FillFor<6>();
  FillFor<7>();
  FillFor<8>();
  FillFor<9>();
  FillFor<10>();
  FillFor<11>();
  plugin::RawLog("net: wrapping %s (%s, net API v%d; our tables v%d..v11 forward to it)", value,
                 g_real_name != nullptr ? g_real_name : "?", newest, oldest);
  // NCCL looks for the CollNet tables (in-network reductions, e.g. SHARP) in this library too.
  // We do not forward them, so with us in front NCCL runs without CollNet: say so, never silently.
  for (int v = kNewestNetVersion; v >= kOldestNetVersion; --v) {
    char sym[32];
    snprintf(sym, sizeof(sym), "ncclCollNetPlugin_v%d", v);
    if (dlsym(dl, sym) == nullptr) continue;
    plugin::RawLog(
        "net: %s also has %s (CollNet, in-network reductions); sentinel does not forward "
        "CollNet, so NCCL runs without it while NCCL_NET_PLUGIN=sentinel is set",
        value, sym);
    break;
  }
}

__attribute__((constructor)) void LoadAtDlopen() { Load(); }

}  // namespace
}  // namespace sentinel::net

// The profiler .so tells its SENTINEL_* problems through this one when both are loaded, so each
// is told once per process (common/sentinel_env.h).
extern "C" __attribute__((visibility("default"))) void sentinelTellEnvProblems(const char* lines,
                                                                               size_t len) {
  sentinel::rules::TellEnvProblemsHere(lines, len);
}

extern "C" __attribute__((visibility("default"))) int sentinelNetSnapshot(
    SentinelNetSnapshot* out) {
  using namespace sentinel::net;  // NOLINT(build/namespaces): one C entry point
  if (out == nullptr) return -1;
  memset(out, 0, sizeof(*out));
  out->wrapped_version = g_wrapped_version;
  snprintf(out->real_name, sizeof(out->real_name), "%s", g_real_name != nullptr ? g_real_name : "");
  int nd = g_ndevices.load(std::memory_order_acquire);
  out->ndevices = nd;
  for (int i = 0; i < nd; ++i) out->devices[i] = g_devices[i];
  // Ticks -> ns from the time since load (x86: TSC; elsewhere ticks already are ns).
  double ns_per_tick = 1.0;
#if defined(__x86_64__)
  uint64_t ticks_now = 0;
  uint64_t mono_now = 0;
  ReadClockPair(&ticks_now, &mono_now);
  uint64_t dt = ticks_now - g_tick0;
  uint64_t dn = mono_now - g_mono0;
  if (dt > 0 && dn > 0) ns_per_tick = static_cast<double>(dn) / static_cast<double>(dt);
#endif
  uint32_t n = g_nconns.load(std::memory_order_relaxed);
  if (n > SENTINEL_NET_MAX_CONNS) n = SENTINEL_NET_MAX_CONNS;
  out->nconns = static_cast<int32_t>(n);
  for (uint32_t i = 0; i < n; ++i) {
    const Conn& c = g_conns[i];
    SentinelNetConnStats& s = out->conns[i];
    s.link_id = c.link_id;
    s.dev = c.dev;
    s.is_send = c.is_send;
    s.bytes = c.bytes.load(std::memory_order_relaxed);
    s.requests = c.requests.load(std::memory_order_relaxed);
    s.errors = c.errors.load(std::memory_order_relaxed);
    s.latency_ns_sum = static_cast<uint64_t>(
        static_cast<double>(c.lat_sum.load(std::memory_order_relaxed)) * ns_per_tick);
    s.latency_ns_max = static_cast<uint64_t>(
        static_cast<double>(c.lat_max.load(std::memory_order_relaxed)) * ns_per_tick);
    for (int k = 0; k < SENTINEL_NET_SIZE_CLASSES; ++k) {
      s.class_requests[k] = c.class_requests[k].load(std::memory_order_relaxed);
      s.class_latency_ns_sum[k] = static_cast<uint64_t>(
          static_cast<double>(c.class_lat[k].load(std::memory_order_relaxed)) * ns_per_tick);
    }
  }
  out->requests_untracked = g_requests_untracked.load(std::memory_order_relaxed);
  out->conns_untracked = g_conns_untracked.load(std::memory_order_relaxed);
  return 0;
}
