// libnccl-net-fake.so: an external NCCL net plugin (API v11) for tests, with a real loopback TCP
// transport. Written from docs/nccl-facts.md "7. Net plugin API". It counts every call and
// remembers the last arguments of the ones tests check (fakeNetCalls / fakeNetLast), so a wrapper's
// forwarding can be verified from outside. Not kinder than a real plugin: connect/accept are
// non-blocking, a recv completes only when every byte arrived, errors come back as NCCL results.
//
// Environment (read at load):
//   FAKE_NET_NDEV=<n>            devices (default 2); dev 0 offers GPUDirect (PTR_CUDA), the others
//   not FAKE_NET_FAIL=<call>         that call returns ncclSystemError (init, devices, listen,
//   connect,
//                                accept, isend, irecv, test)
//   FAKE_NET_SEND_DELAY_US=<us>  a send completes only this long after isend (a slow link)
//   FAKE_NET_SLOW_DEV=<dev>      ... only on connections of that device (default: all)
//   FAKE_NET_NULL_OPTIONAL=1     the optional slots (getDeviceMr, irecvConsumed, makeVDevice,
//                                setNetAttr, regMrDmaBuf) are NULL
//   FAKE_NET_NULL_IO=1           isend/irecv/test touch no socket: a static request, done at once
//                                (benchmarks)
// Built once per net API version: FAKE_NET_VERSION=<v> (default 11) exports only
// `ncclNetPlugin_v<v>`, with that version's signatures (int sizes up to v8, init once up to v10,
// ...; plugin/net/net_abi.h), so a wrapper is checked against what a real plugin of that version
// receives.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "plugin/net/net_abi.h"
#include "plugin/net/net_versions.h"

#ifndef FAKE_NET_VERSION
#define FAKE_NET_VERSION 11
#endif

namespace {

enum Call {
  kInit,
  kDevices,
  kGetProperties,
  kListen,
  kConnect,
  kAccept,
  kRegMr,
  kRegMrDmaBuf,
  kDeregMr,
  kIsend,
  kIrecv,
  kIflush,
  kTest,
  kCloseSend,
  kCloseRecv,
  kCloseListen,
  kGetDeviceMr,
  kIrecvConsumed,
  kMakeVDevice,
  kFinalize,
  kSetNetAttr,
  kNumCalls
};
const char* const kCallNames[kNumCalls] = {
    "init",        "devices",     "getProperties", "listen",      "connect",     "accept",
    "regMr",       "regMrDmaBuf", "deregMr",       "isend",       "irecv",       "iflush",
    "test",        "closeSend",   "closeRecv",     "closeListen", "getDeviceMr", "irecvConsumed",
    "makeVDevice", "finalize",    "setNetAttr"};

std::atomic<uint64_t> g_calls[kNumCalls];
int g_ndev = 2;
int g_fail = -1;
int64_t g_send_delay_ns = 0;
int g_slow_dev = -1;
bool g_null_io = false;

// Last arguments, for forwarding checks.
struct Last {
  uint64_t comm_id = 0;
  int traffic_class = 0;
  void* isend_mhandle = nullptr;
  void* isend_phandle = nullptr;
  int isend_tag = 0;
  int irecv_tag = 0;
  int reg_type = 0;
  uint64_t isend_size = 0;  // as the plugin received it
  uint64_t irecv_size = 0;
  uint64_t reg_size = 0;
  int irecv_n = 0;
  int init_calls_with_logger = 0;
};
Last g_last;

constexpr uint32_t kMagic = 0xFA4E7001;
struct Handle {
  uint32_t magic;
  uint16_t port;
  int32_t dev;
};
struct ListenComm {
  int fd;
  int dev;
};
struct Comm {
  int fd;
  int dev;
};
struct Request {
  bool send;
  bool done;
  int64_t done_at;
  Comm* comm;
  char* buf;
  uint64_t size;  // send: bytes; recv: bytes announced by the header (once read)
  uint64_t capacity;
  uint64_t got;  // recv: bytes read so far (header included)
  unsigned char header[16];
};
Request g_null_request{};

int64_t Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

bool Count(Call c) {
  g_calls[c].fetch_add(1, std::memory_order_relaxed);
  return g_fail == c;
}

bool WriteAll(int fd, const void* p, size_t n) {
  const char* b = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w <= 0) return false;
    b += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

[[maybe_unused]] SentinelNcclResult Init(void** ctx, uint64_t comm_id,
                                         SentinelNetCommConfigV11* config, SentinelNcclLogger,
                                         SentinelNetProfilerCallback) {
  if (Count(kInit)) return kSentinelNcclSystemError;
  g_last.comm_id = comm_id;
  g_last.traffic_class = config != nullptr ? config->traffic_class : -2;
  if (ctx != nullptr) *ctx = &g_last;
  return kSentinelNcclSuccess;
}

SentinelNcclResult Devices(int* ndev) {
  if (Count(kDevices)) return kSentinelNcclSystemError;
  *ndev = g_ndev;
  return kSentinelNcclSuccess;
}

SentinelNcclResult GetProperties(int dev, SentinelNetPropertiesV11* p) {
  if (Count(kGetProperties) || dev < 0 || dev >= g_ndev) return kSentinelNcclInvalidArgument;
  static char names[8][16];
  static char paths[8][64];
  int d = dev % 8;
  snprintf(names[d], sizeof(names[d]), "fake%d", dev);
  snprintf(paths[d], sizeof(paths[d]), "/sys/devices/pci0000:00/0000:00:0%d.0", d);
  memset(p, 0, sizeof(*p));
  p->name = names[d];
  p->pci_path = paths[d];
  p->guid = 0xF00D0000ull + static_cast<uint64_t>(dev);
  p->ptr_support =
      dev == 0 ? (SENTINEL_NET_PTR_HOST | SENTINEL_NET_PTR_CUDA) : SENTINEL_NET_PTR_HOST;
  p->speed = 100000 + dev;
  p->port = 1;
  p->latency = 2.5f;
  p->max_comms = 65536;
  p->max_recvs = 1;
  p->max_p2p_bytes = 1ull << 31;
  p->max_coll_bytes = 1ull << 31;
  return kSentinelNcclSuccess;
}

[[maybe_unused]] SentinelNcclResult Listen(void*, int dev, void* handle, void** listen_comm) {
  if (Count(kListen)) return kSentinelNcclSystemError;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(fd, 64) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) close(fd);
    return kSentinelNcclSystemError;
  }
  memset(handle, 0, SENTINEL_NET_HANDLE_MAXSIZE);
  Handle h{kMagic, ntohs(a.sin_port), dev};
  memcpy(handle, &h, sizeof(h));
  *listen_comm = new ListenComm{fd, dev};
  return kSentinelNcclSuccess;
}

[[maybe_unused]] SentinelNcclResult Connect(void*, int dev, void* handle, void** send_comm,
                                            SentinelNetDeviceHandleV11** send_dev_comm) {
  if (Count(kConnect)) return kSentinelNcclSystemError;
  Handle h;
  memcpy(&h, handle, sizeof(h));
  if (h.magic != kMagic) return kSentinelNcclInvalidArgument;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(h.port);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (fd >= 0) close(fd);
    return kSentinelNcclSystemError;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (send_dev_comm != nullptr) *send_dev_comm = nullptr;
  *send_comm = new Comm{fd, dev};
  return kSentinelNcclSuccess;
}

[[maybe_unused]] SentinelNcclResult Accept(void* listen_comm, void** recv_comm,
                                           SentinelNetDeviceHandleV11** recv_dev_comm) {
  if (Count(kAccept)) return kSentinelNcclSystemError;
  auto* l = static_cast<ListenComm*>(listen_comm);
  int fd = accept4(l->fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (recv_dev_comm != nullptr) *recv_dev_comm = nullptr;
  if (fd < 0) {
    *recv_comm = nullptr;  // not yet: NCCL calls again (docs/nccl-facts.md "7.3 `ncclNet_v11_t`")
    return (errno == EAGAIN || errno == EWOULDBLOCK) ? kSentinelNcclSuccess
                                                     : kSentinelNcclSystemError;
  }
  *recv_comm = new Comm{fd, l->dev};
  return kSentinelNcclSuccess;
}

SentinelNcclResult RegMr(void*, void* data, size_t size, int type, void** mhandle) {
  Count(kRegMr);
  g_last.reg_type = type;
  g_last.reg_size = size;
  *mhandle = data;
  return kSentinelNcclSuccess;
}

SentinelNcclResult RegMrDmaBuf(void*, void* data, size_t, int type, uint64_t, int, void** mhandle) {
  Count(kRegMrDmaBuf);
  g_last.reg_type = type;
  *mhandle = data;
  return kSentinelNcclSuccess;
}

SentinelNcclResult DeregMr(void*, void*) {
  Count(kDeregMr);
  return kSentinelNcclSuccess;
}

[[maybe_unused]] SentinelNcclResult Isend(void* send_comm, void* data, size_t size, int tag,
                                          void* mhandle, void* phandle, void** request) {
  if (Count(kIsend)) return kSentinelNcclSystemError;
  g_last.isend_tag = tag;
  g_last.isend_size = size;
  g_last.isend_mhandle = mhandle;
  g_last.isend_phandle = phandle;
  if (g_null_io) {
    *request = &g_null_request;
    return kSentinelNcclSuccess;
  }
  auto* c = static_cast<Comm*>(send_comm);
  uint64_t hdr[2] = {size, static_cast<uint64_t>(static_cast<int64_t>(tag))};
  if (!WriteAll(c->fd, hdr, sizeof(hdr)) || !WriteAll(c->fd, data, size)) {
    return kSentinelNcclRemoteError;
  }
  auto* r = new Request{};
  r->send = true;
  r->size = size;
  r->done_at = Now() + (g_slow_dev < 0 || g_slow_dev == c->dev ? g_send_delay_ns : 0);
  *request = r;
  return kSentinelNcclSuccess;
}

[[maybe_unused]] SentinelNcclResult Irecv(void* recv_comm, int n, void** data, size_t* sizes,
                                          int* tags, void**, void**, void** request) {
  if (Count(kIrecv)) return kSentinelNcclSystemError;
  if (n != 1) return kSentinelNcclInvalidArgument;  // maxRecvs = 1
  g_last.irecv_tag = tags != nullptr ? tags[0] : 0;
  g_last.irecv_n = n;
  g_last.irecv_size = sizes != nullptr ? sizes[0] : 0;
  if (g_null_io) {
    *request = &g_null_request;
    return kSentinelNcclSuccess;
  }
  auto* r = new Request{};
  r->comm = static_cast<Comm*>(recv_comm);
  r->buf = static_cast<char*>(data[0]);
  r->capacity = sizes[0];
  *request = r;
  return kSentinelNcclSuccess;
}

SentinelNcclResult Iflush(void*, int, void**, int*, void**, void** request) {
  Count(kIflush);
  *request = nullptr;  // host memory: nothing to flush
  return kSentinelNcclSuccess;
}

SentinelNcclResult Test(void* request, int* done, int* sizes) {
  if (Count(kTest)) return kSentinelNcclSystemError;
  if (request == &g_null_request) {
    *done = 1;
    if (sizes != nullptr) sizes[0] = 64;
    return kSentinelNcclSuccess;
  }
  auto* r = static_cast<Request*>(request);
  *done = 0;
  if (r->send) {
    if (Now() < r->done_at) return kSentinelNcclSuccess;
    *done = 1;
    if (sizes != nullptr) sizes[0] = static_cast<int>(r->size);
    delete r;
    return kSentinelNcclSuccess;
  }
  for (;;) {
    bool in_header = r->got < sizeof(r->header);
    char* dst = in_header ? reinterpret_cast<char*>(r->header) + r->got : r->buf + (r->got - 16);
    uint64_t want = in_header ? sizeof(r->header) - r->got : r->size - (r->got - 16);
    if (want == 0) break;
    ssize_t got = recv(r->comm->fd, dst, want, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      return kSentinelNcclSuccess;
    }
    if (got <= 0) return kSentinelNcclRemoteError;
    r->got += static_cast<uint64_t>(got);
    if (in_header && r->got == sizeof(r->header)) {
      memcpy(&r->size, r->header, sizeof(r->size));
      if (r->size > r->capacity) return kSentinelNcclInternalError;  // truncation: NCCL aborts
    }
  }
  *done = 1;
  if (sizes != nullptr) sizes[0] = static_cast<int>(r->size);
  delete r;
  return kSentinelNcclSuccess;
}

SentinelNcclResult CloseComm(void* comm, Call which) {
  Count(which);
  auto* c = static_cast<Comm*>(comm);
  if (c != nullptr) close(c->fd);
  delete c;
  return kSentinelNcclSuccess;
}
SentinelNcclResult CloseSend(void* c) { return CloseComm(c, kCloseSend); }
SentinelNcclResult CloseRecv(void* c) { return CloseComm(c, kCloseRecv); }
SentinelNcclResult CloseListen(void* listen_comm) {
  Count(kCloseListen);
  auto* l = static_cast<ListenComm*>(listen_comm);
  if (l != nullptr) close(l->fd);
  delete l;
  return kSentinelNcclSuccess;
}
[[maybe_unused]] SentinelNcclResult GetDeviceMr(void*, void*, void** dptr) {
  Count(kGetDeviceMr);
  *dptr = nullptr;
  return kSentinelNcclSuccess;
}
[[maybe_unused]] SentinelNcclResult IrecvConsumed(void*, int, void*) {
  Count(kIrecvConsumed);
  return kSentinelNcclSuccess;
}
[[maybe_unused]] SentinelNcclResult MakeVDevice(int* d, SentinelNetVDevicePropsV11*) {
  Count(kMakeVDevice);
  *d = g_ndev;
  return kSentinelNcclSuccess;
}
[[maybe_unused]] SentinelNcclResult Finalize(void*) {
  Count(kFinalize);
  return kSentinelNcclSuccess;
}
[[maybe_unused]] SentinelNcclResult SetNetAttr(void*, SentinelNetAttrV11*) {
  Count(kSetNetAttr);
  return kSentinelNcclSuccess;
}

}  // namespace

// ---- the table of version FAKE_NET_VERSION over the functions above ---------------------------
namespace {
using sentinel::net::NetApi;
constexpr int kV = FAKE_NET_VERSION;
// Only the adapters of the built version are used.
using SizeV = NetApi<kV>::Size;

[[maybe_unused]] SentinelNcclResult OldInit(SentinelNcclLogger) {
  return Init(nullptr, 0, nullptr, nullptr, nullptr);
}
[[maybe_unused]] SentinelNcclResult OldInit10(SentinelNcclLogger, SentinelNetProfilerCallback) {
  return Init(nullptr, 0, nullptr, nullptr, nullptr);
}
template <int V>
[[maybe_unused]] SentinelNcclResult GetPropertiesV(int dev, typename NetApi<V>::Props* p) {
  SentinelNetPropertiesV11 mine{};
  SentinelNcclResult rc = GetProperties(dev, &mine);
  // Only the fields this version has (v11 -> v<V> drops the rest).
  if (rc == kSentinelNcclSuccess) sentinel::net::ConvertProps<V, 11>(dev, mine, p);
  return rc;
}
[[maybe_unused]] SentinelNcclResult OldListen(int dev, void* handle, void** listen_comm) {
  return Listen(nullptr, dev, handle, listen_comm);
}
[[maybe_unused]] SentinelNcclResult Connect6(int dev, void* handle, void** send_comm) {
  return Connect(nullptr, dev, handle, send_comm, nullptr);
}
[[maybe_unused]] SentinelNcclResult Connect7(int dev, void* handle, void** send_comm,
                                             SentinelNetDeviceHandleV7** dev_comm) {
  return Connect(nullptr, dev, handle, send_comm, dev_comm);
}
[[maybe_unused]] SentinelNcclResult Connect10(int dev, SentinelNetCommConfigV10* config,
                                              void* handle, void** send_comm,
                                              SentinelNetDeviceHandleV7** dev_comm) {
  g_last.traffic_class = config != nullptr ? config->traffic_class : -2;
  return Connect(nullptr, dev, handle, send_comm, dev_comm);
}
[[maybe_unused]] SentinelNcclResult Accept6(void* listen_comm, void** recv_comm) {
  return Accept(listen_comm, recv_comm, nullptr);
}
[[maybe_unused]] SentinelNcclResult RegMrV(void* comm, void* data, NetApi<kV>::RegSize size,
                                           int type, void** mhandle) {
  return RegMr(comm, data, static_cast<size_t>(size), type, mhandle);
}
[[maybe_unused]] SentinelNcclResult IsendOld(void* c, void* data, SizeV size, int tag, void* mh,
                                             void** req) {
  return Isend(c, data, static_cast<size_t>(size), tag, mh, nullptr, req);
}
[[maybe_unused]] SentinelNcclResult Isend10(void* c, void* data, SizeV size, int tag, void* mh,
                                            void* ph, void** req) {
  return Isend(c, data, static_cast<size_t>(size), tag, mh, ph, req);
}
[[maybe_unused]] SentinelNcclResult IrecvV(void* c, int n, void** data, SizeV* sizes, int* tags,
                                           void** mh, void** ph, void** req) {
  size_t wide[8];
  if (n < 1 || n > 8) return kSentinelNcclInvalidArgument;
  for (int i = 0; i < n; ++i) wide[i] = static_cast<size_t>(sizes[i]);
  return Irecv(c, n, data, wide, tags, mh, ph, req);
}
[[maybe_unused]] SentinelNcclResult IrecvOld(void* c, int n, void** data, SizeV* sizes, int* tags,
                                             void** mh, void** req) {
  return IrecvV(c, n, data, sizes, tags, mh, nullptr, req);
}

template <int V>
typename NetApi<V>::Table MakeTable() {
  typename NetApi<V>::Table t{};
  t.name = "FakeNet";
  t.devices = Devices;
  t.get_properties = GetPropertiesV<V>;
  if constexpr (V == 11) {
    t.init = Init;
    t.listen = Listen;
    t.connect = Connect;
  } else {
    t.listen = OldListen;
    if constexpr (V == 10) {
      t.init = OldInit10;
      t.connect = Connect10;
    } else {
      t.init = OldInit;
      if constexpr (V >= 7) {
        t.connect = Connect7;
      } else {
        t.connect = Connect6;
      }
    }
  }
  if constexpr (V == 6) {
    t.accept = Accept6;
  } else {
    t.accept = Accept;
  }
  t.reg_mr = RegMrV;
  t.reg_mr_dma_buf = RegMrDmaBuf;
  t.dereg_mr = DeregMr;
  if constexpr (V >= 10) {
    t.isend = Isend10;
    t.irecv = IrecvV;
  } else {
    t.isend = IsendOld;
    t.irecv = IrecvOld;
  }
  t.iflush = Iflush;
  t.test = Test;
  t.close_send = CloseSend;
  t.close_recv = CloseRecv;
  t.close_listen = CloseListen;
  if constexpr (V >= 7) {
    t.get_device_mr = GetDeviceMr;
    t.irecv_consumed = IrecvConsumed;
  }
  if constexpr (V >= 9) t.make_v_device = MakeVDevice;
  if constexpr (V >= 11) {
    t.finalize = Finalize;
    t.set_net_attr = SetNetAttr;
  }
  return t;
}

}  // namespace

#define FAKE_NET_CAT2(a, b) a##b
#define FAKE_NET_CAT(a, b) FAKE_NET_CAT2(a, b)
#define FAKE_NET_TABLE FAKE_NET_CAT(ncclNetPlugin_v, FAKE_NET_VERSION)

extern "C" {

__attribute__((visibility("default")))
NetApi<kV>::Table FAKE_NET_TABLE{};  // filled by ReadEnv (runs at dlopen)

// Calls so far of `name` (kCallNames), or -1.
__attribute__((visibility("default"))) long fakeNetCalls(const char* name) {
  for (int i = 0; i < kNumCalls; ++i) {
    if (strcmp(name, kCallNames[i]) == 0) return static_cast<long>(g_calls[i].load());
  }
  return -1;
}

// The last value of one remembered argument (see Last), as an integer.
__attribute__((visibility("default"))) uint64_t fakeNetLast(const char* what) {
  if (strcmp(what, "comm_id") == 0) return g_last.comm_id;
  if (strcmp(what, "traffic_class") == 0) return static_cast<uint64_t>(g_last.traffic_class);
  if (strcmp(what, "isend_tag") == 0) return static_cast<uint64_t>(g_last.isend_tag);
  if (strcmp(what, "irecv_tag") == 0) return static_cast<uint64_t>(g_last.irecv_tag);
  if (strcmp(what, "isend_mhandle") == 0) return reinterpret_cast<uint64_t>(g_last.isend_mhandle);
  if (strcmp(what, "isend_phandle") == 0) return reinterpret_cast<uint64_t>(g_last.isend_phandle);
  if (strcmp(what, "reg_type") == 0) return static_cast<uint64_t>(g_last.reg_type);
  if (strcmp(what, "reg_size") == 0) return g_last.reg_size;
  if (strcmp(what, "isend_size") == 0) return g_last.isend_size;
  if (strcmp(what, "irecv_size") == 0) return g_last.irecv_size;
  if (strcmp(what, "irecv_n") == 0) return static_cast<uint64_t>(g_last.irecv_n);
  if (strcmp(what, "version") == 0) return FAKE_NET_VERSION;
  return ~0ull;
}

}  // extern "C"

namespace {

template <int V>
void NullOptional(typename NetApi<V>::Table* t) {
  t->reg_mr_dma_buf = nullptr;
  if constexpr (V >= 7) {
    t->get_device_mr = nullptr;
    t->irecv_consumed = nullptr;
  }
  if constexpr (V >= 9) t->make_v_device = nullptr;
  if constexpr (V >= 11) t->set_net_attr = nullptr;
}

__attribute__((constructor)) void ReadEnv() {
  FAKE_NET_TABLE = MakeTable<kV>();
  if (const char* v = getenv("FAKE_NET_NDEV")) g_ndev = atoi(v);
  if (const char* v = getenv("FAKE_NET_FAIL")) {
    for (int i = 0; i < kNumCalls; ++i) {
      if (strcmp(v, kCallNames[i]) == 0) g_fail = i;
    }
  }
  if (const char* v = getenv("FAKE_NET_SEND_DELAY_US")) g_send_delay_ns = atoll(v) * 1000;
  if (const char* v = getenv("FAKE_NET_SLOW_DEV")) g_slow_dev = atoi(v);
  g_null_io = getenv("FAKE_NET_NULL_IO") != nullptr;
  if (getenv("FAKE_NET_NULL_OPTIONAL") != nullptr) {
    NullOptional<kV>(&FAKE_NET_TABLE);
  }
}

}  // namespace

#ifdef FAKE_NET_COLLNET
// Only the symbol's presence matters: the wrapper must notice that it does not forward CollNet.
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables): a symbol NCCL would dlsym
extern "C" {
__attribute__((visibility("default"))) void* ncclCollNetPlugin_v8[24];
}
#endif
