// An HTTP exchange on a raw loopback socket, for tests that judge the exact bytes a server writes
// (a client library would hide a repeated head or take only the first response).
#pragma once

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/integration/collector/slow_clients.h"

namespace sentinel::testing {

// Sends `request` (one byte every `gap_ms` when it is not 0) and returns all the server writes
// until it closes (or 10 s pass without a byte); "" when the connection fails.
inline std::string RawHttp(int port, const std::string& request, int gap_ms = 0) {
  const int fd = LoopbackConnect(port);
  if (fd < 0) return "";
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (gap_ms == 0) {
    (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  } else {
    for (char c : request) {
      (void)!send(fd, &c, 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
    }
  }
  std::string reply;
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return reply;
}

}  // namespace sentinel::testing
