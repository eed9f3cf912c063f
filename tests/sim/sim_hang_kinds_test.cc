// sentinel-sim's hangs where no rank stopped, through the binary: a rank that issues a mismatched
// collective (--mismatch) and two ranks that wait for each other in two communicators
// (--deadlock) leave the job without progress until --timeout-s kills it (status 3, as --hang);
// a rank paused outside NCCL (--pause-rank) holds the others up for its pause, then the job ends
// normally.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "tests/integration/fake_nccl/test_util.h"

namespace sentinel::testing {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

std::vector<std::string> Sim(std::vector<std::string> flags) {
  flags.insert(flags.begin(), SENTINEL_SIM_PATH);
  return flags;
}

// Steps each rank completed, from the summary table ("  rank  steps-done  wall-s  status").
std::vector<int> StepsDone(const std::string& output) {
  std::vector<int> steps;
  bool in_table = false;
  for (const std::string& line : Lines(output)) {
    if (line.find("steps-done") != std::string::npos) {
      in_table = true;
      continue;
    }
    int rank = 0;
    int done = 0;
    double wall = 0;
    if (in_table && sscanf(line.c_str(), "%d %d %lf", &rank, &done, &wall) == 3) {
      steps.push_back(done);
    } else {
      in_table = false;
    }
  }
  return steps;
}

double SummarySeconds(const std::string& output) {
  const size_t at = output.find("[sim] summary (");
  return at == std::string::npos ? -1 : atof(output.c_str() + at + 15);
}

struct MismatchCase {
  const char* kind;
  const char* collectives;
};

void PrintTo(const MismatchCase& c, std::ostream* os) { *os << c.kind << " on " << c.collectives; }

class SimMismatchTest : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(SimMismatchTest, JobHangsUntilTimeout) {
  const MismatchCase& c = GetParam();
  RunResult r = RunProgram(Sim({"--ranks", "4", "--steps", "8", "--compute-ms", "2", "--bytes",
                                "4096", "--collectives", c.collectives, "--timeout-s", "3",
                                "--mismatch", std::string("rank=2,at=2,kind=") + c.kind}),
                           {}, 90);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find(std::string("rank 2 issued a mismatched collective (kind=") + c.kind +
                          ") on comm 0 at step 2"),
            std::string::npos)
      << r.output;
  // Steps 0 and 1 completed everywhere, step 2 nowhere: the job stopped at the mismatch.
  EXPECT_EQ(StepsDone(r.output), std::vector<int>(4, 2)) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Kinds, SimMismatchTest,
                         ::testing::Values(MismatchCase{"func", "allreduce"},
                                           MismatchCase{"count", "allreduce,allgather"},
                                           MismatchCase{"dtype", "reducescatter"},
                                           MismatchCase{"root", "broadcast"}),
                         [](const ::testing::TestParamInfo<MismatchCase>& info) {
                           return std::string(info.param.kind);
                         });

TEST(SimHangKindsTest, MismatchRefusedWhereItCannotApply) {
  RunResult r = RunProgram(Sim({"--ranks", "4", "--mismatch", "rank=1,at=0,kind=root"}), {}, 30);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("must be broadcast or reduce"), std::string::npos) << r.output;
  r = RunProgram(Sim({"--ranks", "4", "--deadlock", "ranks=1,2,at=0"}), {}, 30);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("needs --comms >= 2"), std::string::npos) << r.output;
}

TEST(SimHangKindsTest, BarrierTimeoutWarnNamesBothSignatures) {
  // The fake NCCL's opt-in timeout ends the wait; its WARN says who disagrees and how.
  RunResult r =
      RunProgram(Sim({"--ranks", "4", "--steps", "4", "--compute-ms", "2", "--bytes", "4096",
                      "--timeout-s", "30", "--mismatch", "rank=3,at=1,kind=func"}),
                 {{"FAKE_NCCL_BARRIER_TIMEOUT_S", "1"}, {"NCCL_DEBUG", "WARN"}}, 90);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("rank 3 posted AllGather count 4096 datatype 0 where rank 0 posted "
                          "AllReduce count 1024 datatype 7 op 0"),
            std::string::npos)
      << r.output;
}

TEST(SimHangKindsTest, DeadlockAcrossCommunicatorsHangsUntilTimeout) {
  RunResult r =
      RunProgram(Sim({"--ranks", "4", "--comms", "2", "--steps", "8", "--compute-ms", "2",
                      "--bytes", "4096", "--timeout-s", "3", "--deadlock", "ranks=1,2,at=2"}),
                 {}, 90);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("cross-communicator cycle at step 2: rank 1 waits in comm 1 for rank 2, "
                          "rank 2 waits in comm 0 for rank 1"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(StepsDone(r.output), std::vector<int>(4, 2)) << r.output;
}

TEST(SimHangKindsTest, PausedRankHoldsTheJobThenItCompletes) {
  const double pause_s = 2;
  RunResult r =
      RunProgram(Sim({"--ranks", "3", "--steps", "100", "--compute-ms", "5", "--bytes", "4096",
                      "--timeout-s", "20", "--pause-rank", "rank=1,at-s=0.1,for-s=2"}),
                 {}, 90);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" s: rank 1 pauses 2.0 s outside NCCL (sleep)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" s: rank 1 resumes"), std::string::npos) << r.output;
  EXPECT_GE(SummarySeconds(r.output), pause_s) << r.output;
  EXPECT_EQ(StepsDone(r.output), std::vector<int>(3, 100)) << r.output;
}

// A field of /proc/<pid>/io ("syscw: 123"), -1 when unreadable.
long long ProcIo(const std::string& pid, const std::string& key) {
  for (const std::string& line : Lines(ReadFile("/proc/" + pid + "/io"))) {
    if (line.rfind(key + ":", 0) == 0) return atoll(line.c_str() + key.size() + 1);
  }
  return -1;
}

TEST(SimHangKindsTest, IoPauseBlocksInFileWritesOutsideNccl) {
  Started st =
      StartProgram(Sim({"--ranks", "3", "--steps", "100", "--compute-ms", "5", "--bytes", "4096",
                        "--timeout-s", "20", "--pause-rank", "rank=1,at-s=0.1,for-s=3,kind=io"}),
                   {}, 90);
  std::string pid;
  ASSERT_TRUE(Eventually(
      [&] {
        const std::string out = ReadFile(st.out_path);
        const size_t at = out.find("[sim] rank 1 pid ");
        if (at == std::string::npos || out.find(" s: rank 1 pauses") == std::string::npos) {
          return false;
        }
        pid = std::to_string(atoll(out.c_str() + at + 17));
        return true;
      },
      30000));
  // While it pauses, the rank's process writes (many write system calls) and mostly waits in
  // the kernel (S or D; R only for moments, when it waits for a CPU on a busy machine).
  const long long before = ProcIo(pid, "syscw");
  std::string states;
  for (int i = 0; i < 20; ++i) {
    const std::string stat = ReadFile("/proc/" + pid + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren != std::string::npos && stat.size() > paren + 2) states += stat[paren + 2];
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  const long long after = ProcIo(pid, "syscw");
  const bool still_paused = ReadFile(st.out_path).find(" s: rank 1 resumes") == std::string::npos;
  RunResult r = WaitProgram(st);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(still_paused) << "the pause ended before it was observed: " << r.output;
  // A sleeping rank writes nothing then; this one syncs a write every few milliseconds.
  if (before >= 0 && after >= 0) {
    EXPECT_GE(after - before, 3) << r.output;
  }
  EXPECT_NE(states.find_first_of("SD"), std::string::npos) << "states " << states;
  EXPECT_NE(r.output.find(" s: rank 1 pauses 3.0 s outside NCCL (io)"), std::string::npos);
  EXPECT_GE(SummarySeconds(r.output), 3.0) << r.output;
  EXPECT_EQ(StepsDone(r.output), std::vector<int>(3, 100)) << r.output;
}

}  // namespace
}  // namespace sentinel::testing
