// sentinel-sim's fake NVML scripts (--nvml-script with --gpu-slow): every line parses per the
// fake NVML format (tests/fakes/README.md), one GPU per rank of the node with the fake NCCL's bus
// ids and the rank's pid, and the slow rank's GPU changes at from-s, written by rename.
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "tests/integration/fake_nccl/test_util.h"
#include "tests/sim/sim_causes.h"

namespace sentinel::testing {
namespace {

using sim::GpuSlow;
using sim::Options;
using sim::SlowReason;

// The `gpu` records of a script, each as key -> value; a line the format does not allow fails
// the test (a comment, a blank line, or `gpu` followed by key=value fields only).
std::vector<std::map<std::string, std::string>> ParseGpus(const std::string& text) {
  std::vector<std::map<std::string, std::string>> gpus;
  for (const std::string& line : Lines(text)) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream ss(line);
    std::string word;
    ss >> word;
    EXPECT_EQ(word, "gpu") << line;
    std::map<std::string, std::string> kv;
    while (ss >> word) {
      const size_t eq = word.find('=');
      EXPECT_NE(eq, std::string::npos) << line;
      if (eq == std::string::npos) continue;
      EXPECT_EQ(kv.count(word.substr(0, eq)), 0u) << "repeated key in " << line;
      kv[word.substr(0, eq)] = word.substr(eq + 1);
    }
    static const std::regex kBus("[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]");
    static const std::regex kUuid(
        "GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
    static const std::regex kHex("0x[0-9a-f]+");
    static const std::regex kUint("[0-9]+");
    static const std::regex kPids("([0-9]+(,[0-9]+)*)?");  // empty: no process yet
    EXPECT_TRUE(std::regex_match(kv["bus"], kBus)) << line;
    EXPECT_TRUE(std::regex_match(kv["uuid"], kUuid)) << line;
    EXPECT_TRUE(std::regex_match(kv["reasons"], kHex)) << line;
    for (const char* k : {"index", "sm_clock", "sm_clock_max", "temp", "power_mw", "power_limit_mw",
                          "pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max", "replay",
                          "ecc_corrected", "ecc_uncorrected", "retired_pending"}) {
      EXPECT_TRUE(std::regex_match(kv[k], kUint)) << k << " in " << line;
    }
    if (kv.count("pids") != 0) {
      EXPECT_TRUE(std::regex_match(kv["pids"], kPids)) << line;
    }
    gpus.push_back(kv);
  }
  return gpus;
}

Options TwoNodes() {
  Options o;
  o.ranks = 6;
  o.nodes = 2;
  o.nvml_scripts = {"a", "b"};
  return o;
}

TEST(NvmlScriptText, OneHealthyGpuPerRankOfTheNodeInIndexOrder) {
  const Options o = TwoNodes();
  const std::vector<pid_t> pids = {100, 101, 102, 103, 104, 105};
  auto gpus = ParseGpus(sim::NvmlScriptText(o, 1, pids, 0));
  ASSERT_EQ(gpus.size(), 3u);
  for (size_t i = 0; i < gpus.size(); ++i) {
    auto g = gpus[i];
    EXPECT_EQ(g["index"], std::to_string(i));
    // The fake NCCL's busId for local device i: 0x18 + i.
    EXPECT_EQ(g["bus"], "0000:" + std::string(i == 0 ? "18" : i == 1 ? "19" : "1a") + ":00.0");
    EXPECT_EQ(g["pids"], std::to_string(103 + i));
    EXPECT_EQ(g["reasons"], "0x0");
    EXPECT_EQ(g["sm_clock"], g["sm_clock_max"]);
    EXPECT_LT(std::stol(g["power_mw"]), std::stol(g["power_limit_mw"]));
  }
  // Distinct devices across the job's nodes.
  EXPECT_NE(ParseGpus(sim::NvmlScriptText(o, 0, pids, 0))[0]["uuid"], gpus[0]["uuid"]);
}

// A GPU whose rank has not started lists no process: `pids=` empty, never omitted (an omitted
// field reads as "not supported" through NVML).
TEST(NvmlScriptText, ARankNotStartedHasNoProcess) {
  const auto gpus = ParseGpus(sim::NvmlScriptText(TwoNodes(), 0, {-1, 7}, 0));
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[0].at("pids"), "");
  EXPECT_EQ(gpus[1].at("pids"), "7");
}

TEST(NvmlScriptText, EachReasonFromItsFromSOn) {
  Options o = TwoNodes();
  o.gpu_slow.push_back(GpuSlow{4, 25, SlowReason::kPowerCap, 10});
  o.gpu_slow.push_back(GpuSlow{3, 10, SlowReason::kThermal, 0});
  o.gpu_slow.push_back(GpuSlow{5, 50, SlowReason::kHwSlowdown, 20});
  const std::vector<pid_t> pids = {1, 2, 3, 4, 5, 6};
  auto before = ParseGpus(sim::NvmlScriptText(o, 1, pids, 9.9));
  ASSERT_EQ(before.size(), 3u);
  EXPECT_EQ(before[0]["reasons"], "0x60");  // rank 3: thermal from 0 s
  EXPECT_EQ(before[0]["temp"], "92");
  EXPECT_EQ(before[0]["sm_clock"], "1800");  // 1980 / 1.1
  EXPECT_EQ(before[1]["reasons"], "0x0");
  EXPECT_EQ(before[1]["sm_clock"], "1980");
  auto at = ParseGpus(sim::NvmlScriptText(o, 1, pids, 10));
  EXPECT_EQ(at[1]["reasons"], "0x4");    // rank 4: SW power cap, power at the limit
  EXPECT_EQ(at[1]["sm_clock"], "1584");  // 1980 / 1.25
  EXPECT_EQ(at[1]["power_mw"], at[1]["power_limit_mw"]);
  EXPECT_EQ(at[2]["reasons"], "0x0");
  auto late = ParseGpus(sim::NvmlScriptText(o, 1, pids, 20));
  EXPECT_EQ(late[2]["reasons"], "0x8");  // rank 5: HW slowdown
  EXPECT_EQ(late[2]["sm_clock"], "1320");
  EXPECT_EQ(late[2]["temp"], "45");
}

TEST(WriteFileAtomically, ReplacesByRename) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/script";
  std::string err;
  ASSERT_TRUE(sim::WriteFileAtomically(path, "one\n", &err)) << err;
  struct stat before;
  ASSERT_EQ(stat(path.c_str(), &before), 0);
  ASSERT_TRUE(sim::WriteFileAtomically(path, "two\n", &err)) << err;
  struct stat after;
  ASSERT_EQ(stat(path.c_str(), &after), 0);
  EXPECT_NE(before.st_ino, after.st_ino);  // a new file, never one half written
  EXPECT_EQ(ReadFile(path), "two\n");
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0);
  EXPECT_FALSE(sim::WriteFileAtomically(dir + "/missing/script", "x", &err));
  EXPECT_NE(err.find("missing"), std::string::npos) << err;
  unlink(path.c_str());
  rmdir(dir.c_str());
}

// The simulator itself: the script exists while the ranks run, names their pids, and the slow
// rank's line (only it) changes once from-s has passed.
TEST(SimNvmlScript, SlowGpuLineChangesAtFromS) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/nvml.txt";
  Started sim = StartProgram(
      {SENTINEL_SIM_PATH, "--ranks", "3", "--steps", "100000", "--duration-s", "3", "--compute-ms",
       "5", "--nvml-script", path, "--gpu-slow", "rank=1,pct=20,from-s=1.5"},
      {}, 60);
  std::vector<std::map<std::string, std::string>> early;
  ASSERT_TRUE(Eventually(
      [&] {
        early = ParseGpus(ReadFile(path));
        return early.size() == 3;
      },
      10000))
      << ReadFile(sim.out_path);
  std::vector<std::map<std::string, std::string>> late;
  ASSERT_TRUE(Eventually(
      [&] {
        late = ParseGpus(ReadFile(path));
        return late.size() == 3 && late[1]["reasons"] != "0x0";
      },
      15000))
      << ReadFile(path);
  const RunResult r = WaitProgram(sim);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(early[1]["reasons"], "0x0");
  EXPECT_EQ(early[1]["sm_clock"], "1980");
  EXPECT_EQ(late[1]["reasons"], "0x4");
  EXPECT_EQ(late[1]["sm_clock"], "1650");  // 1980 / 1.2
  EXPECT_EQ(late[1]["power_mw"], late[1]["power_limit_mw"]);
  EXPECT_EQ(late[0], early[0]);
  EXPECT_EQ(late[2], early[2]);
  // The pids are the ranks' own (printed for the cause's rank).
  EXPECT_NE(r.output.find("[sim] rank 1 pid " + late[1]["pids"] + "\n"), std::string::npos)
      << r.output;
  unlink(path.c_str());
  rmdir(dir.c_str());
}

TEST(SimNvmlScript, OneFilePerNodeRequired) {
  const RunResult r = RunProgram(
      {SENTINEL_SIM_PATH, "--ranks", "4", "--nodes", "2", "--nvml-script", "/tmp/x"}, {}, 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("one file per node"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace sentinel::testing
