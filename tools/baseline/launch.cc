// Launcher environment and the rank-0 rendezvous; see launch.h. Wire of the rendezvous (all
// little-endian): client -> "SNBL" u32 rank; server -> "SNBL" | 128-byte id | u32 n | n x u64.
#include "tools/baseline/launch.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace sentinel::baseline {
namespace {

constexpr char kMagic[4] = {'S', 'N', 'B', 'L'};
constexpr uint32_t kMaxSizes = 4096;

bool ParseInt(const char* text, int* out) {
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  long v = strtol(text, &end, 10);
  if (*end != '\0' || v < 0 || v > (1 << 24)) return false;
  *out = static_cast<int>(v);
  return true;
}

double NowS() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Waits for `fd` to be readable (events POLLIN) or writable until `deadline`.
bool WaitFd(int fd, short events, double deadline) {
  for (;;) {
    double left = deadline - NowS();
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

bool ReadLaunchInfo(const GetEnvFn& getenv_fn, LaunchInfo* out, std::string* error) {
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
      *error = std::string(s.name) + " environment: " + s.rank + "='" + rank + "', " + s.world +
               "='" + (world != nullptr ? world : "(unset)") + "' is not a rank within a world";
      return false;
    }
    const char* local = getenv_fn(s.local);
    if (local != nullptr && !ParseInt(local, &info.local_rank)) {
      *error = std::string(s.local) + "='" + local + "' is not a number";
      return false;
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
      *error = std::string("SENTINEL_BASELINE_PORT='") + own + "' is not a TCP port";
      return false;
    }
  } else if (master_port != nullptr && *master_port != '\0') {
    if (!ParseInt(master_port, &port) || port < 1 || port > 65534) {
      *error = std::string("MASTER_PORT='") + master_port + "' is not a TCP port";
      return false;
    }
    ++port;
  } else {
    port = 29401;
  }
  info.port = port;
  *out = info;
  return true;
}

int ListenForRendezvous(int port, int* bound_port, std::string* error) {
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool v6 = fd >= 0;
  if (!v6) fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + strerror(errno);
    return false;
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
    *error = "rank 0 cannot listen on port " + std::to_string(port) + ": " + strerror(errno) +
             " (choose another with --port or SENTINEL_BASELINE_PORT)";
    close(fd);
    return -1;
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

bool ServeRendezvous(int listen_fd, int world, const Rendezvous& rv, double timeout_s,
                     std::string* error) {
  const int fd = listen_fd;
  std::string msg(kMagic, 4);
  msg.append(rv.id.internal, kNcclUniqueIdBytes);
  uint32_t n = static_cast<uint32_t>(rv.sizes.size());
  msg.append(reinterpret_cast<const char*>(&n), 4);
  for (uint64_t s : rv.sizes) msg.append(reinterpret_cast<const char*>(&s), 8);
  const double deadline = NowS() + timeout_s;
  int served = 0;
  std::vector<bool> seen(static_cast<size_t>(world), false);
  while (served < world - 1) {
    if (!WaitFd(fd, POLLIN, deadline)) {
      *error = "rank 0 waited " + std::to_string(static_cast<int>(timeout_s)) + " s for ranks:";
      for (int r = 1; r < world; ++r) {
        if (!seen[static_cast<size_t>(r)]) *error += " " + std::to_string(r);
      }
      close(fd);
      return false;
    }
    int c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    char hello[8];
    uint32_t rank = 0;
    bool ok = ReadAll(c, hello, sizeof hello, NowS() + 10) && memcmp(hello, kMagic, 4) == 0;
    if (ok) memcpy(&rank, hello + 4, 4);
    ok = ok && rank > 0 && rank < static_cast<uint32_t>(world) && !seen[rank] &&
         WriteAll(c, msg.data(), msg.size(), NowS() + 10);
    close(c);
    if (ok) {
      seen[rank] = true;
      ++served;
    }
  }
  close(fd);
  return true;
}

bool FetchRendezvous(const std::string& addr, int port, int rank, double timeout_s, Rendezvous* rv,
                     std::string* error) {
  const double deadline = NowS() + timeout_s;
  std::string last = "no attempt";
  while (NowS() < deadline) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int gai = getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (gai != 0) {
      last = std::string("cannot resolve ") + addr + ": " + gai_strerror(gai);
    } else {
      for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
          last = std::string("connect: ") + strerror(errno);
          close(fd);
          continue;
        }
        char hello[8];
        memcpy(hello, kMagic, 4);
        uint32_t r = static_cast<uint32_t>(rank);
        memcpy(hello + 4, &r, 4);
        char magic[4];
        uint32_t n = 0;
        bool ok = WriteAll(fd, hello, sizeof hello, deadline) && ReadAll(fd, magic, 4, deadline) &&
                  memcmp(magic, kMagic, 4) == 0 &&
                  ReadAll(fd, rv->id.internal, kNcclUniqueIdBytes, deadline) &&
                  ReadAll(fd, &n, 4, deadline) && n <= kMaxSizes;
        if (ok) {
          rv->sizes.assign(n, 0);
          ok = n == 0 || ReadAll(fd, rv->sizes.data(), 8 * size_t{n}, deadline);
        }
        close(fd);
        if (ok) {
          freeaddrinfo(res);
          return true;
        }
        last = "the peer at the port is not sentinel-baseline's rank 0";
      }
      freeaddrinfo(res);
    }
    usleep(100000);
  }
  *error = "rank " + std::to_string(rank) + " could not get the NCCL id from rank 0 at " + addr +
           ":" + std::to_string(port) + " within " + std::to_string(static_cast<int>(timeout_s)) +
           " s (" + last + ")";
  return false;
}

}  // namespace sentinel::baseline
