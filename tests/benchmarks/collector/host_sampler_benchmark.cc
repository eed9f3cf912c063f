// What sentineld's once-a-second host evidence poll costs its poller thread: one HostSampler::Poll
// of 8 real processes with 50 threads each (every thread's schedstat and status, each process's
// stat, cgroup, quota levels, cpu.stat and pressure files, and the node's pressure), and one
// Window over the kept history. Real /proc and cgroup tree of this machine. A figure, not a test.
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "collector/evidence/host_sampler.h"

namespace sentinel::collector {
namespace {

constexpr int kProcesses = 8;
constexpr int kThreadsPerProcess = 50;

void* Sleeper(void*) {
  for (;;) pause();
  return nullptr;
}

// kProcesses children of kThreadsPerProcess threads each, asleep; killed with the benchmark.
class SleepingProcesses {
 public:
  SleepingProcesses() {
    for (int p = 0; p < kProcesses; ++p) {
      const pid_t pid = fork();
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (int t = 1; t < kThreadsPerProcess; ++t) {
          pthread_t thread;
          if (pthread_create(&thread, nullptr, Sleeper, nullptr) != 0) _exit(2);
        }
        Sleeper(nullptr);
      }
      if (pid > 0) pids_.push_back(static_cast<uint32_t>(pid));
    }
    usleep(300'000);  // let every child start its threads
  }
  ~SleepingProcesses() {
    for (const uint32_t pid : pids_) {
      kill(static_cast<pid_t>(pid), SIGKILL);
      waitpid(static_cast<pid_t>(pid), nullptr, 0);
    }
  }
  const std::vector<uint32_t>& pids() const { return pids_; }

 private:
  std::vector<uint32_t> pids_;
};

void BM_PollEightProcessesOfFiftyThreads(benchmark::State& state) {
  const SleepingProcesses processes;
  HostSampler sampler;
  int64_t t = 0;
  for (auto _ : state) {
    t += 1'000'000'000;
    sampler.Poll(processes.pids(), t);
  }
  const std::optional<HostWindow> w = sampler.Window(processes.pids()[0], 0, t);
  state.counters["processes"] = static_cast<double>(processes.pids().size());
  state.counters["threads_read"] = w ? static_cast<double>(w->threads) : 0;
}
BENCHMARK(BM_PollEightProcessesOfFiftyThreads)->Unit(benchmark::kMillisecond)->MinTime(2);

void BM_WindowOverFullHistory(benchmark::State& state) {
  const SleepingProcesses processes;
  HostSampler sampler;
  int64_t t = 0;
  for (int i = 0; i < 300; ++i) {
    t += 1'000'000'000;
    sampler.Poll({processes.pids()[0]}, t);
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(sampler.Window(processes.pids()[0], t - 60'000'000'000, t));
  }
}
BENCHMARK(BM_WindowOverFullHistory)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace sentinel::collector

BENCHMARK_MAIN();
