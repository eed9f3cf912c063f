// Starting the REAL sentineld as a child process and learning its HTTP port, for the tests that
// run it (daemon_fixture.h, jobwide_e2e_test.cc, real_process_e2e_test.cc) and the benchmarks
// that measure it (tests/benchmarks/collector/); a free port for a server that cannot take port
// 0; one sentineld per "node" of a job on this machine, and a real Prometheus over them.
// No gtest here: the benchmarks include it too.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
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
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace sentinel::testing {

// Runs `args` (args[0] is the program's path) in a child process; RLIMIT_NOFILE is `max_fds` there
// when > 0; its stdout and stderr go to `log` when not empty. The child's pid, or -1 when fork
// fails. A child that cannot exec exits with 127; one whose parent dies gets SIGKILL.
inline pid_t SpawnProgram(std::vector<std::string> args, int max_fds = 0,
                          const std::string& log = "") {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (!log.empty()) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
  }
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

// A sentineld standing for one node of a job on this machine: its own socket, loopback HTTP port
// and --node name (the ranks of every "node" report the machine's one host name; --node is the
// name the daemon gives itself, its alerts and its ranks).
struct NodeDaemon {
  pid_t pid = -1;
  int port = 0;  // 0 when it did not start
  std::string socket;
  std::string name;
};

// Starts `sentineld` for node `name` with its files in `dir` (which must exist; its log in
// dir/sentineld.log) and `extra` flags.
inline NodeDaemon StartNodeDaemon(const std::string& sentineld, const std::string& dir,
                                  const std::string& name,
                                  const std::vector<std::string>& extra = {}) {
  NodeDaemon d;
  d.name = name;
  d.socket = dir + "/s.sock";
  std::vector<std::string> args = {sentineld,     "--socket",    d.socket,      "--listen",
                                   "127.0.0.1:0", "--port-file", dir + "/port", "--node",
                                   name,          "--log-level", "warn"};
  args.insert(args.end(), extra.begin(), extra.end());
  d.pid = SpawnProgram(args, 0, dir + "/sentineld.log");
  if (d.pid > 0) d.port = WaitForPortFile(dir + "/port");
  return d;
}

// A real Prometheus on a loopback port.
struct PrometheusProcess {
  pid_t pid = -1;  // -1 when not installed or no port was free
  int port = 0;
};

// Starts /usr/bin/prometheus over the sentinelds on loopback `ports` (job `job_name`), scraping
// every `scrape_s` seconds and evaluating `rules_file` (as it is), with its files in `dir`.
inline PrometheusProcess StartPrometheus(const std::string& dir, const std::string& rules_file,
                                         const std::vector<int>& ports, int scrape_s,
                                         const std::string& job_name = "sentineld") {
  PrometheusProcess p;
  if (access("/usr/bin/prometheus", X_OK) != 0) return p;
  p.port = FreePortBelowEphemeral();
  if (p.port == 0) return p;
  std::ostringstream targets;
  for (size_t i = 0; i < ports.size(); ++i) {
    targets << (i == 0 ? "" : ", ") << "'127.0.0.1:" << ports[i] << "'";
  }
  std::ofstream(dir + "/prometheus.yml")
      << "global:\n  scrape_interval: " << scrape_s << "s\n  evaluation_interval: " << scrape_s
      << "s\n"
      << "rule_files:\n  - " << rules_file << "\n"
      << "scrape_configs:\n  - job_name: " << job_name << "\n    static_configs:\n"
      << "      - targets: [" << targets.str() << "]\n";
  p.pid =
      SpawnProgram({"/usr/bin/prometheus", "--config.file=" + dir + "/prometheus.yml",
                    "--storage.tsdb.path=" + dir + "/tsdb",
                    "--web.listen-address=127.0.0.1:" + std::to_string(p.port), "--log.level=warn"},
                   0, dir + "/prometheus.log");
  return p;
}

}  // namespace sentinel::testing
