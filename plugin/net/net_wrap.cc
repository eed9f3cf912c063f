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
#include "plugin/base/plugin_dlopen.h"
#include "plugin/base/raw_log.h"
#include "plugin/net/net_abi.h"
#include "plugin/net/net_observer.h"
#include "plugin/net/net_reporter.h"

namespace sentinel::net {
namespace {

constexpr int kReqsPerConn = 64;  // NCCL keeps at most 32 requests in flight per comm
constexpr int kMaxListens = 1024;

inline void Bump(std::atomic<uint64_t>& c, uint64_t by) {
  // Single writer (the comm's proxy thread): a load and a store, no locked instruction.
  c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

inline uint64_t Ticks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
#endif
}

uint64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
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

SentinelNetV11 g_real{};  // the real plugin's table (copied at load)
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
void* Tag(Conn* c, void* real_req, uint64_t bytes, int n) {
  if (real_req == nullptr || real_req == SENTINEL_NET_OPTIONAL_RECV_COMPLETION) return real_req;
  Req* r = Claim(c);
  if (r == nullptr) return real_req;
  r->real = real_req;
  r->bytes = bytes;
  r->n = n;
  r->t0 = Ticks();
  return r;
}

// ---- the exported table's functions ------------------------------------------------------------

SentinelNcclResult WInit(void** ctx, uint64_t comm_id, SentinelNetCommConfigV11* config,
                         SentinelNcclLogger log_fn, SentinelNetProfilerCallback prof_fn) {
  SentinelNcclResult rc = g_real.init(ctx, comm_id, config, log_fn, prof_fn);
  if (rc == kSentinelNcclSuccess) StartReporter();  // slow path: once per process
  return rc;
}

SentinelNcclResult WDevices(int* ndev) { return g_real.devices(ndev); }

SentinelNcclResult WGetProperties(int dev, SentinelNetPropertiesV11* props) {
  SentinelNcclResult rc = g_real.get_properties(dev, props);
  if (rc == kSentinelNcclSuccess && props != nullptr && dev >= 0 &&
      dev < SENTINEL_NET_MAX_DEVICES) {
    // Slow path (init time). Benign if two threads record the same device at once.
    SentinelNetDevice& d = g_devices[dev];
    snprintf(d.name, sizeof(d.name), "%s", props->name != nullptr ? props->name : "");
    snprintf(d.pci_path, sizeof(d.pci_path), "%s",
             props->pci_path != nullptr ? props->pci_path : "");
    d.guid = props->guid;
    d.ptr_support = props->ptr_support;
    d.speed_mbps = props->speed;
    d.port = props->port;
    d.max_comms = props->max_comms;
    d.latency_us = props->latency;
    int n = g_ndevices.load(std::memory_order_relaxed);
    while (n < dev + 1 &&
           !g_ndevices.compare_exchange_weak(n, dev + 1, std::memory_order_release)) {
    }
  }
  return rc;
}

SentinelNcclResult WListen(void* ctx, int dev, void* handle, void** listen_comm) {
  void* real = nullptr;
  SentinelNcclResult rc = g_real.listen(ctx, dev, handle, &real);
  if (listen_comm == nullptr) return rc;
  *listen_comm = real;
  if (rc != kSentinelNcclSuccess || real == nullptr || handle == nullptr) return rc;
  uint32_t i = g_nlistens.fetch_add(1, std::memory_order_relaxed);
  if (i >= kMaxListens) return rc;  // forwarded, its accepted comms not observed
  g_listens[i].real = real;
  g_listens[i].link_id = HashHandle(handle);
  g_listens[i].dev = dev;
  *listen_comm = &g_listens[i];
  return rc;
}

SentinelNcclResult WConnect(void* ctx, int dev, void* handle, void** send_comm,
                            SentinelNetDeviceHandleV11** send_dev_comm) {
  void* real = nullptr;
  SentinelNcclResult rc = g_real.connect(ctx, dev, handle, &real, send_dev_comm);
  if (send_comm == nullptr) return rc;
  *send_comm = real;
  if (rc == kSentinelNcclSuccess && real != nullptr && handle != nullptr) {
    *send_comm = NewConn(real, HashHandle(handle), dev, 1);
  }
  return rc;
}

SentinelNcclResult WAccept(void* listen_comm, void** recv_comm,
                           SentinelNetDeviceHandleV11** recv_dev_comm) {
  Listen* l = InArray(g_listens, listen_comm);
  void* real = nullptr;
  SentinelNcclResult rc = g_real.accept(l != nullptr ? l->real : listen_comm, &real, recv_dev_comm);
  if (recv_comm == nullptr) return rc;
  *recv_comm = real;
  if (rc == kSentinelNcclSuccess && real != nullptr && l != nullptr) {
    *recv_comm = NewConn(real, l->link_id, l->dev, 0);
  }
  return rc;
}

SentinelNcclResult WRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return g_real.reg_mr(RealComm(comm), data, size, type, mhandle);
}

SentinelNcclResult WRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                                int fd, void** mhandle) {
  return g_real.reg_mr_dma_buf(RealComm(comm), data, size, type, offset, fd, mhandle);
}

SentinelNcclResult WDeregMr(void* comm, void* mhandle) {
  return g_real.dereg_mr(RealComm(comm), mhandle);
}

SentinelNcclResult WIsend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                          void* phandle, void** request) {
  Conn* c = InArray(g_conns, send_comm);
  if (ABSL_PREDICT_FALSE(c == nullptr)) {
    return g_real.isend(send_comm, data, size, tag, mhandle, phandle, request);
  }
  void* real_req = nullptr;
  SentinelNcclResult rc = g_real.isend(c->real, data, size, tag, mhandle, phandle, &real_req);
  if (ABSL_PREDICT_FALSE(rc != kSentinelNcclSuccess)) {
    Bump(c->errors, 1);
    if (request != nullptr) *request = real_req;
    return rc;
  }
  if (request != nullptr) *request = Tag(c, real_req, size, 1);
  return rc;
}

SentinelNcclResult WIrecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                          void** mhandles, void** phandles, void** request) {
  Conn* c = InArray(g_conns, recv_comm);
  if (ABSL_PREDICT_FALSE(c == nullptr || request == nullptr)) {
    return g_real.irecv(RealComm(recv_comm), n, data, sizes, tags, mhandles, phandles, request);
  }
  void* real_req = *request;  // NCCL may preset NCCL_NET_OPTIONAL_RECV_COMPLETION (§7.3)
  SentinelNcclResult rc =
      g_real.irecv(c->real, n, data, sizes, tags, mhandles, phandles, &real_req);
  if (ABSL_PREDICT_FALSE(rc != kSentinelNcclSuccess)) {
    Bump(c->errors, 1);
    *request = real_req;
    return rc;
  }
  uint64_t posted = 0;
  if (sizes != nullptr) {
    for (int i = 0; i < n; ++i) posted += sizes[i];
  }
  *request = Tag(c, real_req, posted, n);
  return rc;
}

SentinelNcclResult WIflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                           void** request) {
  return g_real.iflush(RealComm(recv_comm), n, data, sizes, mhandles, request);
}

SentinelNcclResult WTest(void* request, int* done, int* sizes) {
  Req* r = AsReq(request);
  if (ABSL_PREDICT_FALSE(r == nullptr)) return g_real.test(request, done, sizes);
  SentinelNcclResult rc = g_real.test(r->real, done, sizes);
  Conn& c = g_conns[r->conn];
  if (ABSL_PREDICT_FALSE(rc != kSentinelNcclSuccess)) {
    Bump(c.errors, 1);
    return rc;
  }
  if (done == nullptr || *done == 0) return rc;
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
  return rc;
}

SentinelNcclResult WCloseSend(void* send_comm) { return g_real.close_send(RealComm(send_comm)); }
SentinelNcclResult WCloseRecv(void* recv_comm) { return g_real.close_recv(RealComm(recv_comm)); }

SentinelNcclResult WCloseListen(void* listen_comm) {
  Listen* l = InArray(g_listens, listen_comm);
  return g_real.close_listen(l != nullptr ? l->real : listen_comm);
}

SentinelNcclResult WGetDeviceMr(void* comm, void* mhandle, void** dptr_mhandle) {
  return g_real.get_device_mr(RealComm(comm), mhandle, dptr_mhandle);
}

SentinelNcclResult WIrecvConsumed(void* recv_comm, int n, void* request) {
  Req* r = AsReq(request);
  return g_real.irecv_consumed(RealComm(recv_comm), n, r != nullptr ? r->real : request);
}

SentinelNcclResult WMakeVDevice(int* d, SentinelNetVDevicePropsV11* props) {
  return g_real.make_v_device(d, props);
}

SentinelNcclResult WFinalize(void* ctx) { return g_real.finalize(ctx); }

SentinelNcclResult WSetNetAttr(void* ctx, SentinelNetAttrV11* attr) {
  return g_real.set_net_attr(ctx, attr);
}

// Without a usable real plugin: init fails, so NCCL falls back exactly as it does when the plugin
// named in NCCL_NET_PLUGIN cannot be loaded (§7.1, §7.2).
SentinelNcclResult NoPluginInit(void**, uint64_t, SentinelNetCommConfigV11*, SentinelNcclLogger,
                                SentinelNetProfilerCallback) {
  return kSentinelNcclInternalError;
}
SentinelNcclResult NoPluginDevices(int* ndev) {
  if (ndev != nullptr) *ndev = 0;
  return kSentinelNcclInternalError;
}

}  // namespace
}  // namespace sentinel::net

// The table NCCL dlsym()s. Filled by the constructor below, before dlopen returns to NCCL.
extern "C" {
__attribute__((visibility("default")))
SentinelNetV11 ncclNetPlugin_v11 = {"sentinel",
                                    &sentinel::net::NoPluginInit,
                                    &sentinel::net::NoPluginDevices,
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    nullptr,
                                    nullptr};
}

namespace sentinel::net {
namespace {

// A statement; `field` is a member name and `fn` a function: no parentheses possible.
// NOLINTNEXTLINE(bugprone-macro-parentheses)
#define SENTINEL_WRAP_SLOT(field, fn) ours.field = g_real.field != nullptr ? &fn : nullptr

void Load() {
  g_tick0 = Ticks();
  g_mono0 = MonoNs();
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
  // Probe as NCCL 2.28 does: v11 down to v6; the first found is the plugin's version.
  int found = 0;
  void* table = nullptr;
  for (int v = 11; v >= 6 && found == 0; --v) {
    char sym[32];
    snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", v);
    table = dlsym(dl, sym);
    if (table != nullptr) found = v;
  }
  if (table == &ncclNetPlugin_v11) {
    plugin::RawLog("net: SENTINEL_NET_WRAP=%s names sentinel itself; nothing wrapped", value);
    return;
  }
  if (found == 0) {
    plugin::RawLog(
        "net: SENTINEL_NET_WRAP=%s: no ncclNetPlugin_v11..v6 symbol; NCCL falls back "
        "to its internal transports",
        value);
    return;
  }
  if (found != 11) {
    plugin::RawLog(
        "net: SENTINEL_NET_WRAP=%s: the plugin's newest table is v%d; this build wraps "
        "v11 only; NCCL falls back to its internal transports",
        value, found);
    return;
  }
  g_real = *static_cast<const SentinelNetV11*>(table);
  if (g_real.init == nullptr || g_real.devices == nullptr || g_real.get_properties == nullptr ||
      g_real.isend == nullptr || g_real.irecv == nullptr || g_real.test == nullptr) {
    plugin::RawLog("net: SENTINEL_NET_WRAP=%s: incomplete ncclNetPlugin_v11 table", value);
    return;
  }
  g_wrapped_version = 11;
  SentinelNetV11 ours{};
  ours.name = g_real.name;  // NCCL_NET=<real name> keeps matching (§7.2)
  SENTINEL_WRAP_SLOT(init, WInit);
  SENTINEL_WRAP_SLOT(devices, WDevices);
  SENTINEL_WRAP_SLOT(get_properties, WGetProperties);
  SENTINEL_WRAP_SLOT(listen, WListen);
  SENTINEL_WRAP_SLOT(connect, WConnect);
  SENTINEL_WRAP_SLOT(accept, WAccept);
  SENTINEL_WRAP_SLOT(reg_mr, WRegMr);
  SENTINEL_WRAP_SLOT(reg_mr_dma_buf, WRegMrDmaBuf);
  SENTINEL_WRAP_SLOT(dereg_mr, WDeregMr);
  SENTINEL_WRAP_SLOT(isend, WIsend);
  SENTINEL_WRAP_SLOT(irecv, WIrecv);
  SENTINEL_WRAP_SLOT(iflush, WIflush);
  SENTINEL_WRAP_SLOT(test, WTest);
  SENTINEL_WRAP_SLOT(close_send, WCloseSend);
  SENTINEL_WRAP_SLOT(close_recv, WCloseRecv);
  SENTINEL_WRAP_SLOT(close_listen, WCloseListen);
  SENTINEL_WRAP_SLOT(get_device_mr, WGetDeviceMr);
  SENTINEL_WRAP_SLOT(irecv_consumed, WIrecvConsumed);
  SENTINEL_WRAP_SLOT(make_v_device, WMakeVDevice);
  SENTINEL_WRAP_SLOT(finalize, WFinalize);
  SENTINEL_WRAP_SLOT(set_net_attr, WSetNetAttr);
  ncclNetPlugin_v11 = ours;
  plugin::RawLog("net: wrapping %s (%s, net API v11)", value,
                 g_real.name != nullptr ? g_real.name : "?");
}

#undef SENTINEL_WRAP_SLOT

__attribute__((constructor)) void LoadAtDlopen() { Load(); }

}  // namespace
}  // namespace sentinel::net

extern "C" __attribute__((visibility("default"))) int sentinelNetSnapshot(
    SentinelNetSnapshot* out) {
  using namespace sentinel::net;  // NOLINT(build/namespaces): one C entry point
  if (out == nullptr) return -1;
  memset(out, 0, sizeof(*out));
  out->wrapped_version = g_wrapped_version;
  snprintf(out->real_name, sizeof(out->real_name), "%s", g_real.name != nullptr ? g_real.name : "");
  int nd = g_ndevices.load(std::memory_order_acquire);
  out->ndevices = nd;
  for (int i = 0; i < nd; ++i) out->devices[i] = g_devices[i];
  // Ticks -> ns from the time since load (x86: TSC; elsewhere ticks already are ns).
  double ns_per_tick = 1.0;
#if defined(__x86_64__)
  uint64_t dt = Ticks() - g_tick0;
  uint64_t dn = MonoNs() - g_mono0;
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
