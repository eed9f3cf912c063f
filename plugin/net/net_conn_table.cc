// The slow-path half of the connection table (see net_conn_table.h): new slots at init, listen,
// connect and accept time, and the snapshot that reads the table from any thread.
#include "plugin/net/net_conn_table.h"

#include <cstdio>

namespace sentinel::net {

uint64_t HashHandle(const void* handle) {
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

void SnapshotTables(SentinelNetSnapshot* out) {
  int nd = g_ndevices.load(std::memory_order_acquire);
  out->ndevices = nd;
  for (int i = 0; i < nd; ++i) out->devices[i] = g_devices[i];
  const double ns_per_tick = NsPerTick();
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
}

}  // namespace sentinel::net
