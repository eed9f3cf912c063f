// /healthz latency while thousands of slow clients (slowloris) hold unfinished requests on
// sentineld's HTTP port. Starts the real sentineld on a temp socket and loopback port 0, opens
// --clients connections that each send the start of a request and then nothing, and times
// --probes GETs of /healthz on fresh connections (connect to last byte). Prints p50, p99 and max,
// how many slow clients the server kept, and the daemon's resident memory before and after. A
// figure, not a test (tests/unit/collector/http_slowloris_test.cc judges with a loose bound).
// Loopback only; counts capped at 20,000 clients and 10,000 probes, each probe 5 s at most.
// Usage: sentinel_http_slowloris_bench SENTINELD [--clients N] [--probes N]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/process_usage.h"
#include "tests/integration/collector/sentineld_process.h"
#include "tests/integration/collector/slow_clients.h"

namespace {

using sentinel::testing::CountOpen;
using sentinel::testing::OpenSlowClients;
using sentinel::testing::RaiseFdLimit;
using sentinel::testing::TimedGet;

int Usage() {
  std::fprintf(stderr,
               "usage: sentinel_http_slowloris_bench SENTINELD [--clients N] [--probes N]\n");
  return 2;
}

struct Figures {
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  int failed = 0;
};

Figures Probe(int port, int probes) {
  std::vector<int64_t> ns;
  Figures f;
  for (int i = 0; i < probes; ++i) {
    int64_t t = 0;
    if (TimedGet(port, "/healthz", 5000, &t) != 200) ++f.failed;
    ns.push_back(t);
  }
  std::sort(ns.begin(), ns.end());
  auto at = [&](double q) {
    return static_cast<double>(ns[std::min(ns.size() - 1, static_cast<size_t>(q * ns.size()))]) /
           1e6;
  };
  f.p50_ms = at(0.5);
  f.p99_ms = at(0.99);
  f.max_ms = static_cast<double>(ns.back()) / 1e6;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  int clients = 2000;
  int probes = 200;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return Usage();
    const int v = std::atoi(argv[++i]);
    if (a == "--clients" && v >= 0 && v <= 20000) {
      clients = v;
    } else if (a == "--probes" && v >= 1 && v <= 10000) {
      probes = v;
    } else {
      return Usage();
    }
  }
  if (RaiseFdLimit() < static_cast<rlim_t>(clients) + 64) {
    std::fprintf(stderr, "open-file limit too low for %d clients\n", clients);
    return 1;
  }
  char tmpl[] = "/tmp/snt-slowloris-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  const std::string port_file = dir + "/port";
  std::vector<std::string> args = {argv[1],       "--socket",    dir + "/s.sock", "--listen",
                                   "127.0.0.1:0", "--port-file", port_file,       "--http-timeout",
                                   "120s",        "--log-level", "error"};
  const pid_t pid = sentinel::testing::SpawnProgram(args);
  const int port = sentinel::testing::WaitForPortFile(port_file);
  int rc = 0;
  if (port == 0) {
    std::fprintf(stderr, "sentineld did not start\n");
    rc = 1;
  } else {
    const Figures idle = Probe(port, probes);
    const long rss0 = sentinel::testing::ProcStatusKiB(pid, "VmRSS");
    const std::vector<int> slow = OpenSlowClients(port, clients, 60000);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const long rss1 = sentinel::testing::ProcStatusKiB(pid, "VmRSS");
    const Figures loaded = Probe(port, probes);
    const int open = CountOpen(slow);
    std::printf(
        "idle:            /healthz p50 %.2f ms  p99 %.2f ms  max %.2f ms  (%d probes, %d failed)\n",
        idle.p50_ms, idle.p99_ms, idle.max_ms, probes, idle.failed);
    std::printf(
        "%5d slowloris: /healthz p50 %.2f ms  p99 %.2f ms  max %.2f ms  (%d probes, %d failed)\n",
        clients, loaded.p50_ms, loaded.p99_ms, loaded.max_ms, probes, loaded.failed);
    std::printf("slow clients connected %zu, still open after the probes %d\n", slow.size(), open);
    std::printf("sentineld RSS %ld KiB idle, %ld KiB with the slow clients (%.1f KiB each)\n", rss0,
                rss1, slow.empty() ? 0.0 : static_cast<double>(rss1 - rss0) / slow.size());
    for (int fd : slow) close(fd);
    if (loaded.failed > 0) rc = 1;
  }
  sentinel::testing::StopProgram(pid);
  (void)!system(("rm -rf " + dir).c_str());
  return rc;
}
