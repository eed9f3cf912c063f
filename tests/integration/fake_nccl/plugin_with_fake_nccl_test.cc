// The sentinel plugin (the built .so, loaded through NCCL_PROFILER_PLUGIN) driven by the fake NCCL:
// exact record counts and field values per scenario (SENTINEL_DUMP JSONL), all three ABI versions,
// and the job simulator end to end (straggler visible in GPU durations, hang detection, flags).
#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "tests/integration/fake_nccl/test_util.h"

namespace sentinel::testing {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

struct Dump {
  std::vector<std::string> inits;
  std::vector<std::string> colls;
  std::vector<std::string> heartbeats;
};

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }
  void TearDown() override { RunProgram({"/bin/rm", "-rf", dir_}, {}); }

  // All dump files of one run, merged.
  Dump ReadDumps(const std::string& prefix) {
    Dump d;
    DIR* dir = opendir(dir_.c_str());
    for (struct dirent* e = readdir(dir); e != nullptr; e = readdir(dir)) {
      std::string name = e->d_name;
      if (name.rfind(prefix, 0) != 0) continue;
      for (const std::string& line : Lines(ReadFile(dir_ + "/" + name))) {
        std::string type = JsonField(line, "type");
        if (type == "comm_init") d.inits.push_back(line);
        if (type == "coll") d.colls.push_back(line);
        if (type == "heartbeat") d.heartbeats.push_back(line);
      }
    }
    closedir(dir);
    return d;
  }

  Dump Drive(const std::string& scenario, Env env, int ranks = 2) {
    std::string prefix = "dump" + std::to_string(++runs_) + ".";
    env.emplace_back("NCCL_PROFILER_PLUGIN", SENTINEL_PLUGIN_PATH);
    env.emplace_back("SENTINEL_DUMP", dir_ + "/" + prefix + "%p.jsonl");
    RunResult r = RunProgram({FAKE_NCCL_DRIVER, scenario, std::to_string(ranks)}, env);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return ReadDumps(prefix);
  }

  std::string dir_;
  int runs_ = 0;
};

std::vector<std::string> WithFunc(const std::vector<std::string>& colls, const std::string& func,
                                  int rank = -1) {
  std::vector<std::string> out;
  for (const std::string& c : colls) {
    if (JsonField(c, "func") == func && (rank < 0 || JsonNum(c, "rank") == rank)) out.push_back(c);
  }
  return out;
}

void ExpectGpuTimes(const std::string& c) {
  EXPECT_GT(JsonNum(c, "gpu_start_ns"), 0) << c;
  EXPECT_GE(JsonNum(c, "gpu_end_ns"), JsonNum(c, "gpu_start_ns")) << c;
  // Calibrated to the host clock: close to the enqueue time, not 1e12 ns away.
  EXPECT_LT(std::llabs(JsonNum(c, "gpu_start_ns") - JsonNum(c, "enqueue_ns")), 5000000000LL) << c;
}

TEST_F(PluginTest, EveryCollectiveKind) {
  Dump d = Drive("kinds", {{"FAKE_NCCL_NODES", "2"}, {"SENTINEL_EVENTS", "proxy"}});
  ASSERT_EQ(d.inits.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    for (const char* func : {"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce"}) {
      auto recs = WithFunc(d.colls, func, rank);
      ASSERT_EQ(recs.size(), 1u) << func << " rank " << rank;
      const std::string& c = recs[0];
      EXPECT_EQ(JsonNum(c, "nranks"), 2);
      EXPECT_EQ(JsonNum(c, "seq"), 0);
      EXPECT_EQ(JsonNum(c, "bytes"), 16384) << c;
      EXPECT_EQ(JsonField(c, "algo"), "RING");
      EXPECT_EQ(JsonField(c, "proto"), "LL");
      EXPECT_EQ(JsonNum(c, "nchannels"), 1);
      ExpectGpuTimes(c);
      EXPECT_GT(JsonNum(c, "proxy_send_bytes"), 0) << c;
      EXPECT_GT(JsonNum(c, "proxy_recv_bytes"), 0) << c;
    }
    EXPECT_EQ(JsonField(WithFunc(d.colls, "AllReduce", rank)[0], "datatype"), "ncclFloat32");
    // Send/Recv of the ring (1 + 1) and AlltoAll's 2n pieces (kept as p2p or recovered).
    size_t p2p = WithFunc(d.colls, "Send", rank).size() + WithFunc(d.colls, "Recv", rank).size() +
                 WithFunc(d.colls, "AlltoAll", rank).size();
    EXPECT_GE(p2p, 2u + 1u);
    EXPECT_LE(p2p, 2u + 4u);
    EXPECT_GE(WithFunc(d.colls, "Send", rank).size(), 1u);
  }
  EXPECT_EQ(d.colls.size() - WithFunc(d.colls, "Send").size() - WithFunc(d.colls, "Recv").size() -
                WithFunc(d.colls, "AlltoAll").size(),
            10u);
}

TEST_F(PluginTest, AllThreeAbiVersions) {
  for (const auto& [var, value, abi] : std::vector<std::tuple<std::string, std::string, int>>{
           {"FAKE_NCCL_PROFILER_MAX_VERSION", "6", 6},
           {"FAKE_NCCL_PROFILER_MAX_VERSION", "5", 5},
           {"FAKE_NCCL_PROFILER_VERSION", "4", 4}}) {
    Dump d = Drive("allreduce", {{var, value}});
    ASSERT_EQ(d.inits.size(), 2u) << abi;
    for (const std::string& i : d.inits) EXPECT_EQ(JsonNum(i, "abi_version"), abi);
    ASSERT_EQ(WithFunc(d.colls, "AllReduce").size(), 2u) << abi;
    for (const std::string& c : d.colls) {
      EXPECT_EQ(JsonNum(c, "bytes"), 262144 * 4);
      ExpectGpuTimes(c);
    }
  }
}

TEST_F(PluginTest, GroupsCommsSplitNonblocking) {
  Dump nested = Drive("nested", {});
  EXPECT_EQ(WithFunc(nested.colls, "AllReduce").size(), 2u);
  EXPECT_EQ(WithFunc(nested.colls, "Broadcast").size(), 2u);
  Dump group = Drive("group", {});
  ASSERT_EQ(WithFunc(group.colls, "AllReduce", 0).size(), 2u);
  std::vector<long long> bytes;
  for (const std::string& c : WithFunc(group.colls, "AllReduce", 0))
    bytes.push_back(JsonNum(c, "bytes"));
  std::sort(bytes.begin(), bytes.end());
  EXPECT_EQ(bytes, (std::vector<long long>{4096, 8192}));
  Dump multi = Drive("multicomm", {});
  EXPECT_EQ(multi.inits.size(), 4u);
  EXPECT_EQ(multi.colls.size(), 6u);
  Dump split = Drive("split", {{"FAKE_NCCL_NODES", "1"}}, 4);
  EXPECT_EQ(split.inits.size(), 8u);  // 4 parents + 4 children
  auto children = WithFunc(split.colls, "AllReduce");
  ASSERT_EQ(children.size(), 4u);
  for (const std::string& c : children) EXPECT_EQ(JsonNum(c, "nranks"), 2);
  Dump nb = Drive("nonblocking", {});
  ASSERT_EQ(WithFunc(nb.colls, "AllReduce").size(), 2u);
  for (const std::string& c : nb.colls) ExpectGpuTimes(c);
}

TEST_F(PluginTest, GraphReplaysAndPxn) {
  Dump graph = Drive("graph", {});
  for (int rank = 0; rank < 2; ++rank) {
    auto recs = WithFunc(graph.colls, "AllReduce", rank);
    ASSERT_EQ(recs.size(), 3u) << rank;  // one record per replay
    std::vector<long long> seqs;
    for (const std::string& c : recs) seqs.push_back(JsonNum(c, "seq"));
    std::sort(seqs.begin(), seqs.end());
    EXPECT_EQ(seqs, (std::vector<long long>{0, 1, 2}));
  }
  Dump pxn =
      Drive("allreduce",
            {{"FAKE_NCCL_PXN", "1"}, {"FAKE_NCCL_NODES", "2"}, {"SENTINEL_EVENTS", "proxy"}});
  EXPECT_EQ(WithFunc(pxn.colls, "AllReduce").size(), 2u);
  long long foreign = 0;
  for (const std::string& h : pxn.heartbeats)
    foreign = std::max(foreign, JsonNum(h, "pxn_foreign"));
  EXPECT_GE(foreign, 1);
}

// ---- The job simulator end to end. ----------------------------------------------------------
TEST_F(PluginTest, SimulatorStragglerShowsInGpuDurations) {
  std::string prefix = "sim.";
  RunResult r = RunProgram(
      {SENTINEL_SIM_PATH, "--ranks", "8", "--steps", "16", "--compute-ms", "5", "--bytes", "64K",
       "--straggler", "rank=5,delay-ms=40,from=6", "--plugin", SENTINEL_PLUGIN_PATH, "--quiet"},
      {{"SENTINEL_DUMP", dir_ + "/" + prefix + "%p.jsonl"}}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Dump d = ReadDumps(prefix);
  ASSERT_EQ(d.inits.size(), 8u);
  ASSERT_EQ(d.colls.size(), 8u * 16u);
  // Per rank: median GPU duration over the straggling steps (seq >= 8, past a warm-up step). The
  // median, not the mean: one rank preempted for 100 ms on a loaded host moves a mean of 8 steps
  // by 12 ms, a median not at all.
  std::map<int, std::vector<double>> dur;
  for (const std::string& c : d.colls) {
    if (JsonNum(c, "seq") < 8) continue;
    dur[static_cast<int>(JsonNum(c, "rank"))].push_back(
        static_cast<double>(JsonNum(c, "gpu_end_ns") - JsonNum(c, "gpu_start_ns")) / 1e6);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  ASSERT_EQ(dur[5].size(), 8u);
  double straggler = median(dur[5]);
  for (int rank = 0; rank < 8; ++rank) {
    if (rank == 5) continue;
    double lateness = median(dur[rank]) - straggler;
    EXPECT_NEAR(lateness, 40.0, 15.0)
        << "rank " << rank << " waited " << median(dur[rank]) << " ms";
  }
  EXPECT_LT(straggler, 15.0);
}

TEST_F(PluginTest, SimulatorHangIsDetectedAndNamed) {
  RunResult r = RunProgram({SENTINEL_SIM_PATH, "--ranks", "4", "--steps", "10", "--compute-ms", "2",
                            "--hang", "rank=2,at=3", "--timeout-s", "1.5"},
                           {}, 60);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("HANG: no progress for 1.5 s; rank(s) 2 never arrived at step 3"),
            std::string::npos)
      << r.output;
}

TEST_F(PluginTest, SimulatorFlags) {
  EXPECT_EQ(RunProgram({SENTINEL_SIM_PATH, "--help"}, {}).exit_code, 0);
  for (std::vector<std::string> bad :
       std::vector<std::vector<std::string>>{{"--ranks", "0"},
                                             {"--ranks", "x"},
                                             {"--bytes", "12Q"},
                                             {"--collectives", "allreduce,bogus"},
                                             {"--straggler", "delay-ms=3"},
                                             {"--straggler", "rank=9"},
                                             {"--hang", "rank=1,when=2"},
                                             {"--scenario", "/nonexistent"},
                                             {"--frobnicate", "1"}}) {
    bad.insert(bad.begin(), SENTINEL_SIM_PATH);
    RunResult r = RunProgram(bad, {});
    EXPECT_EQ(r.exit_code, 2) << bad[1] << " " << bad[2] << "\n" << r.output;
    EXPECT_NE(r.output.find("sentinel-sim: "), std::string::npos);
  }
  // Every collective kind through the simulator, several communicators.
  RunResult r = RunProgram(
      {SENTINEL_SIM_PATH, "--ranks", "3", "--steps", "2", "--comms", "2", "--compute-ms", "1",
       "--collectives", "allreduce,allgather,reducescatter,broadcast,reduce,alltoall,sendrecv",
       "--quiet"},
      {}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("all ranks finished"), std::string::npos);
}

}  // namespace
}  // namespace sentinel::testing
