// Starting the REAL sentineld as a child process and learning its HTTP port, for the tests that
// run it (daemon_fixture.h, jobwide_e2e_test.cc) and the benchmarks that measure it
// (tests/benchmarks/collector/); and a free port for a server that cannot take port 0.
// No gtest here: the benchmarks include it too.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace sentinel::testing {

// Runs `args` (args[0] is the program's path) in a child process; RLIMIT_NOFILE is `max_fds` there
// when > 0. The child's pid, or -1 when fork fails. A child that cannot exec exits with 127.
inline pid_t SpawnProgram(std::vector<std::string> args, int max_fds = 0) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  if (max_fds > 0) {
    const rlimit lim{static_cast<rlim_t>(max_fds), static_cast<rlim_t>(max_fds)};
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

// The port sentineld wrote to `port_file` (--port-file), polled every 50 ms for about 10 s;
// 0 when none came.
inline int WaitForPortFile(const std::string& port_file) {
  int port = 0;
  for (int i = 0; i < 200 && port == 0; ++i) {
    std::ifstream in(port_file);
    if (!(in >> port)) port = 0;
    if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return port;
}

// SIGTERM to `pid` and wait for it; its wait status (0 when pid <= 0).
inline int StopProgram(pid_t pid) {
  if (pid <= 0) return 0;
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// A loopback TCP port for a server that cannot take port 0 and report it (Prometheus), below the
// kernel's ephemeral range: port 0 and every outgoing connection of the tests running beside this
// one take theirs there. The same rule as tests/package/harness.py's free_port. 0 when none.
inline int FreePortBelowEphemeral() {
  int low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low;
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  std::mt19937 pick(static_cast<uint32_t>(getpid()) ^ static_cast<uint32_t>(now));
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port =
        10000 + static_cast<int>(pick() % static_cast<uint32_t>(std::max(low - 10000, 1)));
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (bound) return port;
  }
  return 0;
}

}  // namespace sentinel::testing
