// Test helpers for the collector: encode wire frames, a settable clock, and a real-socket plugin
// stand-in (our own small client speaking the wire, as the plugin's transport does).
#pragma once

#include <grp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "collector/aggregate/aggregator.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::testing {

// CLOCK_MONOTONIC in ns, the clock the plugin stamps records with.
// sentineld's defaults without the straggler's persistence in time (straggler-evidence 0, an
// explicit test option): for short synthetic jobs whose straggler is judged by the CUSUM alone.
inline collector::Config ConfigWithoutPersistence() {
  collector::Config c;
  c.straggler_evidence_ns = 0;
  return c;
}

inline int64_t MonoNow() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

class FakeClock : public collector::Clock {
 public:
  int64_t MonoNs() const override { return mono_; }
  int64_t RealNs() const override { return 1767225600000000000LL + mono_; }  // 2026-01-01
  void Advance(int64_t ns) { mono_ += ns; }
  void Set(int64_t ns) { mono_ = ns; }

 private:
  int64_t mono_ = 1000000000000LL;
};

using Bytes = std::vector<uint8_t>;

inline void AppendFrame(Bytes* out, uint16_t type, const void* body, size_t size,
                        uint32_t declared = 0) {
  const SentinelWireFrameHeader h{declared != 0 ? declared : static_cast<uint32_t>(8 + size), type,
                                  0};
  const size_t at = out->size();
  out->resize(at + 8 + size);
  std::memcpy(out->data() + at, &h, 8);
  if (size > 0) std::memcpy(out->data() + at + 8, body, size);
}

template <typename T>
Bytes Frame(uint16_t type, const T& body) {
  Bytes out;
  AppendFrame(&out, type, &body, sizeof(body));
  return out;
}

inline SentinelWireHello MakeHello(uint32_t pid, uint16_t major = SENTINEL_WIRE_MAJOR) {
  SentinelWireHello h{};
  h.magic = SENTINEL_WIRE_MAGIC;
  h.major = major;
  h.minor = SENTINEL_WIRE_MINOR;
  h.pid = pid;
  h.mono_ns = 1;
  h.realtime_ns = 1700000000000000000LL;
  std::strcpy(h.host, "testhost");
  std::strcpy(h.job_id, "job-42");
  return h;
}

// A GPU-timed collective of `rank` arriving at `arrival_ns` and running `duration_ns`.
inline SentinelWireCollRecord MakeColl(uint64_t comm, int rank, int nranks, uint64_t seq,
                                       int64_t arrival_ns, int64_t duration_ns,
                                       uint64_t bytes = 1 << 20,
                                       uint8_t func = kSentinelFuncAllReduce) {
  SentinelWireCollRecord r{};
  r.comm_hash = comm;
  r.seq = seq;
  r.bytes = bytes;
  r.rank = rank;
  r.nranks = nranks;
  r.peer = -1;
  r.root = -1;
  r.func = func;
  r.algo = kSentinelAlgoRing;
  r.proto = kSentinelProtoSimple;
  r.nchannels = 2;
  r.flags = kSentinelCollGpuTimeValid | kSentinelCollApiTimeValid;
  r.api_ns = arrival_ns - 2000;
  r.enqueue_ns = arrival_ns - 1000;
  r.gpu_start_ns = arrival_ns;
  r.gpu_end_ns = arrival_ns + duration_ns;
  r.pid = static_cast<uint32_t>(1000 + rank);
  return r;
}

inline SentinelWireCommInit MakeCommInit(uint64_t comm, int rank, int nranks) {
  SentinelWireCommInit c{};
  c.comm_hash = comm;
  c.rank = rank;
  c.nranks = nranks;
  c.nnodes = 1;
  c.pid = static_cast<uint32_t>(1000 + rank);
  c.abi_version = 5;
  std::strcpy(c.comm_name, "world");
  return c;
}

// The in-flight state a rank reports at `now_ns`: `enqueued`, `gpu_started` and `completed`
// collectives of `comm`; while one is outstanding (enqueued > completed), the oldest (seq
// completed + 1, an AllReduce) has waited since `oldest_since_ns`.
inline SentinelWireInFlight MakeInFlight(uint64_t comm, int rank, int nranks, uint64_t enqueued,
                                         uint64_t gpu_started, uint64_t completed,
                                         int64_t oldest_since_ns, int64_t now_ns) {
  SentinelWireInFlight in{};
  in.comm_hash = comm;
  in.now_ns = now_ns;
  in.enqueued = enqueued;
  in.gpu_started = gpu_started;
  in.completed = completed;
  in.oldest_since_ns = enqueued > completed ? oldest_since_ns : 0;
  in.oldest_seq = completed + 1;
  in.oldest_func = kSentinelFuncAllReduce;
  in.rank = rank;
  in.nranks = nranks;
  return in;
}

// A guard verdict of `rank` about `comm` (`nranks` ranks): `kind` (kSentinelVerdict*) with
// `outcome` (kSentinelOutcome*); its texts empty, for the caller to fill.
inline SentinelWireVerdict MakeVerdict(uint64_t comm, int rank, int nranks, uint16_t kind,
                                       uint16_t outcome) {
  SentinelWireVerdict v{};
  v.comm_hash = comm;
  v.rank = rank;
  v.nranks = nranks;
  v.kind = kind;
  v.outcome = outcome;
  return v;
}

// Hands a control frame (`type`, `body`) of `client` to the aggregator, as the ingest session does
// after parsing it.
template <typename T>
void DeliverControl(collector::Aggregator* agg, int client, uint16_t type, const T& body) {
  collector::Frame f;
  f.type = type;
  f.payload = reinterpret_cast<const uint8_t*>(&body);
  f.payload_size = sizeof(body);
  agg->OnControlFrame(client, f);
}

inline int ConnectUnix(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Connects to `path` from a forked child process, under `uid`/`gid` when >= 0 (needs root), and
// hands the connected descriptor back: the daemon's SO_PEERCRED (taken at connect) names that
// child's pid and uid, as a separate process would have. -1 on failure.
inline int ConnectFromChild(const std::string& path, int uid = -1, int gid = -1) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return -1;
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    close(pair[0]);
    if (gid >= 0 && (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0)) _exit(2);
    if (uid >= 0 && setresuid(uid, uid, uid) != 0) _exit(3);
    const int fd = ConnectUnix(path);
    if (fd < 0) _exit(4);
    char byte = 'f';
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    _exit(sendmsg(pair[1], &msg, 0) == 1 ? 0 : 5);
  }
  close(pair[1]);
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  int fd = -1;
  if (recvmsg(pair[0], &msg, MSG_CMSG_CLOEXEC) == 1) {
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    if (cm != nullptr && cm->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(cm), sizeof(int));
  }
  close(pair[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return fd;
}

// A blocking client on a UNIX socket: Connect() sends the hello and reads the ack.
class WireClient {
 public:
  ~WireClient() { Close(); }
  // Connect from a child process of its own (ConnectFromChild), under `uid`/`gid` when >= 0.
  void ConnectAsOwnProcess(int uid = -1, int gid = -1) {
    own_process_ = true;
    uid_ = uid;
    gid_ = gid;
  }
  // The host its hello claims (default "testhost").
  void set_hello_host(const std::string& host) { hello_host_ = host; }
  bool Connect(const std::string& path, uint32_t pid, uint16_t major = SENTINEL_WIRE_MAJOR,
               SentinelWireHelloAck* ack_out = nullptr) {
    fd_ = own_process_ ? ConnectFromChild(path, uid_, gid_) : ConnectUnix(path);
    if (fd_ < 0) return false;
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    SentinelWireHello hello = MakeHello(pid, major);
    if (!hello_host_.empty()) {
      std::memset(hello.host, 0, sizeof(hello.host));
      std::memcpy(hello.host, hello_host_.data(),
                  std::min(hello_host_.size(), sizeof(hello.host) - 1));
    }
    if (!Send(Frame(kSentinelWireHello, hello))) return false;
    uint8_t buf[24];
    size_t got = 0;
    while (got < sizeof(buf)) {
      const ssize_t n = read(fd_, buf + got, sizeof(buf) - got);
      if (n <= 0) return false;
      got += static_cast<size_t>(n);
    }
    SentinelWireHelloAck ack{};
    std::memcpy(&ack, buf + 8, sizeof(ack));
    if (ack_out != nullptr) *ack_out = ack;
    return ack.status == kSentinelHelloAccepted;
  }
  bool Send(const Bytes& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // True when the peer has closed the connection (read returns 0 or an error).
  bool PeerClosed() {
    uint8_t b;
    const ssize_t n = recv(fd_, &b, 1, 0);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  bool own_process_ = false;
  std::string hello_host_;
  int uid_ = -1;
  int gid_ = -1;
};

}  // namespace sentinel::testing
