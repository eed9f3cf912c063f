// Detection on real processes (the real-process targets in collector/README.md): sentinel-sim runs
// the ranks as processes through the fake NCCL with the REAL plugin in every rank
// (NCCL_PROFILER_PLUGIN), a real cross-process barrier per collective and 5 % per-step jitter; the
// ranks stand for 2 nodes of 4 ranks, each node's ranks streaming to their own real sentineld (own
// socket, HTTP port and
// --node name); a real Prometheus (when installed) scrapes both every 15 s with the shipped rules
// exactly as shipped (examples/prometheus/sentinel_rules.yml). Judged by wall time: label serial.
//  - a node 10 % slower is named job-wide (SentinelJobSlowNode) within 60 s, nobody else is;
//  - a node 20 % slower names itself (its own sentineld: a node-scope straggler) within 15 s;
//  - on a busy host (a CPU hog per core) at 2 ms steps, the exported compute segment of every
//    rank stays within 20 % of what the rank really computed, and a node 20 % slower is named
//    job-wide within 60 s.
// scripts/real_process_eval.sh runs the same cases N times each and prints the figures.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
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

constexpr int kNodes = 2;
constexpr int kRanksPerNode = 4;
constexpr double kNodeTierLimitS = 15;  // the target for the node naming itself
constexpr double kJobTierLimitS = 60;   // ... and for the job-wide rules at a 15 s scrape
constexpr int kScrapeS = 15;
// Each rank's figures behind sentinel:rank_late (the rules compare with a bar and record neither),
// queried for the failure messages.
constexpr char kLatenessShare[] =
    "(sentinel:comm_duration_p50_seconds:max - on (job, comm, uid) group_right () "
    "sentinel_rank_duration_p50_seconds) / on (job, comm, uid) group_left () "
    "sentinel:comm_segment_p50_seconds:fastest_node";
constexpr char kSegmentGrowth[] =
    "sentinel_rank_segment_p50_seconds / on (job, comm, uid) group_left () "
    "sentinel:comm_segment_p50_seconds:fastest_node - 1";

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// What the sim printed for a rank: "[sim] rank R node N: S steps, compute p50 X ms, step p50 Y ms".
struct RankFigures {
  int node = -1;
  int steps = 0;
  double compute_p50_ms = 0;
  double step_p50_ms = 0;
};
std::map<int, RankFigures> ParseSimFigures(const std::string& output) {
  std::map<int, RankFigures> out;
  for (const std::string& line : Lines(output)) {
    int rank = -1;
    RankFigures f;
    if (std::sscanf(line.c_str(),
                    "[sim] rank %d node %d: %d steps, compute p50 %lf ms, step p50 %lf", &rank,
                    &f.node, &f.steps, &f.compute_p50_ms, &f.step_p50_ms) == 5) {
      out[rank] = f;
    }
  }
  return out;
}

std::string Dump(const std::vector<nlohmann::json>& alerts) {
  return nlohmann::json(alerts).dump();
}

class RealProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(SENTINEL_SIM_PATH).empty()) GTEST_SKIP() << "sentinel-sim is not built";
    dir_ = MakeTempDir();
    for (int n = 0; n < kNodes; ++n) {
      const std::string d = dir_ + "/node" + std::to_string(n);
      mkdir(d.c_str(), 0700);
      nodes_.push_back(
          StartNodeDaemon(SENTINEL_SENTINELD_PATH, d, std::string("node-") + char('a' + n)));
      ASSERT_GT(nodes_.back().port, 0) << "sentineld " << n << " did not start";
    }
  }
  void TearDown() override {
    StopSim();
    for (pid_t hog : hogs_) {
      kill(hog, SIGKILL);
      waitpid(hog, nullptr, 0);
    }
    StopProgram(prom_.pid);
    for (const NodeDaemon& d : nodes_) StopProgram(d.pid);
    if (!dir_.empty()) RunProgram({"/bin/rm", "-rf", dir_}, {});
  }

  bool StartProm() {
    std::vector<int> ports;
    for (const NodeDaemon& d : nodes_) ports.push_back(d.port);
    prom_ = StartPrometheus(dir_, SENTINEL_RULES_PATH, ports, kScrapeS);
    return prom_.pid > 0;
  }
  std::string Instance(int node) const { return "127.0.0.1:" + std::to_string(nodes_[node].port); }

  // The job: 2 nodes x 4 ranks, `step_ms` compute + 5 % jitter, at most `max_s` seconds.
  void StartSim(double step_ms, double max_s, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {SENTINEL_SIM_PATH,
                                     "--ranks",
                                     std::to_string(kNodes * kRanksPerNode),
                                     "--nodes",
                                     std::to_string(kNodes),
                                     "--node-sockets",
                                     nodes_[0].socket + "," + nodes_[1].socket,
                                     "--compute-ms",
                                     std::to_string(step_ms),
                                     "--jitter-pct",
                                     "5",
                                     "--steps",
                                     "10000000",
                                     "--duration-s",
                                     std::to_string(max_s),
                                     "--timeout-s",
                                     "20",
                                     "--quiet",
                                     "--plugin",
                                     SENTINEL_PLUGIN_PATH};
    args.insert(args.end(), extra.begin(), extra.end());
    sim_ = StartProgram(args, {}, static_cast<int>(max_s) + 60);
    sim_start_ = Clock::now();
  }
  // Stops the job (SIGTERM: every rank finishes the same step) and returns its output.
  std::string StopSim() {
    if (sim_.pid <= 0) return sim_output_;
    kill(sim_.pid, SIGTERM);  // `timeout` passes it on to the sim
    sim_output_ = WaitProgram(sim_).output;
    sim_.pid = -1;
    return sim_output_;
  }

  std::vector<nlohmann::json> NodeFiring(int node) const {
    std::vector<nlohmann::json> out;
    const nlohmann::json j = GetDaemonJson(nodes_[node].port, "/v1/alerts");
    if (!j.is_object() || !j.contains("alerts")) return out;
    for (const auto& a : j["alerts"]) {
      if (a.value("state", "") == "firing") out.push_back(a);
    }
    return out;
  }
  std::vector<nlohmann::json> PromFiring() const {
    std::vector<nlohmann::json> out;
    const nlohmann::json j = GetDaemonJson(prom_.port, "/api/v1/alerts");
    if (!j.is_object() || !j.contains("data")) return out;
    for (const auto& a : j["data"]["alerts"]) {
      if (a.value("state", "") == "firing") out.push_back(a);
    }
    return out;
  }
  // Prometheus's answer to `expr`, one "instance rank=R: value" per series (for failure messages).
  std::string PromQuery(const std::string& expr) const {
    std::string escaped;
    for (char c : expr) {
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') {
        escaped += c;
      } else {
        char hex[4];
        std::snprintf(hex, sizeof(hex), "%%%02X", static_cast<unsigned char>(c));
        escaped += hex;
      }
    }
    const nlohmann::json j = GetDaemonJson(prom_.port, "/api/v1/query?query=" + escaped);
    std::string out = expr + ":";
    if (!j.is_object() || !j.contains("data")) return out + " no answer";
    for (const auto& r : j["data"]["result"]) {
      out += " " + r["metric"].value("instance", "") + " rank " + r["metric"].value("rank", "") +
             "=" + r["value"][1].get<std::string>() + ";";
    }
    return out;
  }
  // Each rank's wait evidence on node `node` (for failure messages).
  std::string WaitFigures(int node) const {
    const nlohmann::json j = GetDaemonJson(nodes_[node].port, "/v1/ranks");
    std::string out;
    if (!j.is_object() || !j.contains("ranks")) return "no answer";
    for (const auto& r : j["ranks"]) {
      for (const auto& c : r["comms"]) {
        out += "rank " + r["rank"].dump() + " budget_level " + r["budget_level"].dump() + " wait " +
               c["wait"].dump() + "\n";
      }
    }
    return out;
  }
  // True when node `node`'s own sentineld names itself slow (a node-scope straggler alert).
  bool NodeNamesItself(int node) const {
    for (const auto& a : NodeFiring(node)) {
      if (a.value("kind", "") == "straggler" && a["evidence"].value("scope", "") == "node" &&
          a.value("host", "") == nodes_[node].name) {
        return true;
      }
    }
    return false;
  }
  bool PromNamesSlowNode(int node) const {
    for (const auto& a : PromFiring()) {
      if (a["labels"].value("alertname", "") == "SentinelJobSlowNode" &&
          a["labels"].value("instance", "") == Instance(node)) {
        return true;
      }
    }
    return false;
  }
  // Every firing alert that names something on a node other than `slow` (or, job-wide, anything
  // but SentinelJobSlowNode / a node-local alert about `slow`).
  std::vector<nlohmann::json> Innocents(int slow) const {
    std::vector<nlohmann::json> out;
    for (int n = 0; n < kNodes; ++n) {
      if (n == slow) continue;
      for (const auto& a : NodeFiring(n)) out.push_back(a);
    }
    if (prom_.port == 0) return out;
    for (const auto& a : PromFiring()) {
      const std::string name = a["labels"].value("alertname", "");
      const bool about_slow = a["labels"].value("instance", "") == Instance(slow);
      if (!about_slow || (name != "SentinelJobSlowNode" && name != "SentinelNodeAlert")) {
        out.push_back(a);
      }
    }
    return out;
  }

  // One CPU-bound process per core, until TearDown: a busy host.
  void StartHogs() {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    for (long i = 0; i < std::max(1L, cores); ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (volatile uint64_t spin = 0;; spin = spin + 1) {
        }
      }
      if (pid > 0) hogs_.push_back(pid);
    }
  }

  // Starts the job with `slow` (--slow-node) and waits until `slow_from_s` into it, when nothing
  // may have fired yet.
  void RunUntilSlowdown(double step_ms, double max_s, const std::string& slow, int slow_from_s) {
    StartSim(step_ms, max_s, {"--slow-node", slow});
    std::this_thread::sleep_until(sim_start_ + std::chrono::seconds(slow_from_s));
    ASSERT_TRUE(Innocents(-1).empty()) << "before the slowdown: " << Dump(Innocents(-1));
  }

  // Polls `pred` every 250 ms until it holds or `limit_s` passes since `from`: the seconds after
  // `from` when it first held, or -1.
  template <typename Pred>
  static double SecondsUntil(Clock::time_point from, double limit_s, Pred pred) {
    while (Since(from) <= limit_s) {
      if (pred()) return Since(from);
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return -1;
  }

  std::string dir_;
  std::vector<NodeDaemon> nodes_;
  PrometheusProcess prom_;
  Started sim_;
  std::string sim_output_;
  Clock::time_point sim_start_;
  std::vector<pid_t> hogs_;
};

// When the rules compared with the median over all ranks, a slow node holding half the ranks
// moved it halfway and +10 % showed as about 4.8 % against the 5 % bar.
TEST_F(RealProcessTest, TwoNodeJobTenPercentSlowNodeIsNamedJobWideWithin60s) {
  if (!StartProm()) GTEST_SKIP() << "prometheus is not installed";
  ASSERT_NO_FATAL_FAILURE(
      RunUntilSlowdown(20, 20 + kJobTierLimitS + 10, "node=1,pct=10,from-s=20", 20));
  const Clock::time_point slowed = Clock::now();
  const double named_s = SecondsUntil(slowed, kJobTierLimitS, [&] { return PromNamesSlowNode(1); });
  const std::vector<nlohmann::json> innocents = Innocents(1);
  std::printf("2 nodes, +10 %% slow node: named job-wide after %.1f s (limit %.0f s)\n", named_s,
              kJobTierLimitS);
  const std::string rules =
      PromQuery(kSegmentGrowth) + "\n" + PromQuery(kLatenessShare) + "\n" + PromQuery("ALERTS");
  const std::string out = StopSim();
  EXPECT_GE(named_s, 0) << "Prometheus never named node B within " << kJobTierLimitS
                        << " s; firing: " << Dump(PromFiring()) << "\n"
                        << rules << "\n"
                        << out;
  EXPECT_TRUE(innocents.empty()) << Dump(innocents);
}

// Before the held usual, node B's usual segment followed its slowed one while the wait
// test failed, and the slowdown became usual.
TEST_F(RealProcessTest, TwentyPercentSlowNodeNamesItselfWithin15s) {
  ASSERT_NO_FATAL_FAILURE(
      RunUntilSlowdown(20, 15 + kNodeTierLimitS + 10, "node=1,pct=20,from-s=15", 15));
  const Clock::time_point slowed = Clock::now();
  const double named_s = SecondsUntil(slowed, kNodeTierLimitS, [&] { return NodeNamesItself(1); });
  const std::string b_ranks = WaitFigures(1);
  const std::vector<nlohmann::json> innocents = Innocents(1);
  std::printf("+20 %% slow node: named by its own sentineld after %.1f s (limit %.0f s)\n", named_s,
              kNodeTierLimitS);
  const std::string out = StopSim();
  EXPECT_GE(named_s, 0) << "node B's sentineld did not name itself within " << kNodeTierLimitS
                        << " s; its alerts: " << Dump(NodeFiring(1)) << "\nits ranks:\n"
                        << b_ranks << "\n"
                        << out;
  EXPECT_TRUE(innocents.empty()) << Dump(innocents);
}

// Before the CPU-time meter, on a busy host the overhead budget degraded every rank and the
// exported segment p50 became 8-10x the real step; a +20 % slow node was then named by nobody.
TEST_F(RealProcessTest, BusyHostTwoMsStepsSegmentIsTrueAndSlowNodeIsNamedJobWide) {
  const bool prom = StartProm();
  StartHogs();
  constexpr double kSlowFromS = 25;
  StartSim(2, kSlowFromS + kJobTierLimitS + 10, {"--slow-node", "node=1,pct=20,from-s=25"});
  // Node A's ranks are never slowed: their exported segment p50s, every second from 10 s on.
  std::map<int, std::vector<double>> segments_ms;
  int max_budget_level = 0;
  auto sample = [&] {
    for (int n = 0; n < kNodes; ++n) {
      const nlohmann::json j = GetDaemonJson(nodes_[n].port, "/v1/ranks");
      if (!j.is_object() || !j.contains("ranks")) continue;
      for (const auto& r : j["ranks"]) {
        max_budget_level = std::max(max_budget_level, r.value("budget_level", 0));
        if (n != 0 || !r["rank"].is_number() || !r.contains("comms")) continue;
        for (const auto& c : r["comms"]) {
          if (c.contains("wait") && c["wait"].is_object()) {
            segments_ms[r["rank"].get<int>()].push_back(c["wait"].value("segment_p50_ms", 0.0));
          }
        }
      }
    }
  };
  std::this_thread::sleep_until(sim_start_ + std::chrono::seconds(10));
  while (Since(sim_start_) < kSlowFromS) {
    sample();
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  const Clock::time_point slowed = Clock::now();
  double named_s = -1;
  if (prom) {
    named_s = SecondsUntil(slowed, kJobTierLimitS, [&] {
      sample();
      return PromNamesSlowNode(1);
    });
  }
  const std::vector<nlohmann::json> innocents = Innocents(1);
  const std::string rules =
      prom ? PromQuery(kSegmentGrowth) + "\n" + PromQuery(kLatenessShare) : "";
  const std::string out = StopSim();
  const std::map<int, RankFigures> real = ParseSimFigures(out);
  ASSERT_EQ(real.size(), static_cast<size_t>(kNodes * kRanksPerNode)) << out;
  ASSERT_EQ(segments_ms.size(), static_cast<size_t>(kRanksPerNode))
      << "node A did not export its ranks' segments";
  for (auto& [rank, seen] : segments_ms) {
    std::sort(seen.begin(), seen.end());
    const double exported = seen[seen.size() / 2];
    const RankFigures& f = real.at(rank);
    std::printf(
        "rank %d: exported segment p50 %.3f ms (median of %zu readings), computed p50 %.3f ms, "
        "step p50 %.3f ms\n",
        rank, exported, seen.size(), f.compute_p50_ms, f.step_p50_ms);
    EXPECT_LE(std::fabs(exported - f.compute_p50_ms), 0.2 * f.compute_p50_ms)
        << "rank " << rank << ": the exported segment is not what the rank computed";
  }
  std::printf(
      "busy host, 2 ms steps, +20 %% slow node: max budget_level %d, named job-wide after "
      "%.1f s (limit %.0f s)\n",
      max_budget_level, named_s, kJobTierLimitS);
  // The job tier must name nobody innocent. The node tier's single-rank straggler detector under
  // a CPU hog per core at 2 ms steps is a known limit (collector/README.md "A loaded host": the
  // scheduler's turns look like lateness; 1 of 2 runs raised one on a healthy node here, relayed
  // by SentinelNodeAlert): printed, not judged by this test, which is about the budget's figures.
  std::vector<nlohmann::json> job_tier_innocents;
  int node_tier_innocents = 0;
  for (const nlohmann::json& a : innocents) {
    const bool relayed_or_node =
        !a.contains("labels") || a["labels"].value("alertname", "") == "SentinelNodeAlert";
    if (relayed_or_node) {
      ++node_tier_innocents;
    } else {
      job_tier_innocents.push_back(a);
    }
  }
  std::printf("node-tier alerts on the healthy node under the CPU hogs (known limit): %d\n",
              node_tier_innocents);
  EXPECT_TRUE(job_tier_innocents.empty()) << Dump(job_tier_innocents);
  if (!prom) GTEST_SKIP() << "prometheus is not installed: the job-wide half not run";
  EXPECT_GE(named_s, 0) << "Prometheus never named node B within " << kJobTierLimitS
                        << " s; firing: " << Dump(PromFiring()) << "\n"
                        << rules;
}

}  // namespace
}  // namespace sentinel::testing
