// /metrics size and scrape time on a simulated node (series budget). Starts the real
// sentineld on a temp socket, runs `--jobs` jobs of the node_feeder shape in a row (8 ranks, 6
// communicators, 5 functions, 6 size buckets; the earlier jobs ended, within the retention, and
// the last one live), then scrapes /metrics `--scrapes` times over loopback and prints the series
// count, series per rank, bytes per scrape and the scrape time (mean, p50, p99). A figure, not a
// test.
// Usage: sentinel_metrics_scrape_bench SENTINELD [--jobs N] [--scrapes N] [--comms K]
//        [--dump FILE] [-- sentineld flags, e.g. --metrics-detail comm,size]
#include <httplib.h>
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

#include "tests/integration/collector/node_feeder.h"
#include "tests/integration/collector/sentineld_process.h"

namespace {

using sentinel::testing::NodeFeeder;
using sentinel::testing::NodeJob;

int Usage() {
  std::fprintf(stderr,
               "usage: sentinel_metrics_scrape_bench SENTINELD [--jobs N] [--scrapes N] "
               "[--comms K] [--dump FILE] [-- sentineld flags]\n");
  return 2;
}

size_t CountSeries(const std::string& body) {
  size_t n = 0;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find('\n', at);
    if (body[at] != '#' && end != at) ++n;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") return Usage();
  const std::string sentineld = argv[1];
  int jobs = 3;
  int scrapes = 200;
  int comms = 6;
  std::vector<std::string> extra;
  std::string dump;  // the last scrape's body goes there
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      for (++i; i < argc; ++i) extra.emplace_back(argv[i]);
      break;
    }
    if (i + 1 >= argc) return Usage();
    if (a == "--dump") {
      dump = argv[++i];
      continue;
    }
    const int v = std::atoi(argv[++i]);
    if (v <= 0) return Usage();
    if (a == "--jobs") {
      jobs = v;
    } else if (a == "--scrapes") {
      scrapes = v;
    } else if (a == "--comms") {
      comms = std::min(v, 64);
    } else {
      return Usage();
    }
  }
  char tmpl[] = "/tmp/sentinel-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  const std::string socket = dir + "/s.sock";
  const std::string port_file = dir + "/port";
  std::vector<std::string> args = {sentineld,  "--socket",    socket,
                                   "--listen", "127.0.0.1:0", "--port-file",
                                   port_file,  "--log-level", "error"};
  args.insert(args.end(), extra.begin(), extra.end());
  const pid_t pid = sentinel::testing::SpawnProgram(args);
  const int port = sentinel::testing::WaitForPortFile(port_file);
  int rc = 0;
  if (port == 0) {
    std::fprintf(stderr, "sentineld did not start\n");
    rc = 1;
  }
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(10, 0);
  NodeFeeder live;  // the last job stays connected while scraped
  for (int j = 0; j < jobs && rc == 0; ++j) {
    NodeJob job;
    job.job = j;
    job.comms = comms;
    NodeFeeder ended;
    NodeFeeder* feeder = j + 1 == jobs ? &live : &ended;
    auto ready = [] {  // let the daemon read every CommInit before the records
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return true;
    };
    if (!feeder->Run(socket, job, ready)) rc = 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    if (feeder == &ended && !ended.End()) rc = 1;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::vector<double> ms;
  size_t bytes = 0;
  size_t series = 0;
  for (int i = 0; i < scrapes && rc == 0; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto res = http.Get("/metrics");
    const auto t1 = std::chrono::steady_clock::now();
    if (!res || res->status != 200) {
      rc = 1;
      break;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    bytes = res->body.size();
    series = CountSeries(res->body);
    if (i + 1 == scrapes && !dump.empty()) std::ofstream(dump) << res->body;
  }
  if (rc == 0 && !ms.empty()) {
    std::sort(ms.begin(), ms.end());
    double sum = 0;
    for (double v : ms) sum += v;
    const int ranks = NodeJob{}.ranks;
    std::printf("jobs %d (8 ranks, %d comms, 5 funcs, 6 size buckets each; the last live)\n", jobs,
                comms);
    std::printf("series %zu  per rank (of 8) %.1f  per rank per job %.1f\n", series,
                static_cast<double>(series) / ranks, static_cast<double>(series) / ranks / jobs);
    std::printf("bytes per scrape %zu\n", bytes);
    std::printf("scrape ms over %zu: mean %.3f  p50 %.3f  p99 %.3f\n", ms.size(),
                sum / static_cast<double>(ms.size()), ms[ms.size() / 2],
                ms[std::min(ms.size() - 1, ms.size() * 99 / 100)]);
  }
  live.End();
  sentinel::testing::StopProgram(pid);
  std::string rm = "rm -rf " + dir;
  if (std::system(rm.c_str()) != 0) rc = rc == 0 ? 1 : rc;  // NOLINT(concurrency-mt-unsafe)
  return rc;
}
