// What SENTINEL_POOL_SIZE costs a rank: finalize time (ncclCommDestroy waits for it), the
// drainer's CPU while the job idles (its grace sweep), and resident memory, on the BUILT .so.
// For each pool size (one child process each: the plugin reads its variables once), it measures
//   fresh:   a communicator that ran a few collectives, then finalize;
//   wrapped: after every slot of the Coll and P2p pools was used once (the state of any long job),
//            the drainer's CPU over one idle second, then finalize.
// A figure, not a test (tests/unit/plugin/plugin_pool_max_test.cc judges with loose bounds).
// Usage: sentinel_finalize_benchmark [POOL_SIZE ...]   (default: 1024 65536 262144 1048576)
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/benchmarks/bench_plugin.h"
#include "tests/common/process_usage.h"

namespace {

int64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

SentinelEventDescrV5 Descr(uint64_t type) {
  SentinelEventDescrV5 d;
  std::memset(&d, 0, sizeof(d));
  d.type = type;
  return d;
}

int Measure(long pool) {
  setenv("SENTINEL_SOCKET", "none", 1);
  unsetenv("SENTINEL_DUMP");
  setenv("SENTINEL_EVENTS", "default", 1);
  setenv("SENTINEL_BUDGET", "0", 1);  // no degrading while the pools are filled at full speed
  setenv("SENTINEL_POOL_SIZE", std::to_string(pool).c_str(), 1);
  const SentinelProfilerV5* p = sentinel::bench::LoadPluginV5();
  static int mask = 0;
  auto coll = [&](void* ctx, uint64_t seq) {
    SentinelEventDescrV5 d = Descr(kSentinelProfileColl);
    d.coll.seq_number = seq;
    d.coll.func = "AllReduce";
    d.coll.count = 4;
    d.coll.datatype = "ncclInt32";
    d.coll.algo = "RING";
    d.coll.proto = "SIMPLE";
    void* h = nullptr;
    p->start_event(ctx, &h, &d);
    if (h != nullptr) p->stop_event(h);
  };
  auto p2p = [&](void* ctx) {
    SentinelEventDescrV5 d = Descr(kSentinelProfileP2p);
    d.p2p.func = "Send";
    d.p2p.count = 4;
    d.p2p.datatype = "ncclInt32";
    d.p2p.peer = 1;
    void* h = nullptr;
    p->start_event(ctx, &h, &d);
    if (h != nullptr) p->stop_event(h);
  };
  const long rss0 = (sentinel::testing::ProcStatusKiB(0, "VmRSS") / 1024);
  void* ctx = nullptr;
  p->init(&ctx, 0x1001, &mask, "fresh", 1, 2, 0, nullptr);
  for (uint64_t s = 1; s <= 100; ++s) coll(ctx, s);
  int64_t t0 = NowNs();
  p->finalize(ctx);
  const double fresh_ms = static_cast<double>(NowNs() - t0) / 1e6;
  const long rss_fresh = (sentinel::testing::ProcStatusKiB(0, "VmRSS") / 1024);

  p->init(&ctx, 0x1002, &mask, "wrapped", 1, 2, 0, nullptr);
  for (long i = 0; i < pool; ++i) coll(ctx, static_cast<uint64_t>(i + 1));
  for (long i = 0; i < 4 * pool; ++i) p2p(ctx);
  const int64_t cpu0 = sentinel::testing::ProcessCpuNs();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double idle_cpu_ms = static_cast<double>(sentinel::testing::ProcessCpuNs() - cpu0) / 1e6;
  t0 = NowNs();
  p->finalize(ctx);
  const double wrapped_ms = static_cast<double>(NowNs() - t0) / 1e6;
  const long rss_wrapped = (sentinel::testing::ProcStatusKiB(0, "VmRSS") / 1024);
  std::printf(
      "pool %8ld: fresh finalize %8.2f ms (RSS +%ld MiB) | wrapped: finalize %8.2f ms, drainer "
      "idle CPU %6.1f ms/s, RSS +%ld MiB\n",
      pool, fresh_ms, rss_fresh - rss0, wrapped_ms, idle_cpu_ms, rss_wrapped - rss0);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<long> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atol(argv[i]));
  if (sizes.empty()) sizes = {1024, 65536, 262144, 1048576};
  for (long pool : sizes) {
    const pid_t pid = fork();
    if (pid == 0) _exit(Measure(pool));
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "pool %ld: the measuring process failed\n", pool);
      return 1;
    }
  }
  return 0;
}
