// External net plugin host of the fake NCCL; see net_plugin.h. Only v11 tables are driven (our
// declarations in plugin/net/net_abi.h); an older table is found by the probe and refused with a
// line, since its layout is not in the fact sheet.
#include "tests/fakes/fake_nccl/net_plugin.h"

#include <dlfcn.h>
#include <strings.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "plugin/net/net_abi.h"
#include "tests/fakes/fake_nccl/debug_log.h"
#include "tests/fakes/fake_nccl/profiler_host.h"
#include "tests/fakes/fake_nccl/shm_barrier.h"

namespace sentinel::testing {
namespace {

constexpr size_t kMaxMessage = 32 * 1024;  // fits the loopback socket buffers: sends never block
constexpr int kMaxPluginEntries = 14;      // docs/nccl-facts.md "7.1 Symbols and loading"

struct Host {
  std::mutex mu;
  bool tried = false;
  void* lib = nullptr;
  const SentinelNetV11* net = nullptr;
  int ndev = -1;
  std::vector<SentinelNetPropertiesV11> props;
};

Host& GetHost() {
  static Host* h = new Host();  // never destroyed: plugin threads may outlive static teardown
  return *h;
}

// The first ncclNetPlugin_vN, N = 11 down to 6, like NCCL. Sets *version.
void* Probe(void* lib, int* version) {
  for (int v = 11; v >= 6; --v) {
    char sym[32];
    snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", v);
    void* table = dlsym(lib, sym);
    if (table != nullptr) {
      *version = v;
      return table;
    }
  }
  return nullptr;
}

// One NCCL_NET_PLUGIN entry: the value verbatim, then libnccl-net-<value>.so
// (docs/nccl-facts.md "7.1 Symbols and loading").
void* OpenEntry(const std::string& value, std::string* path, std::string* not_found) {
  void* lib = dlopen(value.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib != nullptr) {
    *path = value;
    return lib;
  }
  *not_found += " " + value;
  std::string alt = "libnccl-net-" + value + ".so";
  lib = dlopen(alt.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib != nullptr) {
    *path = alt;
    return lib;
  }
  *not_found += " " + alt;
  return nullptr;
}

// The payload byte `i` of message `n` from `from` to `to`: both ends can compute it.
// Independent of the communicator's (random) hash, so a job's checksums repeat run to run.
inline char Pattern(int from, int to, uint64_t n, size_t i) {
  uint64_t x = (static_cast<uint64_t>(from) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(to) << 20) ^ (n * 0x100000001B3ull) ^ (i / 8);
  x ^= x >> 29;
  return static_cast<char>((x >> ((i % 8) * 8)) & 0xFF);
}

void Nap() {
  struct timespec ts = {0, 20000};
  nanosleep(&ts, nullptr);
}

}  // namespace

bool LoadExternalNet(std::string* name) {
  Host& h = GetHost();
  std::lock_guard<std::mutex> lock(h.mu);
  if (!h.tried) {
    h.tried = true;
    const char* env = getenv("NCCL_NET_PLUGIN");
    std::vector<std::string> entries;
    if (env == nullptr) {
      entries.push_back("libnccl-net.so");
    } else if (strcasecmp(env, "none") != 0) {
      std::string list(env);
      size_t pos = 0;
      while (pos <= list.size() && static_cast<int>(entries.size()) < kMaxPluginEntries) {
        size_t comma = list.find(',', pos);
        if (comma == std::string::npos) comma = list.size();
        if (comma > pos) entries.push_back(list.substr(pos, comma - pos));
        pos = comma + 1;
      }
    }
    for (const std::string& e : entries) {
      std::string path;
      std::string not_found;
      void* lib = env == nullptr ? dlopen(e.c_str(), RTLD_NOW | RTLD_LOCAL)
                                 : OpenEntry(e, &path, &not_found);
      if (lib == nullptr) {
        FAKE_INFO(kSubInit | kSubNet, "NET/Plugin: Could not find:%s",
                  env == nullptr ? " libnccl-net.so" : not_found.c_str());
        continue;
      }
      int version = 0;
      void* table = Probe(lib, &version);
      if (table == nullptr || version != 11) {
        // The fake drives v11 only (net_abi.h); NCCL would adapt v6..v10.
        FAKE_INFO(kSubInit | kSubNet, "External network plugin %s is unsupported%s",
                  env == nullptr ? e.c_str() : path.c_str(),
                  table == nullptr ? "" : " by the fake NCCL (v11 only)");
        dlclose(lib);
        continue;
      }
      FAKE_INFO(kSubInit | kSubNet, "Successfully loaded external network plugin %s",
                env == nullptr ? e.c_str() : path.c_str());
      h.lib = lib;
      h.net = static_cast<const SentinelNetV11*>(table);
      break;
    }
  }
  if (h.net == nullptr) return false;
  *name = h.net->name != nullptr ? h.net->name : "";
  return true;
}

int ExternalNetDevices() {
  Host& h = GetHost();
  std::lock_guard<std::mutex> lock(h.mu);
  if (h.net == nullptr) return 0;
  if (h.ndev < 0) {
    int n = 0;
    if (h.net->devices(&n) != kSentinelNcclSuccess || n < 0) n = 0;
    h.ndev = n;
    h.props.resize(static_cast<size_t>(n));
    for (int d = 0; d < n; ++d) {
      SentinelNetPropertiesV11& p = h.props[static_cast<size_t>(d)];
      memset(&p, 0, sizeof(p));
      if (h.net->get_properties(d, &p) != kSentinelNcclSuccess) memset(&p, 0, sizeof(p));
    }
  }
  return h.ndev;
}

bool ExternalNetGdr(int dev) {
  Host& h = GetHost();
  std::lock_guard<std::mutex> lock(h.mu);
  if (dev < 0 || static_cast<size_t>(dev) >= h.props.size()) return false;
  return (h.props[static_cast<size_t>(dev)].ptr_support & SENTINEL_NET_PTR_CUDA) != 0;
}

bool NetComm::Init(uint64_t comm_hash, int rank, int nranks) {
  const SentinelNetV11* net = GetHost().net;
  if (net == nullptr) return false;
  rank_ = rank;
  SentinelNetCommConfigV11 config{-1};
  if (net->init(&ctx_, comm_hash, &config, PluginLogger(), nullptr) != kSentinelNcclSuccess) {
    return false;
  }
  ctx_set_ = true;
  size_t n = static_cast<size_t>(nranks);
  send_comm_.assign(n, nullptr);
  recv_comm_.assign(n, nullptr);
  listen_comm_.assign(n, nullptr);
  sent_msgs_.assign(n, 0);
  recv_msgs_.assign(n, 0);
  return true;
}

bool NetComm::Fail(const char* call, int rc) {
  if (!failed_) FAKE_WARN("NET/Plugin: %s failed with error %d", call, rc);
  failed_ = true;
  return false;
}

bool NetComm::ConnectAll(ShmBarrier* barrier, const std::vector<Transfer>& transfers,
                         const std::atomic<bool>& abort) {
  const SentinelNetV11* net = GetHost().net;
  char handle[ShmBarrier::kNetHandleSize];
  // Listen first on every side, so no rank waits for a handle nobody will publish.
  for (const Transfer& t : transfers) {
    size_t p = static_cast<size_t>(t.peer);
    if (t.is_send || recv_comm_[p] != nullptr || listen_comm_[p] != nullptr) continue;
    memset(handle, 0, sizeof(handle));
    int rc = net->listen(ctx_, dev_, handle, &listen_comm_[p]);
    if (rc != kSentinelNcclSuccess) return Fail("listen", rc);
    barrier->PublishNetHandle(rank_, t.peer, handle);
  }
  for (const Transfer& t : transfers) {
    size_t p = static_cast<size_t>(t.peer);
    if (!t.is_send || send_comm_[p] != nullptr) continue;
    if (barrier->WaitNetHandle(t.peer, rank_, handle, 0, abort) != ShmBarrier::WaitResult::kOk) {
      return false;
    }
    while (send_comm_[p] == nullptr) {
      int rc = net->connect(ctx_, dev_, handle, &send_comm_[p], nullptr);
      if (rc != kSentinelNcclSuccess) return Fail("connect", rc);
      if (send_comm_[p] == nullptr) Nap();
      if (abort.load(std::memory_order_relaxed)) return false;
    }
  }
  for (const Transfer& t : transfers) {
    size_t p = static_cast<size_t>(t.peer);
    if (t.is_send || recv_comm_[p] != nullptr) continue;
    while (recv_comm_[p] == nullptr) {
      int rc = net->accept(listen_comm_[p], &recv_comm_[p], nullptr);
      if (rc != kSentinelNcclSuccess) return Fail("accept", rc);
      if (recv_comm_[p] == nullptr) Nap();
      if (abort.load(std::memory_order_relaxed)) return false;
    }
    net->close_listen(listen_comm_[p]);
    listen_comm_[p] = nullptr;
  }
  return true;
}

bool NetComm::Exchange(ShmBarrier* barrier, const std::vector<Transfer>& transfers,
                       const std::atomic<bool>& abort) {
  const SentinelNetV11* net = GetHost().net;
  if (!ctx_set_ || failed_ || net == nullptr) return false;
  if (!ConnectAll(barrier, transfers, abort)) return false;
  size_t n = transfers.size();
  out_.resize(n * kMaxMessage);
  in_.resize(n * kMaxMessage);
  std::vector<void*> requests(n, nullptr);
  std::vector<int> done(n, 0);
  std::vector<int> sizes(n, 0);
  // Sends first: they fit the socket buffers, so posting every send before any receive cannot
  // deadlock a ring.
  for (size_t i = 0; i < n; ++i) {
    const Transfer& t = transfers[i];
    size_t p = static_cast<size_t>(t.peer);
    if (!t.is_send) continue;
    size_t len = std::min(std::max<size_t>(t.bytes, 1), kMaxMessage);
    char* buf = out_.data() + i * kMaxMessage;
    uint64_t msg = sent_msgs_[p]++;
    for (size_t b = 0; b < len; ++b) buf[b] = Pattern(rank_, t.peer, msg, b);
    int rc = net->isend(send_comm_[p], buf, len, 0, nullptr, nullptr, &requests[i]);
    if (rc != kSentinelNcclSuccess) return Fail("isend", rc);
    bytes_sent_ += len;
  }
  for (size_t i = 0; i < n; ++i) {
    const Transfer& t = transfers[i];
    if (t.is_send) continue;
    void* data[1] = {in_.data() + i * kMaxMessage};
    size_t cap[1] = {kMaxMessage};
    int tags[1] = {0};
    int rc = net->irecv(recv_comm_[static_cast<size_t>(t.peer)], 1, data, cap, tags, nullptr,
                        nullptr, &requests[i]);
    if (rc != kSentinelNcclSuccess) return Fail("irecv", rc);
  }
  for (size_t left = n; left > 0;) {
    for (size_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      int rc = net->test(requests[i], &done[i], &sizes[i]);
      if (rc != kSentinelNcclSuccess) return Fail("test", rc);
      if (done[i]) --left;
    }
    if (left > 0) {
      if (abort.load(std::memory_order_relaxed)) return false;
      Nap();
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const Transfer& t = transfers[i];
    if (t.is_send) continue;
    uint64_t msg = recv_msgs_[static_cast<size_t>(t.peer)]++;
    const char* buf = in_.data() + i * kMaxMessage;
    size_t len = static_cast<size_t>(std::max(sizes[i], 0));
    for (size_t b = 0; b < len; ++b) {
      if (buf[b] != Pattern(t.peer, rank_, msg, b)) {
        FAKE_WARN("NET/Plugin: data from rank %d corrupted at byte %zu of message %llu", t.peer, b,
                  static_cast<unsigned long long>(msg));
        failed_ = true;
        return false;
      }
      checksum_ = (checksum_ ^ static_cast<unsigned char>(buf[b])) * 1099511628211ull;
    }
    bytes_received_ += len;
  }
  return true;
}

void NetComm::Close() {
  const SentinelNetV11* net = GetHost().net;
  if (!ctx_set_ || net == nullptr) return;
  for (void*& c : send_comm_) {
    if (c != nullptr) net->close_send(c);
    c = nullptr;
  }
  for (void*& c : recv_comm_) {
    if (c != nullptr) net->close_recv(c);
    c = nullptr;
  }
  for (void*& c : listen_comm_) {
    if (c != nullptr) net->close_listen(c);
    c = nullptr;
  }
  if (net->finalize != nullptr) net->finalize(ctx_);
  ctx_set_ = false;
}

}  // namespace sentinel::testing
