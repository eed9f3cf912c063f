// Starting the REAL sentineld as a child process and learning its HTTP port, for the tests that
// run it (daemon_fixture.h) and the benchmarks that measure it (tests/benchmarks/collector/).
// No gtest here: the benchmarks include it too.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
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

}  // namespace sentinel::testing
