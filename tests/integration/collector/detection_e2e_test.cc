// Detection end to end: real simulator processes over the fake NCCL -> the real plugin
// .so -> a real sentineld over a unix socket; alerts read from its HTTP API on loopback.
//  - a rank late only before the first of three collectives per step: one straggler alert, rank 5;
//  - 2 ms compute, rank 5 slowed by 20 % for 5 s: exactly one alert naming rank 5 within 10 s
//    of the slowdown's start, resolved (cleared) after it stops;
//  - hangs of each kind: the hang alert names the culprit and its role within hang-timeout + 5 s,
//    while the other ranks stay inside the collective (the test kills the job at the end).
#include <dirent.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#include "httplib.h"
#include "tests/integration/collector/daemon_api.h"
#include "tests/integration/fake_nccl/test_util.h"

namespace sentinel::testing {
namespace {

using SteadyClock = std::chrono::steady_clock;

double NumOr(const nlohmann::json& j, const char* key, double dflt) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : dflt;
}

double SecondsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// A sentineld on a private socket and a kernel-chosen loopback port.
class Daemon {
 public:
  explicit Daemon(const std::vector<std::string>& extra) : dir_(MakeTempDir()) {
    socket_ = dir_ + "/s.sock";
    std::vector<std::string> argv = {
        SENTINEL_SENTINELD_PATH, "--socket",    socket_,       "--listen",
        "127.0.0.1:0",           "--port-file", dir_ + "/port"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    started_ = StartProgram(argv, {}, 120);
    for (int i = 0; i < 200 && port_ == 0; ++i) {
      port_ = std::atoi(ReadFile(dir_ + "/port").c_str());
      if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~Daemon() {
    kill(started_.pid, SIGTERM);
    WaitProgram(started_);
    RunProgram({"/bin/rm", "-rf", dir_}, {});
  }
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  int port() const { return port_; }
  const std::string& socket() const { return socket_; }
  const std::string& dir() const { return dir_; }

  nlohmann::json GetJson(const std::string& path) { return GetDaemonJson(port_, path); }
  // Every alert of `kind` the daemon lists (firing and resolved).
  std::vector<nlohmann::json> Alerts(const std::string& kind) {
    std::vector<nlohmann::json> out;
    const nlohmann::json j = GetJson("/v1/alerts");
    if (!j.is_object() || !j.contains("alerts")) return out;
    for (const auto& a : j["alerts"]) {
      if (a.value("kind", "") == kind) out.push_back(a);
    }
    return out;
  }
  double RecordsReceived() {
    httplib::Client cli("127.0.0.1", port_);
    cli.set_read_timeout(5, 0);
    auto res = cli.Get("/metrics");
    if (!res || res->status != 200) return -1;
    const std::string name = "\nsentinel_records_received_total ";
    const size_t at = res->body.find(name);
    return at == std::string::npos ? -1 : std::atof(res->body.c_str() + at + name.size());
  }

 private:
  std::string dir_;
  std::string socket_;
  int port_ = 0;
  Started started_;
};

// Distinct straggler alerts (id + start: a re-fire of the same id counts again) seen while polling.
struct AlertLog {
  std::map<std::pair<std::string, std::string>, nlohmann::json> seen;
  std::map<std::pair<std::string, std::string>, double> first_seen_s;
  void Add(const std::vector<nlohmann::json>& alerts, double now_s) {
    for (const auto& a : alerts) {
      const auto key = std::make_pair(a.value("id", ""), a.value("started_at", ""));
      seen[key] = a;
      first_seen_s.emplace(key, now_s);
    }
  }
  std::string Dump() const {
    std::string out;
    for (const auto& [key, a] : seen) out += a.dump() + "\n";
    return out;
  }
};

// The pids whose parent is `parent` (from /proc).
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (const dirent* e = readdir(d)) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent) {
      out.push_back(pid);
    }
  }
  closedir(d);
  return out;
}

// Kills a hung sim job: its rank processes (grandchildren of the `timeout` wrapper), so that the
// launcher still reaps them and releases the fake NCCL's shared segment.
void KillSimRanks(const Started& sim) {
  for (pid_t launcher : ChildrenOf(sim.pid)) {
    for (pid_t rank : ChildrenOf(launcher)) kill(rank, SIGKILL);
  }
}

// Calls `each(seconds since t0)` every `period_ms` until the sim job exits, then once more after
// its last records had time to arrive; returns its exit status and output.
RunResult PollUntilExit(const Started& sim, SteadyClock::time_point t0, int period_ms,
                        const std::function<void(double)>& each) {
  RunResult r;
  while (r.exit_code < 0) {
    each(SecondsSince(t0));
    int status = 0;
    if (waitpid(sim.pid, &status, WNOHANG) == sim.pid) {
      r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(period_ms));
    }
  }
  r.output = ReadFile(sim.out_path);
  unlink(sim.out_path.c_str());
  // The last records reach the daemon at finalize; give it a moment, then look a last time.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  each(SecondsSince(t0));
  return r;
}

// An 8-rank sim job streaming through the plugin.
std::vector<std::string> SimArgs(const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {SENTINEL_SIM_PATH,    "--ranks", "8", "--plugin",
                                   SENTINEL_PLUGIN_PATH, "--quiet"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return argv;
}

// Many collectives per step: three collectives a step, rank 5 late only before the first (20 % of
// compute).
TEST(DetectionE2e, RankLateOnlyBeforeTheFirstOfThreeCollectivesGetsOneAlert) {
  if (std::string(SENTINEL_SIM_PATH).empty()) GTEST_SKIP() << "sentinel-sim is not built";
  Daemon d({"--tick", "100ms"});
  ASSERT_GT(d.port(), 0);
  Started sim = StartProgram(
      SimArgs({"--steps", "400", "--compute-ms", "10", "--collectives",
               "allreduce,allgather,reducescatter", "--straggler", "rank=5,pct=20,from=40"}),
      {{"SENTINEL_SOCKET", d.socket()}}, 90);
  AlertLog log;
  const RunResult done = PollUntilExit(sim, SteadyClock::now(), 100,
                                       [&](double now) { log.Add(d.Alerts("straggler"), now); });
  ASSERT_EQ(done.exit_code, 0) << done.output;
  ASSERT_EQ(log.seen.size(), 1u) << log.Dump() << done.output;
  const nlohmann::json& a = log.seen.begin()->second;
  ASSERT_EQ(a["ranks"].size(), 1u) << a.dump();
  EXPECT_EQ(a["ranks"][0], 5) << a.dump();
}

// A short step: 2 ms compute, rank 5 slowed by 20 % from step 300 to 2400 (about 5 s: the detector
// wants 2 s of compute of evidence, longer than a loaded host keeps one rank off its CPU).
TEST(DetectionE2e, TwentyPercentSlowerRankAtTwoMsComputeFiresWithinTenSecondsAndResolves) {
  if (std::string(SENTINEL_SIM_PATH).empty()) GTEST_SKIP() << "sentinel-sim is not built";
  constexpr int kFrom = 300;
  constexpr int kUntil = 2400;
  Daemon d({"--tick", "100ms"});
  ASSERT_GT(d.port(), 0);
  Started sim = StartProgram(
      // 7,200 steps after the slowdown: resolving takes a few hundred collectives of evidence on a
      // quiet machine, thousands on a loaded one (its noise, measured over runs of collectives,
      // raises the threshold: about 3,700 beside a parallel build), and the job must still run
      // when it does (else it resolves `ended`).
      SimArgs({"--steps", "9600", "--compute-ms", "2", "--straggler",
               "rank=5,pct=20,from=" + std::to_string(kFrom) + ",until=" + std::to_string(kUntil)}),
      {{"SENTINEL_SOCKET", d.socket()}}, 90);
  AlertLog log;
  double slow_from_s = -1;  // when rank 5's records reached the slowed steps (one coll per step)
  double slow_until_s = -1;
  double resolved_seen_s = -1;
  const RunResult done = PollUntilExit(sim, SteadyClock::now(), 50, [&](double now) {
    if (slow_until_s < 0) {
      const nlohmann::json ranks = d.GetJson("/v1/ranks");
      if (ranks.is_object() && ranks.contains("ranks")) {
        for (const auto& r : ranks["ranks"]) {
          if (NumOr(r, "rank", -1) != 5) continue;
          const double last = NumOr(r, "last_seq", -1);
          if (slow_from_s < 0 && last >= kFrom) slow_from_s = now;
          if (slow_until_s < 0 && last >= kUntil) slow_until_s = now;
        }
      }
    }
    const std::vector<nlohmann::json> alerts = d.Alerts("straggler");
    for (const auto& a : alerts) {
      if (resolved_seen_s < 0 && a.value("state", "") == "resolved") resolved_seen_s = now;
    }
    log.Add(alerts, now);
  });
  ASSERT_EQ(done.exit_code, 0) << done.output;
  ASSERT_GT(slow_from_s, 0);
  ASSERT_EQ(log.seen.size(), 1u) << log.Dump() << done.output;
  const auto& [key, a] = *log.seen.begin();
  ASSERT_EQ(a["ranks"].size(), 1u) << a.dump();
  EXPECT_EQ(a["ranks"][0], 5) << a.dump();
  // Seen (polling every 50 ms) within 10 s of the slowed steps reaching the daemon.
  const double latency = log.first_seen_s.at(key) - slow_from_s;
  std::printf("straggler alert seen %.2f s after the slowdown began\n", latency);
  std::fflush(stdout);  // before the next fork duplicates the buffer
  EXPECT_LE(latency, 10.0) << a.dump();
  // It resolved because the slowdown stopped, before the job ended.
  EXPECT_EQ(a.value("state", ""), "resolved") << a.dump();
  EXPECT_EQ(a.value("resolve_reason", ""), "cleared") << a.dump();
  ASSERT_GT(slow_until_s, 0);
  EXPECT_GE(resolved_seen_s, slow_until_s) << "resolved while rank 5 was still slow";
}

// The three hang shapes: a rank that never launches, one whose kernel never starts, a killed one.
TEST(DetectionE2e, SimHangsAreNamedWithTheCulpritAndItsRoleThroughTheRealDaemon) {
  if (std::string(SENTINEL_SIM_PATH).empty()) GTEST_SKIP() << "sentinel-sim is not built";
  constexpr double kHangTimeoutS = 2;
  const std::vector<std::pair<std::string, std::string>> kinds = {
      {"never-launched", "never_launched"},
      {"kernel-stuck", "launched_kernel_not_started"},
      {"killed", "gone"}};
  for (const auto& [kind, role] : kinds) {
    SCOPED_TRACE(kind);
    Daemon d({"--tick", "100ms", "--hang-timeout", "2s"});
    ASSERT_GT(d.port(), 0);
    constexpr int kCulprit = 2;
    Started sim =
        StartProgram({SENTINEL_SIM_PATH, "--ranks", "4", "--steps", "100000", "--compute-ms", "2",
                      "--hang", "rank=" + std::to_string(kCulprit) + ",at=30,kind=" + kind,
                      "--timeout-s", "60", "--plugin", SENTINEL_PLUGIN_PATH, "--quiet"},
                     {{"SENTINEL_SOCKET", d.socket()}}, 90);
    const auto t0 = SteadyClock::now();
    double records = -1;
    double last_progress_s = 0;  // the last time more records arrived: the hang began after it
    nlohmann::json alert;
    double seen_s = -1;
    while (SecondsSince(t0) < 40) {
      const double r = d.RecordsReceived();
      if (r > records) {
        records = r;
        last_progress_s = SecondsSince(t0);
      }
      const std::vector<nlohmann::json> hangs = d.Alerts("hang");
      if (!hangs.empty()) {
        alert = hangs.front();
        seen_s = SecondsSince(t0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    KillSimRanks(sim);
    const RunResult done = WaitProgram(sim);
    ASSERT_GT(seen_s, 0) << "no hang alert\n" << done.output;
    EXPECT_NE(done.exit_code, 0) << done.output;  // the job hung; it did not finish
    EXPECT_EQ(alert.value("state", ""), "firing") << alert.dump();
    ASSERT_EQ(alert["ranks"].size(), 1u) << alert.dump();
    EXPECT_EQ(alert["ranks"][0], kCulprit) << alert.dump();
    std::string culprit_role;
    for (const auto& r : alert["evidence"]["ranks"]) {
      if (NumOr(r, "rank", -1) == kCulprit) culprit_role = r.value("role", "");
    }
    EXPECT_EQ(culprit_role, role) << alert.dump();
    // Within hang-timeout + 5 s of the hang: by the daemon's own account (how long the others had
    // been inside the collective) and by this test's clock (since records stopped arriving).
    EXPECT_LE(NumOr(alert["evidence"], "waiting_s", 1e9), kHangTimeoutS + 5) << alert.dump();
    EXPECT_GE(NumOr(alert["evidence"], "waiting_s", 0), kHangTimeoutS) << alert.dump();
    std::printf("%s: hang alert seen %.2f s after the last record\n", kind.c_str(),
                seen_s - last_progress_s);
    std::fflush(stdout);
    EXPECT_LE(seen_s - last_progress_s, kHangTimeoutS + 5) << alert.dump();
  }
}

}  // namespace
}  // namespace sentinel::testing
