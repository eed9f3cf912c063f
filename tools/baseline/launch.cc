// Launcher environment and the rank-0 rendezvous; see launch.h. Wire of the rendezvous (all
// little-endian; T = the job's token, HMAC = HMAC-SHA256 keyed with T):
//   server -> client  "SNB2" | server nonce (32 random bytes)
//   client -> server  "SNB2" | u32 rank | client nonce (32) | HMAC("sentinel-baseline client" |
//                     server nonce | client nonce | rank)
//   server -> client  "SNB2" | 128-byte id | u32 n | n x u64 sizes | HMAC("sentinel-baseline
//                     server" | server nonce | client nonce | rank | id | n | sizes)
// Each side checks the other's MAC before it trusts anything: a stranger without T gets no id,
// a squatter on the port cannot feed a rank a fake id or sizes, and a recorded exchange replays
// nowhere (fresh nonces on both sides).
#include "tools/baseline/launch.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>

#include "common/errno_text.h"
#include "common/mono_clock.h"
#include "tools/baseline/hmac_sha256.h"

namespace sentinel::baseline {
namespace {

constexpr char kMagic[4] = {'S', 'N', 'B', '2'};
constexpr size_t kNonceBytes = 32;
constexpr size_t kServerHelloBytes = 4 + kNonceBytes;
constexpr size_t kClientHelloBytes = 4 + 4 + kNonceBytes + kSha256Bytes;
constexpr char kClientLabel[] = "sentinel-baseline client";
constexpr char kServerLabel[] = "sentinel-baseline server";

bool ParseInt(const char* text, int* out) {
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  long v = strtol(text, &end, 10);
  if (*end != '\0' || v < 0 || v > (1 << 24)) return false;
  *out = static_cast<int>(v);
  return true;
}

// Deadlines here are in seconds of CLOCK_MONOTONIC (common/mono_clock.h).
double Seconds(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

// Waits for `fd` to be readable (events POLLIN) or writable until `deadline`.
bool WaitFd(int fd, short events, double deadline) {
  for (;;) {
    double left = deadline - Seconds(rules::MonoNowNs());
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return false;
  }
}

bool WriteAll(int fd, const void* data, size_t n, double deadline) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    if (!WaitFd(fd, POLLOUT, deadline)) return false;
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n, double deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    if (!WaitFd(fd, POLLIN, deadline)) return false;
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Fills `out` with bytes from the kernel's random source.
bool RandomBytes(uint8_t* out, size_t n) {
  while (n > 0) {
    const ssize_t r = getrandom(out, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    out += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// label | server nonce | client nonce | rank (u32) | payload
std::string MacInput(const char* label, const uint8_t* server_nonce, const uint8_t* client_nonce,
                     uint32_t rank, const std::string& payload) {
  std::string m(label);
  m.append(reinterpret_cast<const char*>(server_nonce), kNonceBytes);
  m.append(reinterpret_cast<const char*>(client_nonce), kNonceBytes);
  m.append(reinterpret_cast<const char*>(&rank), 4);
  m += payload;
  return m;
}

// id | u32 n | n x u64: what the server's MAC covers after the magic.
std::string Payload(const Rendezvous& rv) {
  std::string p(rv.id.internal, kNcclUniqueIdBytes);
  const auto n = static_cast<uint32_t>(rv.sizes.size());
  p.append(reinterpret_cast<const char*>(&n), 4);
  for (uint64_t s : rv.sizes) p.append(reinterpret_cast<const char*>(&s), 8);
  return p;
}

// One connection rank 0 is serving.
struct Peer {
  int fd = -1;
  double deadline = 0;
  uint8_t server_nonce[kNonceBytes] = {};
  std::string in;   // the client's hello, as it arrives
  std::string out;  // what is left to send
  uint32_t rank = 0;
  bool replying = false;  // the hello checked out; `out` is the id
};

}  // namespace

std::string FirstSlurmHost(const std::string& nodelist) {
  size_t end = nodelist.find_first_of(",[");
  if (end == std::string::npos) return nodelist;
  std::string prefix = nodelist.substr(0, end);
  if (nodelist[end] == ',') return prefix;
  size_t stop = nodelist.find_first_of(",-]", end + 1);
  if (stop == std::string::npos) return prefix;
  return prefix + nodelist.substr(end + 1, stop - end - 1);
}

absl::Status ReadLaunchInfo(const GetEnvFn& getenv_fn, LaunchInfo* out) {
  struct Scheme {
    const char* name;
    const char* rank;
    const char* world;
    const char* local;
  };
  const Scheme kSchemes[] = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
      {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
  };
  LaunchInfo info;
  for (const Scheme& s : kSchemes) {
    const char* rank = getenv_fn(s.rank);
    if (rank == nullptr) continue;
    info.launcher = s.name;
    const char* world = getenv_fn(s.world);
    if (!ParseInt(rank, &info.rank) || !ParseInt(world, &info.world) || info.world < 1 ||
        info.rank >= info.world) {
      return absl::InvalidArgumentError(
          std::string(s.name) + " environment: " + s.rank + "='" + rank + "', " + s.world + "='" +
          (world != nullptr ? world : "(unset)") + "' is not a rank within a world");
    }
    const char* local = getenv_fn(s.local);
    if (local != nullptr && !ParseInt(local, &info.local_rank)) {
      return absl::InvalidArgumentError(std::string(s.local) + "='" + local + "' is not a number");
    }
    break;
  }
  const char* addr = getenv_fn("MASTER_ADDR");
  const char* nodelist = getenv_fn("SLURM_JOB_NODELIST");
  if (addr != nullptr && *addr != '\0') {
    info.master_addr = addr;
  } else if (nodelist != nullptr && *nodelist != '\0') {
    info.master_addr = FirstSlurmHost(nodelist);
  }
  int port = 0;
  const char* own = getenv_fn("SENTINEL_BASELINE_PORT");
  const char* master_port = getenv_fn("MASTER_PORT");
  if (own != nullptr && *own != '\0') {
    if (!ParseInt(own, &port) || port < 1 || port > 65535) {
      return absl::InvalidArgumentError(std::string("SENTINEL_BASELINE_PORT='") + own +
                                        "' is not a TCP port");
    }
  } else if (master_port != nullptr && *master_port != '\0') {
    if (!ParseInt(master_port, &port) || port < 1 || port > 65534) {
      return absl::InvalidArgumentError(std::string("MASTER_PORT='") + master_port +
                                        "' is not a TCP port");
    }
    ++port;
  } else {
    port = 29401;
  }
  info.port = port;
  const char* token = getenv_fn("SENTINEL_BASELINE_TOKEN");
  if (token != nullptr) info.token = token;
  if (info.world > 1 && info.token.size() < kMinTokenBytes) {
    return absl::InvalidArgumentError(
        std::string(info.token.empty() ? "SENTINEL_BASELINE_TOKEN is not set"
                                       : "SENTINEL_BASELINE_TOKEN is shorter than 16 bytes") +
        ": with " + std::to_string(info.world) +
        " ranks, rank 0 hands the NCCL id only to ranks that prove they hold the job's "
        "token. Give every rank the same random one, e.g. export "
        "SENTINEL_BASELINE_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n') before "
        "srun/torchrun/mpirun");
  }
  if (info.token.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError("SENTINEL_BASELINE_TOKEN is longer than " +
                                      std::to_string(kMaxTokenBytes) + " bytes");
  }
  *out = info;
  return absl::OkStatus();
}

absl::StatusOr<int> ListenForRendezvous(int port, int* bound_port) {
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool v6 = fd >= 0;
  if (!v6) fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::UnavailableError(std::string("socket: ") + rules::ErrnoText(errno));
  }
  int one = 1;
  int zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc = -1;
  if (v6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // IPv4 peers too
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    rc = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    rc = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0 || listen(fd, 1024) != 0) {
    const std::string why = "rank 0 cannot listen on port " + std::to_string(port) + ": " +
                            rules::ErrnoText(errno) +
                            " (choose another with --port or SENTINEL_BASELINE_PORT)";
    close(fd);
    return absl::UnavailableError(why);
  }
  if (bound_port != nullptr) {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    *bound_port = port;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      *bound_port = a.ss_family == AF_INET6
                        ? ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port)
                        : ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
    }
  }
  return fd;
}

absl::Status ServeRendezvous(int listen_fd, int world, const Rendezvous& rv,
                             const std::string& token, double timeout_s, int* refused) {
  std::string error_text;  // why it failed, for the status
  std::string* error = &error_text;
  const int fd = listen_fd;
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  for (uint64_t s : rv.sizes) {
    if (s == 0 || s > kMaxRendezvousBytes) {
      *error = "rank 0: size " + std::to_string(s) + " is out of bounds";
      close(fd);
      return absl::InvalidArgumentError(*error);
    }
  }
  if (rv.sizes.size() > kMaxRendezvousSizes) {
    *error = "rank 0: more than " + std::to_string(kMaxRendezvousSizes) + " sizes";
    close(fd);
    return absl::InvalidArgumentError(*error);
  }
  const std::string payload = Payload(rv);
  const double deadline = Seconds(rules::MonoNowNs()) + timeout_s;
  int served = 0;
  int strangers = 0;
  std::vector<bool> seen(static_cast<size_t>(world), false);
  std::vector<bool> busy(static_cast<size_t>(world), false);  // a reply to this rank under way
  std::deque<Peer> peers;  // in accept order: the front is the oldest
  auto drop = [&](size_t i, bool stranger) {
    Peer& p = peers[i];
    if (p.replying) busy[p.rank] = false;
    close(p.fd);
    if (stranger) ++strangers;
    peers.erase(peers.begin() + static_cast<std::ptrdiff_t>(i));
  };
  bool ok = true;
  while (served < world - 1) {
    const double now = Seconds(rules::MonoNowNs());
    if (now >= deadline) {
      *error = "rank 0 waited " + std::to_string(static_cast<int>(timeout_s)) + " s for ranks:";
      for (int r = 1; r < world; ++r) {
        if (!seen[static_cast<size_t>(r)]) *error += " " + std::to_string(r);
      }
      ok = false;
      break;
    }
    // Peers past their own deadline: closed (an idle or slow connection holds nothing).
    for (size_t i = peers.size(); i-- > 0;) {
      if (now >= peers[i].deadline) drop(i, true);
    }
    std::vector<pollfd> pfds;
    pfds.push_back({fd, POLLIN, 0});
    double wake = deadline;
    for (const Peer& p : peers) {
      pfds.push_back({p.fd, static_cast<short>(p.out.empty() ? POLLIN : POLLOUT), 0});
      wake = std::min(wake, p.deadline);
    }
    const int wait_ms = static_cast<int>(std::max(0.0, wake - now) * 1000) + 1;
    const int rc = poll(pfds.data(), pfds.size(), std::min(wait_ms, 1000));
    if (rc < 0 && errno != EINTR) {
      *error = std::string("rank 0: poll: ") + rules::ErrnoText(errno);
      ok = false;
      break;
    }
    if (rc <= 0) continue;
    // Existing peers first (indices match pfds[1..] only before new accepts and drops).
    std::vector<std::pair<size_t, bool>> gone;  // (peer, closed without being served)
    for (size_t i = 0; i < peers.size(); ++i) {
      Peer& p = peers[i];
      const short ev = pfds[i + 1].revents;
      if (ev == 0) continue;
      if (!p.out.empty()) {
        const ssize_t w = send(p.fd, p.out.data(), p.out.size(), MSG_NOSIGNAL);
        if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (w <= 0) {
          gone.emplace_back(i, true);
          continue;
        }
        p.out.erase(0, static_cast<size_t>(w));
        if (p.out.empty() && p.replying) {
          seen[p.rank] = true;
          ++served;
          gone.emplace_back(i, false);  // served: closed below
        }
        continue;
      }
      char buf[kClientHelloBytes];
      const ssize_t r = recv(p.fd, buf, kClientHelloBytes - p.in.size(), 0);
      if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (r <= 0) {
        gone.emplace_back(i, true);
        continue;
      }
      p.in.append(buf, static_cast<size_t>(r));
      if (p.in.size() < kClientHelloBytes) continue;
      const auto* hello = reinterpret_cast<const uint8_t*>(p.in.data());
      uint32_t rank = 0;
      std::memcpy(&rank, hello + 4, 4);
      const uint8_t* client_nonce = hello + 8;
      uint8_t mac[kSha256Bytes];
      HmacSha256(token, MacInput(kClientLabel, p.server_nonce, client_nonce, rank, ""), mac);
      if (std::memcmp(hello, kMagic, 4) != 0 ||
          !SameBytes(mac, hello + 8 + kNonceBytes, kSha256Bytes) || rank == 0 ||
          rank >= static_cast<uint32_t>(world) || seen[rank] || busy[rank]) {
        gone.emplace_back(i, true);
        continue;
      }
      HmacSha256(token, MacInput(kServerLabel, p.server_nonce, client_nonce, rank, payload), mac);
      p.out.assign(kMagic, 4);
      p.out += payload;
      p.out.append(reinterpret_cast<const char*>(mac), kSha256Bytes);
      p.rank = rank;
      p.replying = true;
      busy[rank] = true;
    }
    for (size_t k = gone.size(); k-- > 0;) drop(gone[k].first, gone[k].second);
    if ((pfds[0].revents & POLLIN) == 0) continue;
    for (;;) {
      const int c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0) break;
      if (peers.size() >= kMaxPeers) drop(0, true);  // the oldest gives way
      Peer p;
      p.fd = c;
      p.deadline = Seconds(rules::MonoNowNs()) + kPeerTimeoutS;
      if (!RandomBytes(p.server_nonce, kNonceBytes)) {
        close(c);
        *error =
            std::string("rank 0: no random bytes for the rendezvous: ") + rules::ErrnoText(errno);
        ok = false;
        break;
      }
      p.out.assign(kMagic, 4);
      p.out.append(reinterpret_cast<const char*>(p.server_nonce), kNonceBytes);
      // 36 bytes into an empty socket buffer: sent at once (else on POLLOUT).
      const ssize_t w = send(c, p.out.data(), p.out.size(), MSG_NOSIGNAL);
      if (w > 0) p.out.erase(0, static_cast<size_t>(w));
      peers.push_back(std::move(p));
    }
    if (!ok) break;
  }
  while (!peers.empty()) drop(peers.size() - 1, true);
  close(fd);
  if (refused != nullptr) *refused = strangers;
  if (strangers > 0) {
    std::fprintf(stderr,
                 "sentinel-baseline[rank 0]: closed %d rendezvous connection(s) that did not "
                 "prove the job's token, asked for a wrong or served rank, or stalled\n",
                 strangers);
  }
  if (!ok) return absl::UnavailableError(*error);
  return absl::OkStatus();
}

absl::Status FetchRendezvous(const std::string& addr, int port, int rank, const std::string& token,
                             double timeout_s, Rendezvous* rv) {
  const double deadline = Seconds(rules::MonoNowNs()) + timeout_s;
  // Why the last attempt failed, kept by strength: what a peer that proved the token sent, over
  // what an unproven peer did, over a connection or read failure (an attempt the deadline cut
  // short must not hide an earlier, clearer refusal).
  std::string last = "no attempt";
  int last_strength = 0;
  const auto note = [&](int strength, std::string why) {
    if (strength < last_strength) return;
    last_strength = strength;
    last = std::move(why);
  };
  constexpr int kGeneric = 1;
  constexpr int kClosedAfterProof = 2;  // rank 0 with another token, or a read the deadline cut
  constexpr int kUnproven = 3;
  constexpr int kProven = 4;
  while (Seconds(rules::MonoNowNs()) < deadline) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int gai = getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (gai != 0) {
      note(kGeneric, std::string("cannot resolve ") + addr + ": " + gai_strerror(gai));
    } else {
      for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
          note(kGeneric, std::string("connect: ") + rules::ErrnoText(errno));
          close(fd);
          continue;
        }
        const double until = std::min(deadline, Seconds(rules::MonoNowNs()) + kPeerTimeoutS);
        const auto r = static_cast<uint32_t>(rank);
        uint8_t server_hello[kServerHelloBytes];
        uint8_t client_nonce[kNonceBytes];
        bool ok = ReadAll(fd, server_hello, sizeof server_hello, until) &&
                  std::memcmp(server_hello, kMagic, 4) == 0 &&
                  RandomBytes(client_nonce, kNonceBytes);
        const uint8_t* server_nonce = server_hello + 4;
        if (ok) {
          uint8_t mac[kSha256Bytes];
          HmacSha256(token, MacInput(kClientLabel, server_nonce, client_nonce, r, ""), mac);
          std::string hello(kMagic, 4);
          hello.append(reinterpret_cast<const char*>(&r), 4);
          hello.append(reinterpret_cast<const char*>(client_nonce), kNonceBytes);
          hello.append(reinterpret_cast<const char*>(mac), kSha256Bytes);
          ok = WriteAll(fd, hello.data(), hello.size(), until);
        }
        // The reply, read in bounded pieces: the count is checked before the sizes are read.
        char head[4 + kNcclUniqueIdBytes + 4];
        uint32_t n = 0;
        const bool greeted = ok;  // the peer spoke the protocol and has our proof
        ok = ok && ReadAll(fd, head, sizeof head, until) && std::memcmp(head, kMagic, 4) == 0;
        if (ok) std::memcpy(&n, head + 4 + kNcclUniqueIdBytes, 4);
        std::vector<uint64_t> sizes;
        uint8_t their_mac[kSha256Bytes];
        if (ok && n > kMaxRendezvousSizes) {
          ok = false;
          note(kUnproven, "the peer at the port sent " + std::to_string(n) + " sizes (at most " +
                              std::to_string(kMaxRendezvousSizes) + ")");
        } else if (ok) {
          sizes.assign(n, 0);
          ok = (n == 0 || ReadAll(fd, sizes.data(), 8 * size_t{n}, until)) &&
               ReadAll(fd, their_mac, sizeof their_mac, until);
          if (!ok) note(kGeneric, "the peer at the port is not sentinel-baseline's rank 0");
        } else if (greeted) {
          note(kClosedAfterProof,
               "the peer at the port closed the connection after this rank's proof: rank 0 "
               "holds another SENTINEL_BASELINE_TOKEN, or rank " +
                   std::to_string(rank) + " was served already");
        } else {
          note(kGeneric, "the peer at the port is not sentinel-baseline's rank 0");
        }
        close(fd);
        if (ok) {
          Rendezvous got;
          std::memcpy(got.id.internal, head + 4, kNcclUniqueIdBytes);
          got.sizes = sizes;
          uint8_t mac[kSha256Bytes];
          HmacSha256(token, MacInput(kServerLabel, server_nonce, client_nonce, r, Payload(got)),
                     mac);
          if (!SameBytes(mac, their_mac, kSha256Bytes)) {
            note(kUnproven,
                 "the peer at the port did not prove it holds SENTINEL_BASELINE_TOKEN (another "
                 "process on the port, or rank 0 has another token)");
            ok = false;
          }
          for (size_t i = 0; ok && i < got.sizes.size(); ++i) {
            if (got.sizes[i] == 0 || got.sizes[i] > kMaxRendezvousBytes) {
              note(kProven, "rank 0 sent size " + std::to_string(got.sizes[i]) + ", out of bounds");
              ok = false;
            }
          }
          if (ok) {
            freeaddrinfo(res);
            *rv = got;
            return absl::OkStatus();
          }
        }
      }
      freeaddrinfo(res);
    }
    usleep(100000);
  }
  return absl::DeadlineExceededError(
      "rank " + std::to_string(rank) + " could not get the NCCL id from rank 0 at " + addr + ":" +
      std::to_string(port) + " within " + std::to_string(static_cast<int>(timeout_s)) + " s (" +
      last + ")");
}

}  // namespace sentinel::baseline
