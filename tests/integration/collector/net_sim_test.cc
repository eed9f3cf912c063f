// The wrapping net plugin inside a simulated job: sentinel-sim runs ranks as processes on the fake
// NCCL, which loads NCCL_NET_PLUGIN and carries every inter-node byte through it over the fake
// net plugin's loopback TCP. Asserts that the job's results (per-rank bytes and checksums of the
// received data) are the same with libnccl-net-sentinel.so in between as with the fake plugin
// alone, and that a slowed connection is detected by the REAL sentineld and named by both ends.
#include <dirent.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "tests/integration/collector/daemon_fixture.h"
#include "tests/integration/collector/net_test_util.h"

namespace sentinel::testing {
namespace {

std::string Dir(const std::string& file) { return file.substr(0, file.rfind('/')); }

// Runs the simulator with `env` (KEY=VALUE words); returns its exit code and stdout.
int RunSim(const std::string& env, const std::string& flags, std::string* out) {
  std::string cmd = "env LD_LIBRARY_PATH=" + Dir(SENTINEL_NET_SO) + ":" + Dir(FAKE_NET_SO) + " " +
                    env + " " + SIM_PATH + " --quiet --timeout-s 60 " + flags;
  return RunCommand(cmd + " 2>&1", out);
}

// The "[sim] rank R comm 0 net: ..." lines, sorted by rank.
std::map<int, std::string> NetLines(const std::string& out) {
  std::map<int, std::string> lines;
  std::regex re(R"(\[sim\] rank (\d+) comm 0 net: (sent \d+ received \d+ checksum [0-9a-f]+))");
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it) {
    lines[std::stoi((*it)[1])] = (*it)[2];
  }
  return lines;
}

// pid -> rank, from the ranks' NCCL_DEBUG_FILE logs (nccl.<pid>.log, "rank R nranks" line).
std::map<uint64_t, int> PidRanks(const std::string& dir) {
  std::map<uint64_t, int> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  std::regex rank_re(R"(Init START)");
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind("nccl.", 0) != 0) continue;
    std::ifstream in(dir + "/" + name);
    std::string line;
    while (std::getline(in, line)) {
      size_t at = line.find(" rank ");
      if (line.find("Init START") == std::string::npos || at == std::string::npos) continue;
      out[std::stoull(name.substr(5))] = std::stoi(line.substr(at + 6));
      break;
    }
  }
  closedir(d);
  return out;
}

class NetSimTest : public DaemonFixture {};

TEST_F(NetSimTest, JobResultsUnchangedWithTheWrapper) {
  const std::string flags =
      "--ranks 4 --steps 6 --compute-ms 1 --bytes 64K --collectives allreduce,sendrecv";
  std::string direct;
  std::string wrapped;
  ASSERT_EQ(RunSim("FAKE_NCCL_NODES=4 NCCL_NET_PLUGIN=fake", flags, &direct), 0) << direct;
  ASSERT_EQ(RunSim("FAKE_NCCL_NODES=4 NCCL_NET_PLUGIN=sentinel SENTINEL_NET_WRAP=fake "
                   "NCCL_DEBUG=INFO NCCL_DEBUG_FILE=" +
                       dir_ + "/nccl.%p.log",
                   flags, &wrapped),
            0)
      << wrapped;
  std::map<int, std::string> a = NetLines(direct);
  std::map<int, std::string> b = NetLines(wrapped);
  ASSERT_EQ(a.size(), 4u) << direct;
  EXPECT_EQ(a, b) << direct << "\n---\n" << wrapped;
  // 6 steps x (allreduce + send) x 32 KiB messages per rank (64 KiB capped at 32 KiB).
  EXPECT_NE(a[0].find("sent 393216 received 393216"), std::string::npos) << a[0];
  // The ranks really used the wrapper, and NCCL was told the real plugin's name.
  std::string logs;
  RunCommand("cat " + dir_ + "/nccl.*.log", &logs);
  EXPECT_NE(logs.find("Successfully loaded external network plugin libnccl-net-sentinel.so"),
            std::string::npos);
  EXPECT_NE(logs.find("Using network FakeNet"), std::string::npos);
  EXPECT_NE(logs.find("[send] via NET/FakeNet/0/GDRDMA"), std::string::npos);
}

// A v8 plugin (int sizes, one-shot init): the fake NCCL picks our v11 table, which drives the
// plugin's v8 table by NCCL's compat rules; the bytes and checksums equal the v11 plugin's run.
TEST_F(NetSimTest, JobResultsUnchangedOverAnOlderPlugin) {
  const std::string flags =
      "--ranks 4 --steps 6 --compute-ms 1 --bytes 64K --collectives allreduce,sendrecv";
  std::string direct;
  std::string wrapped;
  ASSERT_EQ(RunSim("FAKE_NCCL_NODES=4 NCCL_NET_PLUGIN=fake", flags, &direct), 0) << direct;
  ASSERT_EQ(RunSim("FAKE_NCCL_NODES=4 NCCL_NET_PLUGIN=sentinel SENTINEL_NET_WRAP=fakev8", flags,
                   &wrapped),
            0)
      << wrapped;
  std::map<int, std::string> a = NetLines(direct);
  std::map<int, std::string> b = NetLines(wrapped);
  ASSERT_EQ(a.size(), 4u) << direct;
  EXPECT_EQ(a, b) << direct << "\n---\n" << wrapped;
  EXPECT_NE(wrapped.find("NCCL uses our ncclNetPlugin_v11 table over FakeNet's v8 table"),
            std::string::npos)
      << wrapped;
}

TEST_F(NetSimTest, WithoutAPluginTheFakeKeepsItsBuiltinNets) {
  std::string out;
  ASSERT_EQ(RunSim("FAKE_NCCL_NODES=2 NCCL_DEBUG=INFO NCCL_DEBUG_FILE=" + dir_ + "/nccl.%p.log",
                   "--ranks 2 --steps 2 --compute-ms 1 --bytes 4096", &out),
            0)
      << out;
  EXPECT_TRUE(NetLines(out).empty()) << out;
  std::string logs;
  RunCommand("cat " + dir_ + "/nccl.*.log", &logs);
  EXPECT_NE(logs.find("NET/Plugin: Could not find: libnccl-net.so"), std::string::npos);
  EXPECT_NE(logs.find("Using network IB"), std::string::npos);
}

TEST_F(NetSimTest, SlowConnectionIsDetectedAndNamedBySentineld) {
  Start();
  // 5 ranks, 2 per node: nodes {0,1} {2,3} {4}; the inter-node ring links are 1->2 and 3->4
  // (senders on device 1) and 4->0 (sender on device 0, the slow one).
  std::string out;
  ASSERT_EQ(RunSim("FAKE_NCCL_RANKS_PER_NODE=2 NCCL_NET_PLUGIN=sentinel SENTINEL_NET_WRAP=fake "
                   "SENTINEL_SOCKET=" +
                       socket_ +
                       " SENTINEL_NET_REPORT_MS=50 FAKE_NET_SLOW_DEV=0 "
                       "FAKE_NET_SEND_DELAY_US=5000 NCCL_DEBUG=INFO NCCL_DEBUG_FILE=" +
                       dir_ + "/nccl.%p.log",
                   "--ranks 5 --steps 10 --compute-ms 1 --bytes 16K --collectives allreduce", &out),
            0)
      << out;
  std::map<uint64_t, int> rank_of = PidRanks(dir_);
  ASSERT_EQ(rank_of.size(), 5u);
  nlohmann::json t = WaitFor("/v1/telemetry", [](const nlohmann::json& j) {
    return j.contains("net") && j["net"]["links"].size() == 3;
  });
  nlohmann::json alerts = WaitFor("/v1/alerts", FiringAlertOf("link_degraded"));
  std::vector<nlohmann::json> found = AlertsOfKind(alerts, "link_degraded");
  int degraded = static_cast<int>(found.size());
  for (const auto& a : found) {
    EXPECT_EQ(rank_of[a["evidence"]["send_pid"].get<uint64_t>()], 4) << a.dump();
    EXPECT_EQ(rank_of[a["evidence"]["recv_pid"].get<uint64_t>()], 0) << a.dump();
    // The fake's 5 ms, less 0.1 % for the wrapper's ticks -> ns rate.
    EXPECT_GE(a["evidence"]["mean_latency_ns"].get<double>(), 5e6 * 0.999);
    EXPECT_EQ(a["evidence"]["links_compared"], 3);
  }
  EXPECT_EQ(degraded, 1) << alerts.dump();

  // sentinelctl net: the same view as tables and JSON, the slow link marked.
  std::string slow_pid;
  for (const auto& a : alerts["alerts"]) {
    if (a["kind"] == "link_degraded")
      slow_pid = std::to_string(a["evidence"]["send_pid"].get<int>());
  }
  std::string table;
  ASSERT_EQ(RunCommand(std::string(SENTINELCTL_PATH) + " --addr " + Addr() + " net", &table), 0);
  EXPECT_NE(table.find("DEVICES (10)"), std::string::npos) << table;  // 5 ranks x 2 devices
  EXPECT_NE(table.find("LINKS (3, 1 degraded)"), std::string::npos) << table;
  int marked = 0;
  std::istringstream rows(table);
  for (std::string row; std::getline(rows, row);) {
    if (row.find("DEGRADED") == std::string::npos) continue;
    ++marked;
    EXPECT_NE(row.find(":" + slow_pid + "/fake0"), std::string::npos) << row;
    std::smatch m;  // LAT_MEAN, the first "<n>us" column: at least the 5 ms send delay
    ASSERT_TRUE(std::regex_search(row, m, std::regex(R"(([0-9.]+)us)"))) << row;
    EXPECT_GE(std::stod(m[1]), 5000.0) << row;
  }
  EXPECT_EQ(marked, 1) << table;
  std::string json_text;
  ASSERT_EQ(
      RunCommand(std::string(SENTINELCTL_PATH) + " --addr " + Addr() + " net --json", &json_text),
      0);
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json_text;
  int flagged = 0;
  for (const auto& l : j["links"]) flagged += l["degraded"].get<bool>() ? 1 : 0;
  EXPECT_EQ(flagged, 1) << json_text;
  std::string help;
  EXPECT_EQ(RunCommand(std::string(SENTINELCTL_PATH) + " net --help", &help), 0);
  EXPECT_NE(help.find("net [--json]"), std::string::npos) << help;
  EXPECT_EQ(RunCommand(std::string(SENTINELCTL_PATH) + " net extra 2>/dev/null"), 2);
}

// The profiler .so and the net .so each carry the SENTINEL_* registry, and NCCL loads them
// RTLD_LOCAL: a misspelt name must still be told once per process, not once per library.
TEST_F(NetSimTest, AMisspeltVariableIsToldOncePerRankWithBothLibrariesLoaded) {
  const std::string flags =
      "--ranks 2 --steps 2 --compute-ms 1 --bytes 16K --collectives allreduce";
  const std::string env =
      "FAKE_NCCL_NODES=2 SENTINEL_SOCKET=none SENTINEL_NET_WARP=x "
      "NCCL_NET_PLUGIN=sentinel SENTINEL_NET_WRAP=fake ";
  auto told = [](const std::string& out) {
    const std::string line =
        "] SENTINEL_NET_WARP is not a variable sentinel knows (did you mean "
        "SENTINEL_NET_WRAP?); ignored\n";
    int n = 0;
    for (size_t at = out.find(line); at != std::string::npos; at = out.find(line, at + 1)) ++n;
    return n;
  };
  std::string net_only;
  ASSERT_EQ(RunSim(env, flags, &net_only), 0) << net_only;
  EXPECT_EQ(told(net_only), 2) << net_only;  // the net .so alone tells it, once per rank
  std::string both;
  ASSERT_EQ(RunSim(env + "SENTINEL_DUMP=" + dir_ + "/dump.%p.jsonl",
                   flags + " --plugin " + SENTINEL_PROFILER_SO, &both),
            0)
      << both;
  EXPECT_EQ(told(both), 2) << both;  // before: 4, each library telling it in each rank
  std::string dumps;                 // the profiler really ran in both ranks
  RunCommand("ls " + dir_ + " | grep -c '^dump\\..*\\.jsonl$'", &dumps);
  EXPECT_EQ(dumps, "2\n");
}

TEST_F(NetSimTest, SentinelctlNetWithoutNetData) {
  Start();
  std::string out;
  ASSERT_EQ(RunCommand(std::string(SENTINELCTL_PATH) + " --addr " + Addr() + " net", &out), 0);
  EXPECT_NE(out.find("no net plugin data"), std::string::npos) << out;
}

}  // namespace
}  // namespace sentinel::testing
