// The net wrapper's connection table and what it observes (internal to libnccl-net-sentinel.so):
// the fixed slot arrays for devices, listen comms, connections and their request tags, and the
// observation around one forwarded call (net_forward.h calls these; net_conn_table.cc holds the
// slow-path half and the snapshot of the table).
//
// Data path (isend/irecv/test on NCCL's proxy thread): no lock, no allocation, no syscall. Comms
// are slots of a fixed array (never reused, so closed connections keep their counters); each comm
// owns a ring of request tags, used by the one proxy thread that drives it; counters are
// single-writer relaxed atomics that the snapshot reads from any thread. The data-path functions
// are inline here so that the forwarding functions compile them in, as when all was one file.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"

#include "plugin/net/net_abi.h"
#include "plugin/net/net_clock.h"
#include "plugin/net/net_observer.h"

namespace sentinel::net {

constexpr int kReqsPerConn = 64;  // NCCL keeps at most 32 requests in flight per comm
constexpr int kMaxListens = 1024;

inline void Bump(std::atomic<uint64_t>& c, uint64_t by) {
  // Single writer (the comm's proxy thread): a load and a store, no locked instruction.
  c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
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

// The tables (constant-initialised, one definition in the .so; hidden like everything else).
ABSL_CONST_INIT inline Conn g_conns[SENTINEL_NET_MAX_CONNS];
ABSL_CONST_INIT inline std::atomic<uint32_t> g_nconns{0};
ABSL_CONST_INIT inline Listen g_listens[kMaxListens];
ABSL_CONST_INIT inline std::atomic<uint32_t> g_nlistens{0};
ABSL_CONST_INIT inline SentinelNetDevice g_devices[SENTINEL_NET_MAX_DEVICES] = {};
ABSL_CONST_INIT inline std::atomic<int> g_ndevices{0};
ABSL_CONST_INIT inline std::atomic<uint64_t> g_requests_untracked{0};
ABSL_CONST_INIT inline std::atomic<uint64_t> g_conns_untracked{0};

// ---- data path (inline) ------------------------------------------------------------------------

template <typename T, size_t N>
T* InArray(T (&arr)[N], void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  auto base = reinterpret_cast<uintptr_t>(&arr[0]);
  if (v < base || v >= base + sizeof(arr) || (v - base) % sizeof(T) != 0) return nullptr;
  return reinterpret_cast<T*>(p);
}

inline Req* AsReq(void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  auto base = reinterpret_cast<uintptr_t>(&g_conns[0]);
  if (v < base || v >= base + sizeof(g_conns)) return nullptr;
  size_t off = (v - base) % sizeof(Conn);
  size_t reqs_off = offsetof(Conn, reqs);
  if (off < reqs_off || (off - reqs_off) % sizeof(Req) != 0) return nullptr;
  return reinterpret_cast<Req*>(p);
}

inline void* RealComm(void* comm) {
  Conn* c = InArray(g_conns, comm);
  return c != nullptr ? c->real : comm;
}

// A request tag of this comm, or null (ring full: the request is forwarded untracked).
inline Req* Claim(Conn* c) {
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
inline void* Tag(Conn* c, void* real_req, uint64_t bytes, int n, uint64_t t0) {
  if (real_req == nullptr || real_req == SENTINEL_NET_OPTIONAL_RECV_COMPLETION) return real_req;
  Req* r = Claim(c);
  if (r == nullptr) return real_req;
  r->real = real_req;
  r->bytes = bytes;
  r->n = n;
  r->t0 = t0;
  return r;
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
  if (lat > c.lat_max.load(std::memory_order_relaxed)) {
    c.lat_max.store(lat, std::memory_order_relaxed);
  }
  Bump(c.class_requests[cls], 1);
  Bump(c.class_lat[cls], lat);
  // `real` stays readable until the tag is reused: irecvConsumed may name a completed request.
  r->used.store(0, std::memory_order_release);
}

// ---- slow path (net_conn_table.cc) -------------------------------------------------------------

// FNV-1a over the opaque connection handle: both ends see the same bytes (listen fills, connect
// reads), so both ends get the same link id.
uint64_t HashHandle(const void* handle);

// A connection slot for a comm the real plugin returned, or `real` itself when the table is full
// (then NCCL gets the real comm: forwarded, not observed).
void* NewConn(void* real, uint64_t link_id, int dev, int is_send);

void OnGetProperties(int dev, const char* name, const char* pci_path, uint64_t guid,
                     int ptr_support, int speed, int port, int max_comms, float latency);

template <typename P>
void ObserveProps(int dev, const P& p) {
  OnGetProperties(dev, p.name, p.pci_path, p.guid, p.ptr_support, p.speed, p.port, p.max_comms,
                  p.latency);
}

// After listen: NCCL gets our listen slot (or the real comm when we are full).
void OnListen(SentinelNcclResult rc, int dev, const void* handle, void* real, void** listen_comm);
void* ListenReal(void* listen_comm);
void OnAccept(SentinelNcclResult rc, void* listen_comm, void* real, void** recv_comm);

// Fills the snapshot's devices, connections (latencies in ns) and untracked counts.
void SnapshotTables(SentinelNetSnapshot* out);

}  // namespace sentinel::net
