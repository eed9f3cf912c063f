// SENTINEL_ON_HANG=abort end to end: a simulated job through the fake NCCL, with
// the plugin both as profiler and LD_PRELOAD interposer, streaming to a real sentineld with
// --hang-timeout 2s. One rank never launches a collective: within hang-timeout + 5 s the others
// abort their communicator (ncclCommAbort from the plugin's own thread), their blocked stream
// wait returns an error, and they exit non-zero with one line naming the culprit rank, its host
// and the exclusion list. With the same settings a straggler, a whole-job pause (SIGSTOP for
// longer than the timeout, while a straggler is behind) and one rank pausing outside NCCL in
// synced writes (a checkpoint, 4x the timeout) finish normally: nothing is aborted.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#include "tests/integration/collector/daemon_api.h"
#include "tests/integration/fake_nccl/test_util.h"

namespace sentinel::testing {
namespace {

constexpr int kRanks = 4;
constexpr double kHangTimeoutS = 2.0;

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The sim summary row of `rank`: "  <rank>  <steps>  <wall-s>  <status>".
bool SummaryRow(const std::string& output, int rank, double* wall_s, std::string* status) {
  for (const std::string& line : Lines(output)) {
    int r = -1;
    int steps = 0;
    double wall = 0;
    char rest[128] = {};
    if (std::sscanf(line.c_str(), " %d %d %lf %127[^\n]", &r, &steps, &wall, rest) == 4 &&
        r == rank) {
      *wall_s = wall;
      *status = rest;
      return true;
    }
  }
  return false;
}

class HangAbortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(SENTINEL_SIM_PATH).empty()) GTEST_SKIP() << "sentinel-sim is not built";
    dir_ = MakeTempDir();
    socket_ = dir_ + "/s.sock";
    daemon_ = StartProgram({SENTINEL_SENTINELD_PATH, "--socket", socket_, "--listen", "127.0.0.1:0",
                            "--port-file", dir_ + "/port", "--hang-timeout", "2s"},
                           {}, 120);
    for (int i = 0; i < 200 && std::atoi(ReadFile(dir_ + "/port").c_str()) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_GT(std::atoi(ReadFile(dir_ + "/port").c_str()), 0);
  }
  // Stops sentineld and returns its log.
  std::string StopDaemon() {
    if (daemon_.pid > 0) {
      kill(daemon_.pid, SIGTERM);
      daemon_log_ = WaitProgram(daemon_).output;
      daemon_.pid = -1;
    }
    return daemon_log_;
  }
  void TearDown() override {
    StopDaemon();
    if (!dir_.empty()) RunProgram({"/bin/rm", "-rf", dir_}, {});
  }
  std::vector<std::string> Sim(std::vector<std::string> extra) {
    std::vector<std::string> a = {SENTINEL_SIM_PATH,
                                  "--ranks",
                                  std::to_string(kRanks),
                                  "--steps",
                                  "20",
                                  "--compute-ms",
                                  "2",
                                  "--bytes",
                                  "64K",
                                  "--timeout-s",
                                  "10",
                                  "--plugin",
                                  SENTINEL_PLUGIN_PATH};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  nlohmann::json Get(const char* path) {
    return GetDaemonJson(std::atoi(ReadFile(dir_ + "/port").c_str()), path);
  }
  // True when sentineld sees every rank's in-flight state and `rank` behind all the others: they
  // have enqueued a collective (from NCCL seq `from_seq` on) that it has not.
  bool SeesRankBehind(int rank, int from_seq) {
    const nlohmann::json ranks = Get("/v1/ranks");
    if (!ranks.is_object() || !ranks.contains("ranks")) return false;
    int64_t behind = -1;
    int64_t others_min = -1;
    int seen = 0;
    for (const auto& r : ranks["ranks"]) {
      if (!r.contains("comms") || r["comms"].empty()) continue;
      const nlohmann::json& inflight = r["comms"][0]["inflight"];
      if (!inflight.is_object()) continue;
      ++seen;
      const int64_t enqueued = inflight["enqueued"].get<int64_t>();
      if (r.value("rank", -1) == rank) {
        behind = enqueued;
      } else {
        if (!inflight["oldest_seq"].is_number() || inflight["oldest_seq"].get<int>() < from_seq) {
          return false;
        }
        others_min = others_min < 0 ? enqueued : std::min(others_min, enqueued);
      }
    }
    return seen == kRanks && behind >= 0 && others_min > behind;
  }
  // True while a hang alert fires (e.g. a first collective slower than the timeout on a loaded
  // machine: the pause must start a hang of its own).
  bool HangFiring() {
    const nlohmann::json alerts = Get("/v1/alerts");
    if (!alerts.is_object() || !alerts.contains("alerts")) return true;
    for (const auto& a : alerts["alerts"]) {
      if (a.value("kind", "") == "hang" && a.value("state", "") == "firing") return true;
    }
    return false;
  }
  std::vector<std::pair<std::string, std::string>> Env() {
    // An instrumented .so preloaded ahead of the instrumented sim is fine: one runtime.
    const char* asan = getenv("ASAN_OPTIONS");
    std::string asan_options = std::string(asan != nullptr ? asan : "") +
                               (asan != nullptr && *asan != '\0' ? ":" : "") +
                               "verify_asan_link_order=0";
    return {{"SENTINEL_SOCKET", socket_},
            {"SENTINEL_ON_HANG", "abort"},
            {"LD_PRELOAD", SENTINEL_PLUGIN_PATH},
            {"ASAN_OPTIONS", asan_options}};
  }

  std::string dir_;
  std::string socket_;
  Started daemon_;
  std::string daemon_log_;
};

TEST_F(HangAbortTest, NeverLaunchedRankMakesThePeersAbortWithinTimeoutPlusFive) {
  RunResult r = RunProgram(Sim({"--hang", "rank=2,at=3"}), Env(), 90);
  // The launcher still kills the culprit itself (it hangs on its host thread), hence 3.
  EXPECT_EQ(r.exit_code, 3) << r.output;
  for (int rank : {0, 1, 3}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    double wall = 0;
    std::string status;
    ASSERT_TRUE(SummaryRow(r.output, rank, &wall, &status)) << r.output;
    EXPECT_EQ(status, "exit 1") << r.output;
    // From the job's start, so the bound is stricter than from the hang's onset.
    EXPECT_LE(wall, kHangTimeoutS + 5.0) << r.output;
    EXPECT_GE(wall, kHangTimeoutS) << r.output;  // never before the timeout
    EXPECT_NE(r.output.find("sentinel-sim: rank " + std::to_string(rank) +
                            ": step 3 failed: remote process exited"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("SENTINEL_ON_HANG=abort: aborting communicator 0x"), std::string::npos);
  }
  // One line per aborting rank, naming the culprit, its role and host, and the exclusion list.
  EXPECT_EQ(Count(r.output, "SENTINEL_ON_HANG=abort: aborting communicator"), kRanks - 1)
      << r.output;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string short_host(host);
  short_host = short_host.substr(0, short_host.find('.'));
  EXPECT_EQ(Count(r.output, "culprit: rank 2 never_launched on host " + short_host), kRanks - 1)
      << r.output;
  EXPECT_EQ(Count(r.output, "exclude on restart: none"), kRanks - 1) << r.output;
  EXPECT_NE(r.output.find("hang in AllReduce (collective #4, NCCL seq 3)"), std::string::npos)
      << r.output;
  // The culprit itself is never aborted (its thread is not inside NCCL).
  EXPECT_EQ(r.output.find("aborting communicator 0x", r.output.find("rank 2:")), std::string::npos);
  double wall = 0;
  std::string status;
  ASSERT_TRUE(SummaryRow(r.output, 2, &wall, &status));
  EXPECT_NE(status.find("killed (job hung)"), std::string::npos) << r.output;
  EXPECT_EQ(Count(StopDaemon(), "told 3 waiting rank(s)"), 1);
}

// Rank 1 is 1 s late three times, half the hang timeout: a loaded host that wakes it late still
// leaves it well under the 2 s (at 1.5 s, one 0.5 s late wake-up made it a real hang).
TEST_F(HangAbortTest, StragglerUnderTheTimeoutIsNeverAborted) {
  RunResult r =
      RunProgram(Sim({"--straggler", "rank=1,delay-ms=1000,pct=0,from=3,until=6"}), Env(), 90);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Count(r.output, "aborting communicator"), 0) << r.output;
  EXPECT_NE(r.output.find("[sim] all ranks finished"), std::string::npos) << r.output;
}

// The whole job (launcher and ranks: one process group) stops for 4 s, twice the timeout, while
// rank 1 is 1 s behind every step: the peers wait inside the collective with a culprit named,
// first silent (stopped), then, after SIGCONT, with an "in flight since" older than the timeout.
// The pause starts when sentineld sees rank 1 behind the others (not after a fixed sleep: on a
// loaded machine that could land where its last reports show every rank inside one collective,
// which is a device or network hang, not this case).
TEST_F(HangAbortTest, PausedJobWithAStragglerBehindIsNeverAborted) {
  Started sim =
      StartProgram(Sim({"--straggler", "rank=1,delay-ms=1000,pct=0,from=2,until=8"}), Env(), 90);
  bool behind = false;
  for (int i = 0; i < 600 && !behind; ++i) {  // up to about 12 s; the delays last 6 s from step 2
    behind = !HangFiring() && SeesRankBehind(1, 2);
    if (!behind) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(kill(-sim.pid, SIGSTOP), 0);
  if (!behind) {
    kill(-sim.pid, SIGKILL);
    WaitProgram(sim);
    FAIL() << "sentineld never saw rank 1 behind the others";
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(4000));
  ASSERT_EQ(kill(-sim.pid, SIGCONT), 0);
  RunResult r = WaitProgram(sim);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Count(r.output, "aborting communicator"), 0) << r.output;
  EXPECT_NE(r.output.find("[sim] all ranks finished"), std::string::npos) << r.output;
  // The hang detector did see a hang naming rank 1 (acting on its verdict alone would have
  // aborted the job); the abort decision never confirmed it.
  const std::string log = StopDaemon();
  EXPECT_NE(log.find("never_launched"), std::string::npos) << log;
  EXPECT_EQ(log.find("confirmed"), std::string::npos) << log;
}

// Rank 2 issues AllGather where the others issue AllReduce as collective #4 (the fake NCCL hangs
// as NCCL does: no rank completes it). Every rank is inside it, so before nobody was behind and
// sentineld saw "a device or network fault", acting on nothing; now its verdict names the
// mismatch with both sides, rank 2 mismatched, and every rank inside (rank 2 too) aborts within
// hang-timeout + 5 s.
TEST_F(HangAbortTest, MismatchedCollectiveIsNamedAndEveryRankAborts) {
  RunResult r = RunProgram(Sim({"--mismatch", "rank=2,at=3,kind=func"}), Env(), 90);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_EQ(Count(r.output, "SENTINEL_ON_HANG=abort: aborting communicator"), kRanks) << r.output;
  EXPECT_EQ(Count(r.output, "culprit: rank 2 mismatched"), kRanks) << r.output;
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    double wall = 0;
    std::string status;
    ASSERT_TRUE(SummaryRow(r.output, rank, &wall, &status)) << r.output;
    EXPECT_LE(wall, kHangTimeoutS + 5.0) << r.output;
  }
  const std::string log = StopDaemon();
  EXPECT_NE(log.find("mismatched collectives: rank 2 issued AllGather"), std::string::npos) << log;
  EXPECT_NE(log.find("the other 3 ranks issued AllReduce"), std::string::npos) << log;
  EXPECT_EQ(Count(log, "told 4 waiting rank(s)"), 1) << log;
}

// Ranks 0 and 1 issue step 3's collectives on two communicators in opposite orders, each waiting
// for its first before issuing its second: rank 0 waits in comm 1 for rank 1, rank 1 in comm 0
// for rank 0 (ranks 2 and 3 queue behind in comm 0). Both communicators' alerts name the cycle,
// every member with its pid, and the abort reaches every rank inside a collective.
TEST_F(HangAbortTest, CrossCommunicatorDeadlockIsNamedAsACycleAndAborted) {
  RunResult r = RunProgram(Sim({"--comms", "2", "--deadlock", "ranks=0,1,at=3"}), Env(), 90);
  EXPECT_NE(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < kRanks; ++rank) {  // ranks 2 and 3 wait in both: told in both
    EXPECT_NE(r.output.find("SENTINEL_ON_HANG=abort: aborting communicator 0x"), std::string::npos);
    EXPECT_NE(r.output.find(" rank " + std::to_string(rank) + ": sentineld confirmed a hang"),
              std::string::npos)
        << r.output;
  }
  const std::string log = StopDaemon();
  EXPECT_EQ(Count(log, "deadlock, a wait cycle across communicators: rank 0 (pid "), 2) << log;
  EXPECT_NE(log.find("for rank 1 (pid "), std::string::npos) << log;
  EXPECT_NE(log.find("for rank 0 (pid "), std::string::npos) << log;
}

// Rank 1 writes a "checkpoint" (4 KiB synced writes every 2 ms) for 8 s, 4x the hang timeout,
// while the others wait in the next collective. Before, it was never_launched and the peers
// aborted at 2 s; now sentineld sees it alive and working outside NCCL (its /proc: nothing in
// flight, bytes moving, disk waits): paused, no hang alert, no abort before
// --hang-timeout-paused (5m by default), and the job finishes.
TEST_F(HangAbortTest, RankPausedInACheckpointWriteIsNeverAborted) {
  RunResult r = RunProgram(
      Sim({"--steps", "1500", "--pause-rank", "rank=1,at-s=1,for-s=8,kind=io"}), Env(), 90);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Count(r.output, "aborting communicator"), 0) << r.output;
  EXPECT_NE(r.output.find("[sim] all ranks finished"), std::string::npos) << r.output;
  const std::string log = StopDaemon();
  EXPECT_NE(log.find("has waited"), std::string::npos) << log;
  EXPECT_NE(log.find("for rank 1, working outside NCCL (paused_outside_nccl:"), std::string::npos)
      << log;
  EXPECT_EQ(log.find("confirmed"), std::string::npos) << log;
  EXPECT_EQ(log.find("alert hang-"), std::string::npos) << log;
}

}  // namespace
}  // namespace sentinel::testing
