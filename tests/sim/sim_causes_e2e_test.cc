// sentinel-sim's causes leave the evidence their real counterparts leave, read where sentineld
// reads it: the GPU activity the REAL plugin measured from the fake CUPTI the ranks drive
// (--cupti; through a real sentineld's /v1/ranks), the run-queue wait of a rank sharing its CPU
// with a busy process (/proc/<pid>/task/*/schedstat), a CPU quota on the rank's own cgroup
// (cpu.stat). Judged on real processes' timing: label serial.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#include "tests/integration/collector/daemon_api.h"
#include "tests/integration/collector/sentineld_process.h"
#include "tests/integration/fake_nccl/test_util.h"

namespace sentinel::testing {
namespace {

double Num(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : -1;
}

// "[sim] rank R pid P" from the sim's output; -1 when not (yet) printed.
pid_t RankPid(const std::string& output, int rank) {
  for (const std::string& line : Lines(output)) {
    int r = -1;
    int pid = -1;
    if (std::sscanf(line.c_str(), "[sim] rank %d pid %d", &r, &pid) == 2 && r == rank) return pid;
  }
  return -1;
}

// The main thread's time on the CPU and waiting on a run queue, in seconds (schedstat fields 1
// and 2, ns): the thread that computes.
struct Sched {
  double run_s = 0;
  double wait_s = 0;
};
Sched MainThreadSched(pid_t pid) {
  unsigned long long run = 0, wait = 0;
  const std::string p = std::to_string(pid);
  const std::string stat = ReadFile("/proc/" + p + "/task/" + p + "/schedstat");
  Sched s;
  if (std::sscanf(stat.c_str(), "%llu %llu", &run, &wait) == 2) {
    s.run_s = static_cast<double>(run) / 1e9;
    s.wait_s = static_cast<double>(wait) / 1e9;
  }
  return s;
}

// Run-queue wait per second on the CPU between two readings.
double WaitPerRun(const Sched& a, const Sched& b) {
  return b.run_s > a.run_s ? (b.wait_s - a.wait_s) / (b.run_s - a.run_s) : -1;
}

class SimCausesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    daemon_dir_ = dir_ + "/node";
    mkdir(daemon_dir_.c_str(), 0700);
  }
  void TearDown() override {
    StopProgram(daemon_.pid);
    RunProgram({"/bin/rm", "-rf", dir_}, {});
  }
  std::string dir_;
  std::string daemon_dir_;
  NodeDaemon daemon_;
};

// Kernels follow what each rank does: rank 1's host stalls 30 % of its step before its
// collectives (its GPU idles that long, nothing else), rank 2's compute kernels take 50 % longer,
// and the ranks waiting for them spin in their NCCL kernels instead of idling.
TEST_F(SimCausesTest, CuptiKernelsFollowEachRanksPhases) {
  daemon_ = StartNodeDaemon(SENTINEL_SENTINELD_PATH, daemon_dir_, "node-a");
  ASSERT_GT(daemon_.port, 0) << ReadFile(daemon_dir_ + "/sentineld.log");
  Started sim = StartProgram(
      {SENTINEL_SIM_PATH, "--ranks", "4", "--steps", "100000", "--duration-s", "8", "--compute-ms",
       "20", "--plugin", SENTINEL_PLUGIN_PATH, "--cupti", SENTINEL_FAKE_CUPTI_PATH, "--host-stall",
       "rank=1,share=0.3", "--gpu-slow", "rank=2,pct=50"},
      {{"SENTINEL_SOCKET", daemon_.socket},
       {"SENTINEL_CUPTI", "on"},
       {"SENTINEL_CUPTI_WINDOW_MS", "300"},
       {"SENTINEL_CUPTI_FLUSH_MS", "20"}},
      60);
  // Sampled while the job runs: each rank's latest window, once every rank has a few.
  nlohmann::json ranks;
  ASSERT_TRUE(Eventually(
      [&] {
        ranks = GetDaemonJson(daemon_.port, "/v1/ranks");
        if (!ranks.contains("ranks") || ranks["ranks"].size() != 4) return false;
        for (const auto& r : ranks["ranks"]) {
          if (Num(r["gpu"], "windows") < 4 || !r["gpu"]["step"].is_object()) return false;
        }
        return true;
      },
      30000))
      << ranks.dump(2) << ReadFile(sim.out_path);
  nlohmann::json g[4];
  for (const auto& r : ranks["ranks"]) g[r["rank"].get<int>()] = r["gpu"];
  const RunResult result = WaitProgram(sim);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (int r = 0; r < 4; ++r) {
    std::printf("rank %d: compute %.3f comm %.3f idle %.3f step %s\n", r,
                Num(g[r], "compute_ratio"), Num(g[r], "comm_ratio"), Num(g[r], "idle_ratio"),
                g[r]["step"].dump().c_str());
    std::fflush(stdout);
    EXPECT_GT(Num(g[r], "kernels_matched"), 0) << g[r].dump();  // NCCL kernels on collectives
  }
  for (int healthy : {0, 3}) {
    // Busy all the step: computing, or in an NCCL kernel waiting for ranks 1 and 2.
    EXPECT_LT(Num(g[healthy], "idle_ratio"), 0.08) << g[healthy].dump();
    EXPECT_GT(Num(g[healthy], "comm_ratio"), 0.15) << g[healthy].dump();
  }
  // The stall: 20 * 0.3 / 0.7 = 8.6 ms with no kernel before each step's collectives.
  EXPECT_GT(Num(g[1], "idle_ratio"), 0.18) << g[1].dump();
  EXPECT_GT(Num(g[1]["step"], "idle_ms"), 6) << g[1].dump();
  EXPECT_LT(Num(g[2], "idle_ratio"), 0.08) << g[2].dump();
  // The slow GPU's compute kernels: 30 ms against its peers' 20 ms.
  const double healthy_compute = Num(g[0]["step"], "compute_ms");
  EXPECT_GT(Num(g[2]["step"], "compute_ms"), 1.3 * healthy_compute) << g[2].dump();
  EXPECT_LT(Num(g[1]["step"], "compute_ms"), 1.2 * healthy_compute) << g[1].dump();
}

TEST_F(SimCausesTest, CuptiRefusesTheFakesOwnGenerator) {
  const RunResult r = RunProgram({SENTINEL_SIM_PATH, "--cupti", SENTINEL_FAKE_CUPTI_PATH},
                                 {{"FAKE_CUPTI_GEN", "1"}}, 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("FAKE_CUPTI_GEN"), std::string::npos) << r.output;
}

TEST_F(SimCausesTest, CuptiRefusesALibraryThatIsNotTheFake) {
  const RunResult r = RunProgram(
      {SENTINEL_SIM_PATH, "--ranks", "2", "--steps", "3", "--cupti", SENTINEL_PLUGIN_PATH}, {}, 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("not the fake libcupti"), std::string::npos) << r.output;
}

// A busy process on rank 1's CPU from 1.5 s on: the rank's threads' run-queue wait grows, and
// they run on that one CPU only.
TEST_F(SimCausesTest, CpuHogGrowsTheRanksRunQueueWait) {
  Started sim =
      StartProgram({SENTINEL_SIM_PATH, "--ranks", "2", "--steps", "100000", "--duration-s", "5",
                    "--compute-ms", "10", "--cpu-hog", "rank=1,from-s=1.5"},
                   {}, 60);
  pid_t pid = -1;
  ASSERT_TRUE(Eventually([&] { return (pid = RankPid(ReadFile(sim.out_path), 1)) > 0; }, 10000))
      << ReadFile(sim.out_path);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Sched s0 = MainThreadSched(pid);
  ASSERT_TRUE(Eventually(
      [&] { return ReadFile(sim.out_path).find("cpu hog pid") != std::string::npos; }, 10000));
  const Sched s1 = MainThreadSched(pid);
  const std::string allowed = ReadFile("/proc/" + std::to_string(pid) + "/status");
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  const Sched s2 = MainThreadSched(pid);
  const RunResult r = WaitProgram(sim);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Its CPU shared with a busy process of the same priority. The rank sleeps between its 10 ms
  // computes, and the scheduler favours a thread waking from sleep, so it waits not a whole second
  // per second it runs but 0.3-0.5 s more than before (measured here and in CI, 0.16 before); the
  // machine's load alone moved it by under 0.05.
  const double before = WaitPerRun(s0, s1);
  const double after = WaitPerRun(s1, s2);
  std::printf("rank 1 run-queue wait per CPU second: %.2f before the hog, %.2f beside it\n", before,
              after);
  std::fflush(stdout);
  EXPECT_GT(after, before + 0.25) << r.output;
  EXPECT_GT(after, 2 * before) << r.output;
  // Pinned: one CPU in its allowed list.
  const size_t at = allowed.find("Cpus_allowed_list:");
  ASSERT_NE(at, std::string::npos);
  const std::string list = allowed.substr(at + 18, allowed.find('\n', at) - at - 18);
  EXPECT_EQ(list.find_first_of(",-"), std::string::npos) << list;
}

// A CPU quota on rank 1's own cgroup from 1 s on: the kernel throttles it; the cgroup is gone
// after the job. Skipped, with the sim's reason, where no cgroup CPU controller can be written.
TEST_F(SimCausesTest, CpuQuotaThrottlesTheRanksCgroup) {
  Started sim =
      StartProgram({SENTINEL_SIM_PATH, "--ranks", "2", "--steps", "100000", "--duration-s", "3",
                    "--compute-ms", "10", "--cpu-quota", "rank=1,cpus=0.1,from-s=1"},
                   {}, 60);
  std::string dir;
  std::string stat;
  std::string member;
  const bool throttled = Eventually(
      [&] {
        const std::string out = ReadFile(sim.out_path);
        const pid_t pid = RankPid(out, 1);
        if (pid > 0) member = ReadFile("/proc/" + std::to_string(pid) + "/cgroup");
        const size_t at = out.find(" CPUs in ");
        if (at == std::string::npos) return false;
        dir = out.substr(at + 9, out.find('\n', at) - at - 9);
        stat = ReadFile(dir + "/cpu.stat");
        int n = 0;
        const size_t nr = stat.find("nr_throttled ");
        return nr != std::string::npos &&
               std::sscanf(stat.c_str() + nr, "nr_throttled %d", &n) == 1 && n > 0;
      },
      15000);
  const RunResult r = WaitProgram(sim);
  if (r.exit_code == 4) GTEST_SKIP() << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(throttled) << dir << "\n" << stat << "\n" << r.output;
  // The rank's own cgroup, named by the launcher's pid and the rank.
  EXPECT_NE(member.find(dir.substr(dir.rfind('/'))), std::string::npos) << member << dir;
  EXPECT_NE(access(dir.c_str(), F_OK), 0) << dir << " left behind";
}

}  // namespace
}  // namespace sentinel::testing
