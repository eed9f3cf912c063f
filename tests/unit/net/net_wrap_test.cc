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

// Sets the environment, then loads the wrapper as NCCL does (RTLD_NOW | RTLD_LOCAL, §7.1).
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
  int sdone = 0;
  int rdone = 0;
  int ssize = -1;
  int rsize = -1;
  for (long i = 0; i < 100000000 && (!sdone || !rdone); ++i) {
    if (!sdone) CHECK(n->test(sreq, &sdone, &ssize) == 0);
    if (!rdone) CHECK(n->test(rreq, &rdone, &rsize) == 0);
  }
  CHECK(sdone && rdone);
  CHECK(ssize == static_cast<int>(size) && rsize == static_cast<int>(size));
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
  CHECK(snd.latency_ns_sum >= 3ull * 20000000ull);  // isend -> completing test, each >= 20 ms
  CHECK(snd.latency_ns_sum < 3ull * 2000000000ull);
  CHECK(snd.class_requests[1] == 3);  // 4096 B: [4K, 16K)
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

TEST(NetWrap, MissingOrOlderPluginFailsInitWithOneLine) {
  EXPECT_EXIT(NoUsablePlugin("/nonexistent/libnccl-net-nothing.so"), ::testing::ExitedWithCode(0),
              "SENTINEL_NET_WRAP=/nonexistent/libnccl-net-nothing.so: cannot load");
  EXPECT_EXIT(NoUsablePlugin(FAKE_NET_V9_SO), ::testing::ExitedWithCode(0),
              "newest table is v9; this build wraps v11 only");
  EXPECT_EXIT(NoUsablePlugin(nullptr), ::testing::ExitedWithCode(0), "SENTINEL_NET_WRAP is unset");
  EXPECT_EXIT(NoUsablePlugin(SENTINEL_NET_SO), ::testing::ExitedWithCode(0),
              "names sentinel itself");
}

}  // namespace
