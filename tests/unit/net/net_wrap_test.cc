// libnccl-net-sentinel.so wrapping the fake external net plugin (tests/fakes/fake_net): every call
// forwarded with its arguments, results and errors unchanged, NULL slots kept, version probing,
// a missing plugin, and what the observer sees (devices, link ids, bytes, latency, errors).
// The wrapper loads the real plugin when it is dlopen'ed, so each case runs in its own child
// process (EXPECT_EXIT) with its own environment; inside, CHECK prints the failure and exits 1.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "plugin/net/net_abi.h"
#include "plugin/net/net_observer.h"
#include "plugin/net/net_versions.h"

namespace {

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "CHECK failed at line %d: %s\n", __LINE__, #cond); \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

struct Loaded {
  SentinelNetV11* net = nullptr;
  SentinelNetSnapshotFn snapshot = nullptr;
  long (*calls)(const char*) = nullptr;
  uint64_t (*last)(const char*) = nullptr;
};

// The send side's latency after `requests` sends each held FAKE_NET_SEND_DELAY_US=20000 by the
// fake: each request's window (ticks read before isend to the completing test) contains the fake's
// 20 ms, so the sum is at least requests x 20 ms, less 0.1 % for the ticks -> ns rate the wrapper
// measures over the process's short life. 2 s each is the upper bound a loaded host stays under.
constexpr uint64_t kFakeSendDelayNs = 20000000;
bool SendLatencyHoldsTheFakesDelay(const SentinelNetConnStats& snd, uint64_t requests) {
  const uint64_t floor = requests * kFakeSendDelayNs;
  return snd.latency_ns_sum >= floor - floor / 1000 &&
         snd.latency_ns_sum < requests * 2000000000ull;
}

// Sets the environment, then loads the wrapper as NCCL does (RTLD_NOW | RTLD_LOCAL,
// docs/nccl-facts.md "7.1 Symbols and loading").
Loaded LoadWrapper(const char* wrap, const std::vector<std::pair<const char*, const char*>>& env) {
  setenv("SENTINEL_SOCKET", "none", 1);  // the reporter: tests/integration/net
  for (const auto& kv : env) setenv(kv.first, kv.second, 1);
  if (wrap != nullptr) setenv("SENTINEL_NET_WRAP", wrap, 1);
  Loaded l;
  void* dl = dlopen(SENTINEL_NET_SO, RTLD_NOW | RTLD_LOCAL);
  CHECK(dl != nullptr);
  l.net = static_cast<SentinelNetV11*>(dlsym(dl, "ncclNetPlugin_v11"));
  l.snapshot = reinterpret_cast<SentinelNetSnapshotFn>(dlsym(dl, "sentinelNetSnapshot"));
  CHECK(l.net != nullptr && l.snapshot != nullptr);
  void* fake = dlopen(FAKE_NET_SO, RTLD_NOW | RTLD_NOLOAD);  // the instance the wrapper loaded
  if (fake != nullptr) {
    l.calls = reinterpret_cast<long (*)(const char*)>(dlsym(fake, "fakeNetCalls"));
    l.last = reinterpret_cast<uint64_t (*)(const char*)>(dlsym(fake, "fakeNetLast"));
  }
  return l;
}

// One send comm and one recv comm over the fake's loopback TCP, on device `dev`.
void Connect(SentinelNetV11* n, void* ctx, int dev, void** listen, void** send, void** recv) {
  char handle[SENTINEL_NET_HANDLE_MAXSIZE];
  CHECK(n->listen(ctx, dev, handle, listen) == kSentinelNcclSuccess && *listen != nullptr);
  *send = nullptr;
  *recv = nullptr;
  SentinelNetDeviceHandleV11* dev_comm = nullptr;
  for (int i = 0; i < 100000 && (*send == nullptr || *recv == nullptr); ++i) {
    if (*send == nullptr) CHECK(n->connect(ctx, dev, handle, send, &dev_comm) == 0);
    if (*recv == nullptr) CHECK(n->accept(*listen, recv, &dev_comm) == 0);
  }
  CHECK(*send != nullptr && *recv != nullptr);
}

// Tests both requests until done (the test signature is the same in every version); both must
// report `size` bytes.
void CompleteBoth(SentinelNcclResult (*test)(void*, int*, int*), void* sreq, void* rreq,
                  size_t size) {
  int sdone = 0;
  int rdone = 0;
  int ssize = -1;
  int rsize = -1;
  for (long i = 0; i < 100000000 && (!sdone || !rdone); ++i) {
    if (!sdone) CHECK(test(sreq, &sdone, &ssize) == 0);
    if (!rdone) CHECK(test(rreq, &rdone, &rsize) == 0);
  }
  CHECK(sdone && rdone);
  CHECK(ssize == static_cast<int>(size) && rsize == static_cast<int>(size));
}

// Sends `size` bytes with `tag` and receives them; returns the received bytes.
std::vector<char> Transfer(SentinelNetV11* n, void* send, void* recv, size_t size, int tag) {
  std::vector<char> out(size, 'x');
  std::vector<char> in(size + 64, 0);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<char>('a' + (i * 7 + size) % 26);
  void* smh = nullptr;
  void* rmh = nullptr;
  CHECK(n->reg_mr(send, out.data(), size, SENTINEL_NET_PTR_HOST, &smh) == 0);
  CHECK(n->reg_mr(recv, in.data(), in.size(), SENTINEL_NET_PTR_HOST, &rmh) == 0);
  void* sreq = nullptr;
  auto* phandle = reinterpret_cast<void*>(0xABC0);
  CHECK(n->isend(send, out.data(), size, tag, smh, phandle, &sreq) == 0 && sreq != nullptr);
  void* data[1] = {in.data()};
  size_t sizes[1] = {in.size()};
  int tags[1] = {tag};
  void* mhs[1] = {rmh};
  void* phs[1] = {nullptr};
  void* rreq = nullptr;
  CHECK(n->irecv(recv, 1, data, sizes, tags, mhs, phs, &rreq) == 0 && rreq != nullptr);
  CompleteBoth(n->test, sreq, rreq, size);
  CHECK(n->dereg_mr(send, smh) == 0);
  CHECK(n->dereg_mr(recv, rmh) == 0);
  in.resize(size);
  CHECK(in == out);
  return in;
}

void EveryCallForwarded() {
  Loaded l = LoadWrapper(FAKE_NET_SO, {});
  SentinelNetV11* n = l.net;
  CHECK(l.calls != nullptr && l.last != nullptr);
  CHECK(strcmp(n->name, "FakeNet") == 0);  // NCCL_NET=FakeNet keeps matching
  void* ctx = nullptr;
  SentinelNetCommConfigV11 config{7};
  CHECK(n->init(&ctx, 0x1234ABCDull, &config, nullptr, nullptr) == 0 && ctx != nullptr);
  CHECK(l.last("comm_id") == 0x1234ABCDull && l.last("traffic_class") == 7);
  int ndev = 0;
  CHECK(n->devices(&ndev) == 0 && ndev == 2);
  SentinelNetPropertiesV11 p;
  for (int d = 0; d < ndev; ++d) CHECK(n->get_properties(d, &p) == 0);
  CHECK(n->get_properties(5, &p) == kSentinelNcclInvalidArgument);  // the fake's own error
  void *listen, *send, *recv;
  Connect(n, ctx, 1, &listen, &send, &recv);
  Transfer(n, send, recv, 1000, 3);
  CHECK(l.last("isend_tag") == 3 && l.last("irecv_tag") == 3);
  CHECK(l.last("isend_phandle") == 0xABC0);
  Transfer(n, send, recv, 100000, 4);
  Transfer(n, send, recv, 100000, 5);
  void* mh = nullptr;
  CHECK(n->reg_mr_dma_buf(send, &p, 8, SENTINEL_NET_PTR_DMABUF, 0, -1, &mh) == 0);
  CHECK(l.last("reg_type") == SENTINEL_NET_PTR_DMABUF);
  void* dptr = &p;
  CHECK(n->get_device_mr(send, mh, &dptr) == 0 && dptr == nullptr);
  void* freq = &p;
  CHECK(n->iflush(recv, 0, nullptr, nullptr, nullptr, &freq) == 0 && freq == nullptr);
  CHECK(n->irecv_consumed(recv, 1, nullptr) == 0);
  int vdev = -1;
  SentinelNetVDevicePropsV11 vp{};
  CHECK(n->make_v_device(&vdev, &vp) == 0 && vdev == 2);
  SentinelNetAttrV11 attr{};
  CHECK(n->set_net_attr(ctx, &attr) == 0);

  SentinelNetSnapshot* s = new SentinelNetSnapshot;
  CHECK(l.snapshot(s) == 0);
  CHECK(s->wrapped_version == 11 && strcmp(s->real_name, "FakeNet") == 0);
  CHECK(s->ndevices == 2);
  CHECK(strcmp(s->devices[0].name, "fake0") == 0 && s->devices[0].speed_mbps == 100000);
  CHECK((s->devices[0].ptr_support & SENTINEL_NET_PTR_CUDA) != 0);  // GDR offered on dev 0
  CHECK((s->devices[1].ptr_support & SENTINEL_NET_PTR_CUDA) == 0);
  CHECK(strcmp(s->devices[1].pci_path, "/sys/devices/pci0000:00/0000:00:01.0") == 0);
  CHECK(s->nconns == 2);
  const SentinelNetConnStats& a = s->conns[0];
  const SentinelNetConnStats& b = s->conns[1];
  CHECK(a.link_id == b.link_id && a.link_id != 0);  // both ends of one connection
  CHECK(a.dev == 1 && b.dev == 1 && a.is_send + b.is_send == 1);
  CHECK(a.bytes == 201000 && b.bytes == 201000);
  CHECK(a.requests == 3 && b.requests == 3 && a.errors == 0);
  CHECK(a.latency_ns_sum > 0 && a.latency_ns_max <= a.latency_ns_sum);
  CHECK(a.class_requests[0] == 1 && a.class_requests[3] == 2);  // 1000 B; 100000 B in [64K, 256K)

  CHECK(n->close_send(send) == 0 && n->close_recv(recv) == 0 && n->close_listen(listen) == 0);
  CHECK(n->finalize(ctx) == 0);
  for (const char* call :
       {"init",        "devices",       "listen",      "connect",   "accept",
        "regMr",       "regMrDmaBuf",   "deregMr",     "isend",     "irecv",
        "iflush",      "test",          "closeSend",   "closeRecv", "closeListen",
        "getDeviceMr", "irecvConsumed", "makeVDevice", "finalize",  "setNetAttr"}) {
    if (l.calls(call) <= 0) {
      fprintf(stderr, "not forwarded: %s\n", call);
      exit(1);
    }
  }
  CHECK(l.calls("getProperties") == 3 && l.calls("isend") == 3 && l.calls("irecv") == 3);
  exit(0);
}

TEST(NetWrap, EveryCallForwardedUnchanged) {
  EXPECT_EXIT(EveryCallForwarded(), ::testing::ExitedWithCode(0), "net: wrapping");
}

void NullSlotsKept() {
  Loaded l = LoadWrapper(FAKE_NET_SO, {{"FAKE_NET_NULL_OPTIONAL", "1"}});
  CHECK(l.net->get_device_mr == nullptr && l.net->irecv_consumed == nullptr);
  CHECK(l.net->make_v_device == nullptr && l.net->set_net_attr == nullptr);
  CHECK(l.net->reg_mr_dma_buf == nullptr);
  CHECK(l.net->isend != nullptr && l.net->close_listen != nullptr);
  exit(0);
}

TEST(NetWrap, NullSlotsOfTheRealPluginStayNull) {
  EXPECT_EXIT(NullSlotsKept(), ::testing::ExitedWithCode(0), "");
}

void ErrorsPassThrough(const char* call, int expect_rc) {
  Loaded l = LoadWrapper(FAKE_NET_SO, {{"FAKE_NET_FAIL", call}});
  SentinelNetV11* n = l.net;
  void* ctx = nullptr;
  int rc = n->init(&ctx, 1, nullptr, nullptr, nullptr);
  if (strcmp(call, "init") == 0) {
    CHECK(rc == expect_rc);
    exit(0);
  }
  CHECK(rc == 0);
  void *listen, *send, *recv;
  Connect(n, ctx, 0, &listen, &send, &recv);
  char buf[64] = {0};
  void* req = nullptr;
  if (strcmp(call, "isend") == 0) {
    CHECK(n->isend(send, buf, sizeof(buf), 1, nullptr, nullptr, &req) == expect_rc);
  } else if (strcmp(call, "test") == 0) {
    CHECK(n->isend(send, buf, sizeof(buf), 1, nullptr, nullptr, &req) == 0);
    int done = 0;
    CHECK(n->test(req, &done, nullptr) == expect_rc);
  }
  SentinelNetSnapshot* s = new SentinelNetSnapshot;
  CHECK(l.snapshot(s) == 0);
  CHECK(s->nconns == 2 && s->conns[0].is_send == 1 && s->conns[0].errors == 1);
  CHECK(s->conns[0].requests == 0);
  exit(0);
}

TEST(NetWrap, ErrorsPassThroughAndAreCounted) {
  EXPECT_EXIT(ErrorsPassThrough("init", kSentinelNcclSystemError), ::testing::ExitedWithCode(0),
              "");
  EXPECT_EXIT(ErrorsPassThrough("isend", kSentinelNcclSystemError), ::testing::ExitedWithCode(0),
              "");
  EXPECT_EXIT(ErrorsPassThrough("test", kSentinelNcclSystemError), ::testing::ExitedWithCode(0),
              "");
}

void SlowLinkLatency() {
  Loaded l = LoadWrapper(FAKE_NET_SO, {{"FAKE_NET_SEND_DELAY_US", "20000"}});
  void* ctx = nullptr;
  CHECK(l.net->init(&ctx, 1, nullptr, nullptr, nullptr) == 0);
  void *listen, *send, *recv;
  Connect(l.net, ctx, 0, &listen, &send, &recv);
  for (int i = 0; i < 3; ++i) Transfer(l.net, send, recv, 4096, i);
  SentinelNetSnapshot* s = new SentinelNetSnapshot;
  CHECK(l.snapshot(s) == 0);
  const SentinelNetConnStats& snd = s->conns[0].is_send ? s->conns[0] : s->conns[1];
  CHECK(snd.requests == 3);
  CHECK(SendLatencyHoldsTheFakesDelay(snd, 3));  // isend -> completing test, each >= 20 ms
  CHECK(snd.class_requests[1] == 3);             // 4096 B: [4K, 16K)
  exit(0);
}

TEST(NetWrap, LatencyIsIsendToCompletingTest) {
  EXPECT_EXIT(SlowLinkLatency(), ::testing::ExitedWithCode(0), "");
}

void NoUsablePlugin(const char* wrap) {
  Loaded l = LoadWrapper(wrap, {});
  void* ctx = nullptr;
  CHECK(l.net->init(&ctx, 1, nullptr, nullptr, nullptr) != kSentinelNcclSuccess);
  int ndev = -1;
  CHECK(l.net->devices(&ndev) != kSentinelNcclSuccess && ndev == 0);
  SentinelNetSnapshot* s = new SentinelNetSnapshot;
  CHECK(l.snapshot(s) == 0 && s->wrapped_version == 0);
  exit(0);
}

TEST(NetWrap, MissingPluginFailsInitWithOneLine) {
  EXPECT_EXIT(NoUsablePlugin("/nonexistent/libnccl-net-nothing.so"), ::testing::ExitedWithCode(0),
              "SENTINEL_NET_WRAP=/nonexistent/libnccl-net-nothing.so: cannot load");
  EXPECT_EXIT(NoUsablePlugin(nullptr), ::testing::ExitedWithCode(0), "SENTINEL_NET_WRAP is unset");
  EXPECT_EXIT(NoUsablePlugin(SENTINEL_NET_SO), ::testing::ExitedWithCode(0),
              "names sentinel itself");
}

// A plugin with CollNet tables: we do not forward them, so NCCL would run without CollNet; the
// wrapper says so in its log (and still wraps the net tables).
void PluginWithCollNet() {
  Loaded l = LoadWrapper(FAKE_NET_COLLNET_SO, {});
  static SentinelNetSnapshot s;
  CHECK(l.snapshot(&s) == 0 && s.wrapped_version == 11);
  exit(0);
}

TEST(NetWrap, ACollNetTableThatIsNotForwardedIsSaid) {
  EXPECT_EXIT(PluginWithCollNet(), ::testing::ExitedWithCode(0),
              "libnccl-net-fakecollnet.so also has ncclCollNetPlugin_v8 .*sentinel does not "
              "forward CollNet, so NCCL runs without it");
}

// ---- older plugins (v6..v10) ------------------------------------------------------------------
using sentinel::net::HasContext;
using sentinel::net::HasDeviceMr;
using sentinel::net::HasProfiler;
using sentinel::net::HasVDevice;
using sentinel::net::NetApi;

const char* FakeSo(int v) {
  switch (v) {
    case 6:
      return FAKE_NET_V6_SO;
    case 7:
      return FAKE_NET_V7_SO;
    case 8:
      return FAKE_NET_V8_SO;
    case 9:
      return FAKE_NET_V9_SO;
    case 10:
      return FAKE_NET_V10_SO;
    default:
      return FAKE_NET_SO;
  }
}

// Our table v<K> and the fake's own table v<M> (the instance the wrapper loaded).
template <int K, int M>
struct Pair {
  typename NetApi<K>::Table* ours = nullptr;
  typename NetApi<M>::Table* real = nullptr;
  Loaded l;
};

template <int K, int M>
Pair<K, M> LoadPair(const std::vector<std::pair<const char*, const char*>>& env) {
  Pair<K, M> p;
  p.l = LoadWrapper(FakeSo(M), env);
  void* dl = dlopen(SENTINEL_NET_SO, RTLD_NOW | RTLD_NOLOAD);
  void* fake = dlopen(FakeSo(M), RTLD_NOW | RTLD_NOLOAD);
  CHECK(dl != nullptr && fake != nullptr);
  p.l.calls = reinterpret_cast<long (*)(const char*)>(dlsym(fake, "fakeNetCalls"));
  p.l.last = reinterpret_cast<uint64_t (*)(const char*)>(dlsym(fake, "fakeNetLast"));
  std::string ours = "ncclNetPlugin_v" + std::to_string(K);
  std::string real = "ncclNetPlugin_v" + std::to_string(M);
  p.ours = static_cast<typename NetApi<K>::Table*>(dlsym(dl, ours.c_str()));
  p.real = static_cast<typename NetApi<M>::Table*>(dlsym(fake, real.c_str()));
  CHECK(p.ours != nullptr && p.real != nullptr && p.l.calls != nullptr && p.l.last != nullptr);
  CHECK(p.l.last("version") == static_cast<uint64_t>(M));
  return p;
}

template <int K>
int InitV(typename NetApi<K>::Table* n, void** ctx, SentinelNetCommConfigV11* config) {
  if constexpr (HasContext(K)) {
    return n->init(ctx, 0x77, config, nullptr, nullptr);
  } else if constexpr (HasProfiler(K)) {
    return n->init(nullptr, nullptr);
  } else {
    return n->init(nullptr);
  }
}

template <int K>
void ConnectV(typename NetApi<K>::Table* n, void* ctx, int dev, SentinelNetCommConfigV10* cfg,
              void** listen, void** send, void** recv) {
  char handle[SENTINEL_NET_HANDLE_MAXSIZE];
  if constexpr (HasContext(K)) {
    CHECK(n->listen(ctx, dev, handle, listen) == 0 && *listen != nullptr);
  } else {
    CHECK(n->listen(dev, handle, listen) == 0 && *listen != nullptr);
  }
  *send = nullptr;
  *recv = nullptr;
  SentinelNetDeviceHandleV11* dc = nullptr;
  for (int i = 0; i < 100000 && (*send == nullptr || *recv == nullptr); ++i) {
    if (*send == nullptr) {
      if constexpr (HasContext(K)) {
        CHECK(n->connect(ctx, dev, handle, send, &dc) == 0);
      } else if constexpr (HasProfiler(K)) {
        CHECK(n->connect(dev, cfg, handle, send, &dc) == 0);
      } else if constexpr (HasDeviceMr(K)) {
        CHECK(n->connect(dev, handle, send, &dc) == 0);
      } else {
        CHECK(n->connect(dev, handle, send) == 0);
      }
    }
    if (*recv == nullptr) {
      if constexpr (HasDeviceMr(K)) {
        CHECK(n->accept(*listen, recv, &dc) == 0);
      } else {
        CHECK(n->accept(*listen, recv) == 0);
      }
    }
  }
  CHECK(*send != nullptr && *recv != nullptr);
}

template <int K>
int IsendV(typename NetApi<K>::Table* n, void* comm, void* data, size_t size, int tag, void* mh,
           void** req) {
  using Size = typename NetApi<K>::Size;
  if constexpr (HasProfiler(K)) {
    return n->isend(comm, data, static_cast<Size>(size), tag, mh, reinterpret_cast<void*>(0xAB),
                    req);
  } else {
    return n->isend(comm, data, static_cast<Size>(size), tag, mh, req);
  }
}

template <int K>
int IrecvV(typename NetApi<K>::Table* n, void* comm, void* data, size_t size, int tag, void* mh,
           void** req) {
  typename NetApi<K>::Size sizes[1] = {static_cast<typename NetApi<K>::Size>(size)};
  void* d[1] = {data};
  int tags[1] = {tag};
  void* mhs[1] = {mh};
  if constexpr (HasProfiler(K)) {
    void* phs[1] = {nullptr};
    return n->irecv(comm, 1, d, sizes, tags, mhs, phs, req);
  } else {
    return n->irecv(comm, 1, d, sizes, tags, mhs, req);
  }
}

// One message through table v<K>: data equal, sizes as the plugin saw them, completion sizes.
template <int K>
void TransferV(typename NetApi<K>::Table* n, const Loaded& l, void* send, void* recv, size_t size,
               int tag) {
  std::vector<char> out(size);
  std::vector<char> in(size + 64, 0);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<char>('a' + (i * 5 + size) % 26);
  void* smh = nullptr;
  CHECK(n->reg_mr(send, out.data(), static_cast<typename NetApi<K>::RegSize>(size),
                  SENTINEL_NET_PTR_HOST, &smh) == 0);
  CHECK(l.last("reg_size") == size);
  void* sreq = nullptr;
  void* rreq = nullptr;
  CHECK(IsendV<K>(n, send, out.data(), size, tag, smh, &sreq) == 0 && sreq != nullptr);
  CHECK(l.last("isend_size") == size && l.last("isend_tag") == static_cast<uint64_t>(tag));
  CHECK(IrecvV<K>(n, recv, in.data(), in.size(), tag, nullptr, &rreq) == 0 && rreq != nullptr);
  CHECK(l.last("irecv_size") == in.size() && l.last("irecv_n") == 1);
  CompleteBoth(n->test, sreq, rreq, size);
  CHECK(n->dereg_mr(send, smh) == 0);
  in.resize(size);
  CHECK(in == out);
}

template <typename T>
bool SameNullness(T a, T b) {
  return (a == nullptr) == (b == nullptr);
}

// Our table v<V> over a v<V> plugin: the same table NCCL would have used, every call forwarded.
template <int V>
void SameVersion() {
  auto p = LoadPair<V, V>({});
  auto* n = p.ours;
  const Loaded& l = p.l;
  CHECK(strcmp(n->name, "FakeNet") == 0);
  // NULL slots exactly as the plugin's.
  CHECK(SameNullness(n->reg_mr_dma_buf, p.real->reg_mr_dma_buf));
  if constexpr (HasDeviceMr(V)) {
    CHECK(n->get_device_mr != nullptr && n->irecv_consumed != nullptr);
  }
  if constexpr (HasVDevice(V)) CHECK(n->make_v_device != nullptr);
  void* ctx = nullptr;
  CHECK(InitV<V>(n, &ctx, nullptr) == 0);
  int ndev = 0;
  CHECK(n->devices(&ndev) == 0 && ndev == 2);
  for (int d = 0; d < ndev; ++d) {
    typename NetApi<V>::Props ours;
    typename NetApi<V>::Props real;
    memset(&ours, 0x5A, sizeof(ours));
    memset(&real, 0x5A, sizeof(real));
    CHECK(n->get_properties(d, &ours) == 0 && p.real->get_properties(d, &real) == 0);
    CHECK(memcmp(&ours, &real, sizeof(ours)) == 0);  // results unchanged, byte for byte
  }
  typename NetApi<V>::Props bad;
  CHECK(n->get_properties(7, &bad) == kSentinelNcclInvalidArgument);
  SentinelNetCommConfigV10 cfg{5};
  void *listen, *send, *recv;
  ConnectV<V>(n, ctx, 1, &cfg, &listen, &send, &recv);
  if constexpr (HasProfiler(V) && !HasContext(V)) CHECK(l.last("traffic_class") == 5);
  TransferV<V>(n, l, send, recv, 1000, 3);
  TransferV<V>(n, l, send, recv, 100000, 4);
  if constexpr (HasProfiler(V)) CHECK(l.last("isend_phandle") == 0xAB);
  void* freq = &cfg;
  CHECK(n->iflush(recv, 0, nullptr, nullptr, nullptr, &freq) == 0 && freq == nullptr);
  if constexpr (HasDeviceMr(V)) {
    void* dptr = &cfg;
    CHECK(n->get_device_mr(send, nullptr, &dptr) == 0 && dptr == nullptr);
    CHECK(n->irecv_consumed(recv, 1, nullptr) == 0);
  }
  if constexpr (HasVDevice(V)) {
    int vdev = -1;
    SentinelNetVDevicePropsV9 vp{};
    CHECK(n->make_v_device(&vdev, &vp) == 0 && vdev == 2);
  }
  static SentinelNetSnapshot s;
  CHECK(l.snapshot(&s) == 0);
  CHECK(s.wrapped_version == V && strcmp(s.real_name, "FakeNet") == 0 && s.ndevices == 2);
  CHECK(strcmp(s.devices[1].name, "fake1") == 0 && s.devices[1].speed_mbps == 100001);
  CHECK(s.nconns == 2 && s.conns[0].link_id == s.conns[1].link_id && s.conns[0].dev == 1);
  CHECK(s.conns[0].bytes == 101000 && s.conns[1].bytes == 101000);
  CHECK(s.conns[0].requests == 2 && s.conns[0].class_requests[0] == 1);
  CHECK(s.conns[0].class_requests[3] == 1 && s.conns[0].latency_ns_sum > 0);
  CHECK(n->close_send(send) == 0 && n->close_recv(recv) == 0 && n->close_listen(listen) == 0);
  for (const char* call :
       {"init", "devices", "getProperties", "listen", "connect", "accept", "regMr", "deregMr",
        "isend", "irecv", "iflush", "test", "closeSend", "closeRecv", "closeListen"}) {
    if (l.calls(call) <= 0) {
      fprintf(stderr, "not forwarded: %s\n", call);
      exit(1);
    }
  }
  CHECK(l.calls("getDeviceMr") == (HasDeviceMr(V) ? 1 : 0));
  CHECK(l.calls("makeVDevice") == (HasVDevice(V) ? 1 : 0));
  CHECK(l.calls("isend") == 2 && l.calls("irecv") == 2 && l.calls("init") == 1);
  exit(0);
}

TEST(NetWrapVersions, OlderPluginIsDrivenThroughItsOwnVersion) {
  EXPECT_EXIT(SameVersion<10>(), ::testing::ExitedWithCode(0),
              "NCCL uses our ncclNetPlugin_v10 table over FakeNet's v10 table");
  EXPECT_EXIT(SameVersion<9>(), ::testing::ExitedWithCode(0), "over FakeNet's v9 table");
  EXPECT_EXIT(SameVersion<8>(), ::testing::ExitedWithCode(0),
              "wrapping .*libnccl-net-fakev8.so \\(FakeNet, net API v8; our tables v8..v11");
  EXPECT_EXIT(SameVersion<7>(), ::testing::ExitedWithCode(0), "over FakeNet's v7 table");
  EXPECT_EXIT(SameVersion<6>(), ::testing::ExitedWithCode(0), "over FakeNet's v6 table");
}

// NCCL 2.28 picks our v11 table; a v<M> plugin gets what NCCL's own compat layer would give it.
template <int M>
void NewerTableOverOlderPlugin() {
  auto p = LoadPair<11, M>({});
  SentinelNetV11* n = p.ours;
  const Loaded& l = p.l;
  CHECK(n->set_net_attr == nullptr && n->finalize != nullptr);
  CHECK((n->make_v_device == nullptr) == !HasVDevice(M));
  CHECK((n->get_device_mr == nullptr) == !HasDeviceMr(M));
  void* ctx1 = nullptr;
  void* ctx2 = nullptr;
  SentinelNetCommConfigV11 config{9};
  CHECK(n->init(&ctx1, 1, &config, nullptr, nullptr) == 0);
  CHECK(n->init(&ctx2, 2, &config, nullptr, nullptr) == 0);
  CHECK(l.calls("init") == 1);  // an older plugin is initialised once
  SentinelNetPropertiesV11 props;
  memset(&props, 0x5A, sizeof(props));
  CHECK(n->get_properties(1, &props) == 0);
  CHECK(strcmp(props.name, "fake1") == 0 && props.speed == 100001 && props.max_comms == 65536);
  CHECK(props.max_multi_request_size == 1);
  if constexpr (M < 9) {
    CHECK(props.max_p2p_bytes == (size_t{1} << 30) && props.max_coll_bytes == (size_t{512} << 20));
    CHECK(props.v_props.ndevs == 1 && props.v_props.devs[0] == 1 && props.force_flush == 0);
  }
  if constexpr (M < 7) CHECK(props.net_device_type == 0 && props.net_device_version == 0);
  void *listen, *send, *recv;
  Connect(n, ctx1, 0, &listen, &send, &recv);
  if constexpr (M == 10) CHECK(l.last("traffic_class") == 9);  // via connect's config
  Transfer(n, send, recv, 5000, 6);
  CHECK(l.last("isend_size") == 5000 && l.last("irecv_size") == 5064);
  if constexpr (M < 9) {
    // Sizes an int-size plugin cannot take: refused before the plugin, as NCCL's compat does.
    long before = l.calls("isend");
    void* req = nullptr;
    char b = 0;
    CHECK(n->isend(send, &b, (size_t{1} << 30) + 1, 1, nullptr, nullptr, &req) ==
          kSentinelNcclInternalError);
    CHECK(l.calls("isend") == before);
  }
  static SentinelNetSnapshot s;
  CHECK(l.snapshot(&s) == 0 && s.wrapped_version == M);
  CHECK(s.conns[0].bytes == 5000 && s.conns[0].requests == 1);
  CHECK(n->finalize(ctx1) == 0 && n->finalize(ctx2) == 0);
  exit(0);
}

TEST(NetWrapVersions, NcclPicksOurV11TableOverAnOlderPlugin) {
  EXPECT_EXIT(NewerTableOverOlderPlugin<10>(), ::testing::ExitedWithCode(0),
              "NCCL uses our ncclNetPlugin_v11 table over FakeNet's v10 table");
  EXPECT_EXIT(NewerTableOverOlderPlugin<8>(), ::testing::ExitedWithCode(0), "over FakeNet's v8");
  EXPECT_EXIT(NewerTableOverOlderPlugin<6>(), ::testing::ExitedWithCode(0), "over FakeNet's v6");
}

// NCCL older than the plugin (it picks our v<K>, K below the plugin's oldest table): our init
// fails, as NCCL's own probe would have found no table it knows.
void OlderTableThanThePlugin() {
  auto p = LoadPair<7, 8>({});
  CHECK(p.ours->init(nullptr) == kSentinelNcclInternalError);
  CHECK(p.l.calls("init") == 0);
  exit(0);
}

TEST(NetWrapVersions, TableOlderThanThePluginBehavesAsAbsent) {
  EXPECT_EXIT(OlderTableThanThePlugin(), ::testing::ExitedWithCode(0), "");
}

template <int V>
void OlderErrorsAndLatency(const char* fail) {
  auto p = LoadPair<V, V>({{"FAKE_NET_FAIL", fail}, {"FAKE_NET_SEND_DELAY_US", "20000"}});
  auto* n = p.ours;
  CHECK(InitV<V>(n, nullptr, nullptr) == 0);
  SentinelNetCommConfigV10 cfg{-1};
  void *listen, *send, *recv;
  ConnectV<V>(n, nullptr, 0, &cfg, &listen, &send, &recv);
  char buf[4096] = {0};
  void* req = nullptr;
  static SentinelNetSnapshot s;
  if (strcmp(fail, "isend") == 0) {
    CHECK(IsendV<V>(n, send, buf, sizeof(buf), 1, nullptr, &req) == kSentinelNcclSystemError);
  } else {
    for (int i = 0; i < 3; ++i) TransferV<V>(n, p.l, send, recv, 4096, i);
  }
  CHECK(p.l.snapshot(&s) == 0);
  const SentinelNetConnStats& snd = s.conns[0].is_send ? s.conns[0] : s.conns[1];
  if (strcmp(fail, "isend") == 0) {
    CHECK(snd.errors == 1 && snd.requests == 0);
  } else {
    CHECK(snd.requests == 3 && snd.bytes == 3 * 4096 && snd.class_requests[1] == 3);
    CHECK(SendLatencyHoldsTheFakesDelay(snd, 3));
  }
  exit(0);
}

TEST(NetWrapVersions, IntSizeVersionsErrorsAndLatency) {
  EXPECT_EXIT(OlderErrorsAndLatency<8>("isend"), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(OlderErrorsAndLatency<8>("none"), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(OlderErrorsAndLatency<6>("isend"), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(OlderErrorsAndLatency<6>("none"), ::testing::ExitedWithCode(0), "");
}

}  // namespace
