// Slow HTTP clients for tests and benchmarks of sentineld's HTTP server: many loopback connections
// that each send the start of a request and then nothing (slowloris), and one timed GET on a fresh
// connection. Loopback only; every count and wait is bounded by the caller.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

namespace sentinel::testing {

inline int64_t SlowClientsNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Raises this process's open-file soft limit to its hard limit; returns the soft limit now.
inline rlim_t RaiseFdLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
    getrlimit(RLIMIT_NOFILE, &lim);
  }
  return lim.rlim_cur;
}

// A loopback connection to `port` (connect waits at most `timeout_ms`), or -1.
inline int LoopbackConnect(int port, int timeout_ms = 1000) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));  // bounds connect() too
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Opens `n` connections that each send an unfinished request head (no blank line) and stay
// silent. Returns their fds: fewer when a connect failed or `budget_ms` ran out (a server that
// stops accepting makes each connect wait its whole second).
inline std::vector<int> OpenSlowClients(int port, int n, int budget_ms = 30000) {
  static const char kPartial[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  const int64_t deadline = SlowClientsNowNs() + int64_t{budget_ms} * 1000000;
  std::vector<int> fds;
  fds.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n && SlowClientsNowNs() < deadline; ++i) {
    const int fd = LoopbackConnect(port);
    if (fd < 0) continue;
    (void)!send(fd, kPartial, sizeof(kPartial) - 1, MSG_NOSIGNAL);
    fds.push_back(fd);
  }
  return fds;
}

// How many of `fds` the server has not closed yet (no EOF or error pending).
inline int CountOpen(const std::vector<int>& fds) {
  int open = 0;
  for (int fd : fds) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 0) == 0) ++open;
  }
  return open;
}

// GET `path` on a fresh loopback connection, waiting at most `timeout_ms` in all. Returns the
// status code (0: no complete status line in time, -1: connect failed); *ns is the time from
// before connect to the end of the reply.
inline int TimedGet(int port, const std::string& path, int timeout_ms, int64_t* ns,
                    std::string* reply_out = nullptr) {
  const int64_t t0 = SlowClientsNowNs();
  const int64_t deadline = t0 + int64_t{timeout_ms} * 1000000;
  *ns = 0;
  const int fd = LoopbackConnect(port, timeout_ms);
  if (fd < 0) return -1;
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  (void)!send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string reply;
  char buf[4096];
  for (;;) {
    const int64_t left_ms = (deadline - SlowClientsNowNs()) / 1000000;
    if (left_ms <= 0) break;
    pollfd p{fd, POLLIN, 0};
    const int rc = poll(&p, 1, static_cast<int>(left_ms));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) break;
    const ssize_t r = recv(fd, buf, sizeof(buf), 0);
    if (r <= 0) break;
    reply.append(buf, static_cast<size_t>(r));
  }
  *ns = SlowClientsNowNs() - t0;
  close(fd);
  if (reply_out != nullptr) *reply_out = reply;
  if (reply.compare(0, 9, "HTTP/1.1 ") != 0 || reply.size() < 12) return 0;
  return std::stoi(reply.substr(9, 3));
}

}  // namespace sentinel::testing
