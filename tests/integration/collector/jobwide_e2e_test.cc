// Job-wide detection end to end: two real sentineld daemons on this machine stand for two nodes
// (each with its own socket and HTTP port; Prometheus's `instance` label tells them apart), and a
// real Prometheus scrapes both every second with the shipped rules (examples/prometheus/
// sentinel_rules.yml, with its 15 s intervals and `for` shortened to fit a test). The ranks are
// stand-ins that stream the plugin's wire records over real sockets, each to its own node's
// daemon, paced in real time (10 ms steps), each node on its own clock base.
// Layout: two data-parallel communicators with one rank per node (DP0: job ranks 0 on A and 2 on
// B; DP1: job ranks 1 on A and 3 on B), one process per rank.
//  - job rank 3 (node B) computes 20 % longer: node B's sentineld names the rank within 10 s, and
//    Prometheus fires SentinelJobStraggler for it (not a slow node: B's other rank is on time);
//  - both ranks of node B compute 20 % longer: node B's sentineld names itself as a slow node (by
//    its --node name, node-b), and Prometheus fires SentinelJobSlowNode for B;
//  - job rank 2 (node B) never arrives at DP0's next collective, which job rank 0 (node A)
//    entered: with the in-flight state every rank sends once a second, node A says it waits on a
//    rank outside this node, and Prometheus fires SentinelJobInFlightHangCulprit for rank 2 on B,
//    both within --hang-timeout + 30 s. Job rank 1 (node A) meanwhile waits in node A's own
//    tensor-parallel collective for job rank 0, which is inside DP0's: a victim too, so node A
//    names no culprit there either (and says where job rank 0 is);
//  - job ranks 0 and 2 issue different collectives at one position of DP0: Prometheus names the
//    mismatch, quoting both sides (no node sees both);
//  - job ranks 0 and 2 each sit in a collective of a communicator the other never enters (X and
//    Y, both spanning the nodes): Prometheus names the wait cycle with both members;
//  - noise only: nothing fires anywhere.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#include "httplib.h"
#include "tests/eval/job_model.h"
#include "tests/integration/collector/sentineld_process.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::testing {
namespace {

constexpr int64_t kMs = 1000000;
constexpr int64_t kModelStart = 1000000000000LL;  // the ranks' clock at the model's start
constexpr uint64_t kDp[2] = {0x00000000000e0000ULL, 0x00000000000e0001ULL};
// Node A's own tensor-parallel communicator in the hang test: job ranks 0 and 1, both on node A.
// Its hash is above DP0's and DP1's on purpose: with the default series budget a process exports
// only its primary communicator (the largest, then the lowest hash: metrics_select.cc), and the
// job-wide rule must see DP0's in-flight series from both nodes.
constexpr uint64_t kTpA = 0x00000000000f0001ULL;
constexpr const char* kNodeName[2] = {"node-a", "node-b"};
// sentineld's default --hang-timeout, and the age the shipped in-flight hang rules wait for.
constexpr double kHangTimeoutS = 30;

std::string MakeDir() {
  char tmpl[] = "/tmp/snjw-XXXXXX";
  return mkdtemp(tmpl) != nullptr ? std::string(tmpl) : std::string();
}

pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (!log.empty()) {
      freopen(log.c_str(), "w", stdout);
      freopen(log.c_str(), "a", stderr);
    }
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

void Reap(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
}

nlohmann::json GetJson(int port, const std::string& path) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(5, 0);
  auto res = c.Get(path.c_str());
  if (!res || res->status != 200) return nlohmann::json();
  return nlohmann::json::parse(res->body, nullptr, false);
}

class Node {
 public:
  // `name`: its --node name (two daemons on one machine stand for two nodes).
  Node(const std::string& dir, const std::string& name) : dir_(dir) {
    socket_ = dir_ + "/s.sock";
    pid_ = Spawn({SENTINEL_SENTINELD_PATH, "--socket", socket_, "--listen", "127.0.0.1:0",
                  "--port-file", dir_ + "/port", "--tick", "100ms", "--log-level", "warn",
                  "--node-wait-alerts", "on", "--node", name, "--hang-timeout", "30s"},
                 dir_ + "/sentineld.log");
    for (int i = 0; i < 200 && port_ == 0; ++i) {
      std::ifstream in(dir_ + "/port");
      if (!(in >> port_)) port_ = 0;
      if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~Node() { Reap(pid_); }
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  int port() const { return port_; }
  const std::string& socket() const { return socket_; }
  std::vector<nlohmann::json> FiringAlerts() const {
    std::vector<nlohmann::json> out;
    const nlohmann::json j = GetJson(port_, "/v1/alerts");
    if (!j.is_object() || !j.contains("alerts")) return out;
    for (const auto& a : j["alerts"]) {
      if (a.value("state", "") == "firing") out.push_back(a);
    }
    return out;
  }

 private:
  std::string dir_;
  std::string socket_;
  pid_t pid_ = -1;
  int port_ = 0;
};

std::string Dump(const std::vector<nlohmann::json>& alerts) {
  std::string out;
  for (const auto& a : alerts) out += a.value("id", "") + ": " + a.value("summary", "") + "\n";
  return out;
}

class JobwideE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(SENTINEL_SENTINELD_PATH, X_OK) != 0) GTEST_SKIP() << "no sentineld";
    dir_ = MakeDir();
    ASSERT_FALSE(dir_.empty());
    for (int n = 0; n < 2; ++n) {
      const std::string d = dir_ + (n == 0 ? "/a" : "/b");
      mkdir(d.c_str(), 0700);
      nodes_[n] = std::make_unique<Node>(d, kNodeName[n]);
      ASSERT_GT(nodes_[n]->port(), 0) << "sentineld " << n << " did not start";
    }
    // One client per rank (one process per GPU), announcing its data-parallel communicator.
    for (int n = 0; n < 2; ++n) {
      for (int local = 0; local < 2; ++local) {
        auto c = std::make_unique<WireClient>();
        c->set_hello_host(kNodeName[n]);
        const uint32_t pid = static_cast<uint32_t>(4000 + 2 * n + local);
        ASSERT_TRUE(c->Connect(nodes_[n]->socket(), pid));
        SentinelWireCommInit init = MakeCommInit(kDp[local], n, 2);
        init.nnodes = 2;
        init.pid = pid;
        std::snprintf(init.comm_name, sizeof(init.comm_name), "dp%d", local);
        ASSERT_TRUE(c->Send(Frame(kSentinelWireCommInit, init)));
        clients_[n][local] = std::move(c);
      }
    }
    StartPrometheus();
  }
  void TearDown() override {
    Reap(prom_pid_);
    for (auto& n : nodes_) n.reset();
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }

  void StartPrometheus() {
    prom_port_ = 0;
    if (access("/usr/bin/prometheus", X_OK) != 0) return;  // the node-level part still runs
    prom_port_ = FreePortBelowEphemeral();
    if (prom_port_ == 0) return;
    // The shipped rules with the 15 s evaluation interval and `for` shortened for a test.
    std::ifstream in(SENTINEL_RULES_PATH);
    std::stringstream rules;
    rules << in.rdbuf();
    std::string text = std::regex_replace(rules.str(), std::regex("interval: 15s"), "interval: 1s");
    text = std::regex_replace(text, std::regex("for: 15s"), "for: 2s");
    // The recent-lateness window, 4 evaluations at 15 s, likewise 4 at 1 s.
    text = std::regex_replace(text, std::regex("\\[50s\\]"), "[3500ms]");
    std::ofstream(dir_ + "/rules.yml") << text;
    std::ofstream(dir_ + "/prometheus.yml")
        << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        << "rule_files:\n  - " << dir_ << "/rules.yml\n"
        << "scrape_configs:\n  - job_name: sentineld\n    static_configs:\n"
        << "      - targets: ['127.0.0.1:" << nodes_[0]->port()
        << "', '127.0.0.1:" << nodes_[1]->port() << "']\n";
    prom_pid_ =
        Spawn({"/usr/bin/prometheus", "--config.file=" + dir_ + "/prometheus.yml",
               "--storage.tsdb.path=" + dir_ + "/tsdb",
               "--web.listen-address=127.0.0.1:" + std::to_string(prom_port_), "--log.level=warn"},
              dir_ + "/prometheus.log");
  }
  // Firing alerts of Prometheus (name + labels), empty when it does not run.
  std::vector<nlohmann::json> PromFiring() {
    std::vector<nlohmann::json> out;
    if (prom_port_ == 0) return out;
    const nlohmann::json j = GetJson(prom_port_, "/api/v1/alerts");
    if (!j.is_object() || !j.contains("data")) return out;
    for (const auto& a : j["data"]["alerts"]) {
      if (a.value("state", "") == "firing") out.push_back(a);
    }
    return out;
  }
  std::string InstanceOf(int node) const {
    return "127.0.0.1:" + std::to_string(nodes_[node]->port());
  }

  // Streams `steps` steps of both communicators at 10 ms steps, paced in real time.
  void Run(int64_t steps, double jitter, const std::vector<collector::eval::Slowdown>& slow) {
    for (int c = 0; c < 2; ++c) {
      if (steppers_[c]) continue;
      collector::eval::CommModel m;
      m.hash = kDp[c];
      m.ranks = {c, 2 + c};
      m.compute_ns = {10 * kMs};
      m.jitter = jitter;
      m.duration_ns = 1 * kMs;
      steppers_[c] = std::make_unique<collector::eval::CommStepper>(m, 3 + static_cast<uint64_t>(c),
                                                                    1000000000000LL);
    }
    const auto t0 = std::chrono::steady_clock::now();
    // The model's time when this call starts (its start before the first collective).
    const int64_t v0 = steppers_[0]->now_ns() > 0 ? steppers_[0]->now_ns() : kModelStart;
    std::vector<SentinelWireCollRecord> recs;
    const int64_t until = steppers_[0]->step() + steps;
    while (steppers_[0]->step() < until) {
      for (int c = 0; c < 2; ++c) {
        recs.clear();
        steppers_[c]->Next(slow, &recs);
        for (SentinelWireCollRecord r : recs) {
          const int node = r.rank;                                // comm rank = node index
          const int64_t offset = node == 0 ? 0 : 987654321000LL;  // no common clock
          r.gpu_start_ns += offset;
          r.gpu_end_ns += offset;
          r.enqueue_ns += offset;
          r.api_ns += offset;
          r.pid = static_cast<uint32_t>(4000 + 2 * node + c);
          ASSERT_TRUE(clients_[node][c]->Send(Frame(kSentinelWireColl, r)));
          ++completed_[node][c];
        }
      }
      // As the plugin does: every rank's in-flight state once a second (100 steps), here with
      // nothing in flight between two steps.
      if (send_inflight_ && steppers_[0]->step() % 100 == 0) {
        for (int node = 0; node < 2; ++node) {
          for (int c = 0; c < 2; ++c) SendInFlight(node, c, completed_[node][c], 0);
        }
      }
      std::this_thread::sleep_until(t0 + std::chrono::nanoseconds(steppers_[0]->now_ns() - v0));
      // The checks read the daemons' and Prometheus's HTTP APIs: every 20 steps (200 ms).
      if (on_step_ && steppers_[0]->step() % 20 == 0) on_step_();
    }
  }

  // The in-flight state (wire type 9) of the rank of DP`c` on `node`: `completed` collectives done,
  // and, when `entered_ns` (this machine's CLOCK_MONOTONIC, as the plugin reads it) is not 0, the
  // next one enqueued and its kernel started then (inside it, waiting for its peers).
  void SendInFlight(int node, int c, uint64_t completed, int64_t entered_ns) {
    const uint64_t at = entered_ns != 0 ? completed + 1 : completed;
    SentinelWireInFlight in = MakeInFlight(kDp[c], node, 2, at, at, completed,
                                           entered_ns != 0 ? entered_ns : 0, MonoNow());
    in.pid = static_cast<uint32_t>(4000 + 2 * node + c);
    ASSERT_TRUE(clients_[node][c]->Send(Frame(kSentinelWireInFlight, in)));
  }

  std::string dir_;
  std::unique_ptr<Node> nodes_[2];
  uint64_t completed_[2][2] = {};  // collectives streamed, per node and DP communicator
  bool send_inflight_ = false;
  std::unique_ptr<WireClient> clients_[2][2];
  std::unique_ptr<collector::eval::CommStepper> steppers_[2];
  std::function<void()> on_step_;
  pid_t prom_pid_ = -1;
  int prom_port_ = 0;
};

// Polls `pred` for up to `seconds`.
template <typename Pred>
bool WaitUntil(double seconds, Pred pred) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return pred();
}

TEST_F(JobwideE2eTest, OneSlowRankInAOneRankPerNodeCommunicatorIsNamed) {
  Run(300, 0.03, {});
  EXPECT_TRUE(nodes_[0]->FiringAlerts().empty()) << Dump(nodes_[0]->FiringAlerts());
  EXPECT_TRUE(nodes_[1]->FiringAlerts().empty()) << Dump(nodes_[1]->FiringAlerts());
  // Job rank 3 (node B, DP1) 20 % slower from step 300; node B must say so within 10 s.
  const auto slowed = std::chrono::steady_clock::now();
  double named_after_s = -1;
  on_step_ = [&] {
    if (named_after_s >= 0) return;
    for (const auto& a : nodes_[1]->FiringAlerts()) {
      if (a.value("kind", "") == "straggler") {
        named_after_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - slowed).count();
      }
    }
  };
  Run(1500, 0.03, {{3, 0.20, 300, -1}});
  on_step_ = nullptr;
  EXPECT_GE(named_after_s, 0) << "node B never named it";
  EXPECT_LE(named_after_s, 10.0);
  const auto b = nodes_[1]->FiringAlerts();
  ASSERT_EQ(b.size(), 1u) << Dump(b);
  EXPECT_EQ(b[0]["ranks"], nlohmann::json::array({1}));
  EXPECT_EQ(b[0]["comm"], "0x00000000000e0001");
  EXPECT_EQ(b[0]["evidence"]["scope"], "rank");
  EXPECT_TRUE(nodes_[0]->FiringAlerts().empty()) << Dump(nodes_[0]->FiringAlerts());
  if (prom_port_ == 0) GTEST_SKIP() << "prometheus not installed: the job-wide half not run";
  // Job-wide: Prometheus names rank 1 of DP1 on node B (keep the job running meanwhile).
  bool named = false;
  on_step_ = [&] {
    if (named) return;
    for (const auto& a : PromFiring()) {
      if (a["labels"].value("alertname", "") == "SentinelJobStraggler" &&
          a["labels"].value("instance", "") == InstanceOf(1) &&
          a["labels"].value("comm", "") == "0x00000000000e0001" &&
          a["labels"].value("rank", "") == "1") {
        named = true;
      }
    }
  };
  for (int i = 0; i < 6 && !named; ++i) Run(500, 0.03, {{3, 0.20, 0, -1}});
  EXPECT_TRUE(named) << "Prometheus: " << nlohmann::json(PromFiring()).dump();
  for (const auto& a : PromFiring()) {
    EXPECT_NE(a["labels"].value("alertname", ""), "SentinelJobSlowNode") << a.dump();
  }
}

TEST_F(JobwideE2eTest, WholeSlowNodeIsNamedByItselfAndJobWide) {
  Run(300, 0.03, {});
  Run(1500, 0.03, {{2, 0.20, 300, -1}, {3, 0.20, 300, -1}});
  const auto b = nodes_[1]->FiringAlerts();
  ASSERT_EQ(b.size(), 1u) << Dump(b);
  EXPECT_EQ(b[0]["evidence"]["scope"], "node");
  EXPECT_NE(b[0].value("summary", "").find("is slow: all 2 of its processes"), std::string::npos)
      << b[0].dump();
  // Named by its --node name, not the machine's host name both daemons share.
  EXPECT_EQ(b[0].value("id", ""), "straggler-node-node-b") << b[0].dump();
  EXPECT_EQ(b[0].value("host", ""), "node-b") << b[0].dump();
  EXPECT_NE(b[0].value("summary", "").find("node-b"), std::string::npos) << b[0].dump();
  EXPECT_TRUE(nodes_[0]->FiringAlerts().empty()) << Dump(nodes_[0]->FiringAlerts());
  if (prom_port_ == 0) GTEST_SKIP() << "prometheus not installed: the job-wide half not run";
  bool named = false;
  on_step_ = [&] {
    if (named) return;
    for (const auto& a : PromFiring()) {
      if (a["labels"].value("alertname", "") == "SentinelJobSlowNode" &&
          a["labels"].value("instance", "") == InstanceOf(1)) {
        named = true;
      }
    }
  };
  for (int i = 0; i < 6 && !named; ++i) {
    Run(500, 0.03, {{2, 0.20, 0, -1}, {3, 0.20, 0, -1}});
  }
  EXPECT_TRUE(named) << "Prometheus: " << nlohmann::json(PromFiring()).dump();
  for (const auto& a : PromFiring()) {
    EXPECT_NE(a["labels"].value("alertname", ""), "SentinelJobStraggler") << a.dump();
  }
}

// Job rank 2 (node B, comm rank 1 of DP0) never arrives at DP0's next collective; job rank 0
// (node A) entered it and waits. Node B cannot see it (nothing waits there); node A can only
// say that it waits on a rank outside the node; the job-wide rule names the culprit.
TEST_F(JobwideE2eTest, RankOfNodeBNeverArrivingIsNamedJobWideAndNodeAWaitsOutside) {
  send_inflight_ = true;
  for (int local = 0; local < 2; ++local) {
    SentinelWireCommInit init = MakeCommInit(kTpA, local, 2);
    init.nnodes = 1;
    init.pid = static_cast<uint32_t>(4000 + local);
    std::snprintf(init.comm_name, sizeof(init.comm_name), "tp");
    ASSERT_TRUE(clients_[0][local]->Send(Frame(kSentinelWireCommInit, init)));
  }
  // The tensor-parallel communicator's in-flight state: `completed` done, and rank `local` inside
  // the next one since `entered_ns` when not 0.
  auto tp_state = [&](int local, uint64_t completed, int64_t entered_ns) {
    const uint64_t at = entered_ns != 0 ? completed + 1 : completed;
    SentinelWireInFlight in =
        MakeInFlight(kTpA, local, 2, at, at, completed, entered_ns, MonoNow());
    in.pid = static_cast<uint32_t>(4000 + local);
    ASSERT_TRUE(clients_[0][local]->Send(Frame(kSentinelWireInFlight, in)));
  };
  tp_state(0, 40, 0);
  tp_state(1, 40, 0);
  Run(300, 0.03, {});
  EXPECT_TRUE(nodes_[0]->FiringAlerts().empty()) << Dump(nodes_[0]->FiringAlerts());
  EXPECT_TRUE(nodes_[1]->FiringAlerts().empty()) << Dump(nodes_[1]->FiringAlerts());
  const auto hung = std::chrono::steady_clock::now();
  const int64_t entered = MonoNow();
  const double limit_s = kHangTimeoutS + 30;
  const int64_t tp_entered = entered + 200 * kMs;
  double node_a_s = -1;
  double tp_s = -1;
  double job_s = -1;
  std::string node_a_summary;
  std::string tp_summary;
  std::vector<nlohmann::json> job_named;  // every in-flight culprit Prometheus named
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - hung).count();
  };
  auto next_state = std::chrono::steady_clock::now();
  while (elapsed() < limit_s + 5 && (node_a_s < 0 || tp_s < 0 || (prom_port_ != 0 && job_s < 0))) {
    if (std::chrono::steady_clock::now() >= next_state) {
      // Once a second, as the plugin: rank 0 inside DP0's next collective since `entered`, rank 2
      // not there (nothing in flight); DP1 idle between two steps.
      SendInFlight(0, 0, completed_[0][0], entered);
      SendInFlight(1, 0, completed_[1][0], 0);
      SendInFlight(0, 1, completed_[0][1], 0);
      SendInFlight(1, 1, completed_[1][1], 0);
      tp_state(0, 40, 0);
      tp_state(1, 40, MonoNow() >= tp_entered ? tp_entered : 0);
      next_state += std::chrono::seconds(1);
    }
    if (node_a_s < 0) {
      for (const auto& a : nodes_[0]->FiringAlerts()) {
        if (a.value("kind", "") == "hang" && a.value("comm", "") == "0x00000000000e0000") {
          node_a_s = elapsed();
          node_a_summary = a.value("summary", "");
          EXPECT_TRUE(a["ranks"].empty()) << a.dump();
          EXPECT_TRUE(a["evidence"].value("outside_node", false)) << a.dump();
          EXPECT_EQ(a.value("host", ""), "node-a") << a.dump();
        }
      }
    }
    if (tp_s < 0) {
      for (const auto& a : nodes_[0]->FiringAlerts()) {
        if (a.value("kind", "") == "hang" && a.value("comm", "") == "0x00000000000f0001") {
          tp_s = elapsed();
          tp_summary = a.value("summary", "");
          EXPECT_TRUE(a["ranks"].empty()) << "job rank 0 is a victim, not a culprit: " << a.dump();
          EXPECT_TRUE(a["evidence"].value("outside_node", false)) << a.dump();
        }
      }
    }
    if (prom_port_ != 0) {
      for (const auto& a : PromFiring()) {
        if (a["labels"].value("alertname", "") != "SentinelJobInFlightHangCulprit") continue;
        if (std::find(job_named.begin(), job_named.end(), a["labels"]) == job_named.end()) {
          job_named.push_back(a["labels"]);
        }
        if (job_s < 0 && a["labels"].value("instance", "") == InstanceOf(1) &&
            a["labels"].value("comm", "") == "0x00000000000e0000" &&
            a["labels"].value("rank", "") == "1") {
          job_s = elapsed();
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  std::printf(
      "hang: node A said it waits outside after %.1f s (its tensor-parallel comm: %.1f s), "
      "Prometheus named the culprit after %.1f s (limit %.0f s); in-flight culprits "
      "named job-wide: %s\n",
      node_a_s, tp_s, job_s, limit_s, nlohmann::json(job_named).dump().c_str());
  ASSERT_GE(node_a_s, 0) << "node A raised no hang alert for DP0 within " << limit_s << " s";
  EXPECT_LE(node_a_s, limit_s);
  EXPECT_NE(node_a_summary.find("waiting on a rank outside this node"), std::string::npos)
      << node_a_summary;
  ASSERT_GE(tp_s, 0) << "node A raised no hang alert for its tensor-parallel communicator";
  EXPECT_LE(tp_s, limit_s);
  EXPECT_NE(tp_summary.find("waiting on a rank outside this node"), std::string::npos)
      << tp_summary;
  EXPECT_NE(tp_summary.find("rank 0 is inside comm 0x00000000000e0000"), std::string::npos)
      << tp_summary;
  for (const auto& a : nodes_[1]->FiringAlerts()) {
    EXPECT_NE(a.value("kind", ""), "hang") << "node B has nothing waiting: " << a.dump();
  }
  if (prom_port_ == 0) GTEST_SKIP() << "prometheus not installed: the job-wide half not run";
  ASSERT_GE(job_s, 0) << "Prometheus never named rank 1 of DP0 on node B: "
                      << nlohmann::json(job_named).dump();
  EXPECT_LE(job_s, limit_s);
  // In DP0 only the culprit: rank 0 on node A is inside the collective, not behind. In node A's
  // tensor-parallel communicator nobody: job rank 0 never started that collective, but its
  // process has sat in DP0's for 5 s and more (sentinel_inflight_waiting_elsewhere says so).
  for (const auto& labels : job_named) {
    EXPECT_EQ(labels.value("comm", ""), "0x00000000000e0000") << labels.dump();
    EXPECT_EQ(labels.value("instance", ""), InstanceOf(1)) << labels.dump();
    EXPECT_EQ(labels.value("rank", ""), "1") << labels.dump();
  }
}

// Ranks that disagree, one per node: at DP0's next collective job rank 0 (node A) issued
// AllReduce 16 MiB bf16 and job rank 2 (node B) AllGather 4 MiB; both kernels started, so nobody
// is behind and no culprit exists. Neither daemon sees both sides; Prometheus compares the digests
// both export and names the mismatch (one to one: no majority, both ranks) within --hang-timeout +
// 30 s, quoting each side.
TEST_F(JobwideE2eTest, RanksOfTwoNodesOnDifferentCollectivesAreAMismatchJobWide) {
  if (prom_port_ == 0) GTEST_SKIP() << "prometheus not installed";
  send_inflight_ = true;
  Run(300, 0.03, {});
  const auto hung = std::chrono::steady_clock::now();
  const int64_t entered = MonoNow();
  const double limit_s = kHangTimeoutS + 30;
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - hung).count();
  };
  auto send = [&](int node, bool inside_dp0) {
    const uint64_t done = completed_[node][0];
    const uint64_t at = inside_dp0 ? done + 1 : done;
    SentinelWireInFlight in = MakeInFlight(kDp[0], node, 2, at, at, done, entered, MonoNow());
    in.pid = static_cast<uint32_t>(4000 + 2 * node);
    in.flags = kSentinelInFlightSignature;
    in.oldest_func = node == 0 ? kSentinelFuncAllReduce : kSentinelFuncAllGather;
    in.oldest_bytes = node == 0 ? 16u << 20 : 4u << 20;
    in.oldest_datatype = node == 0 ? 9 : 0;  // ncclBfloat16; AllGather's Coll event says int8
    in.oldest_root = -1;
    ASSERT_TRUE(clients_[node][0]->Send(Frame(kSentinelWireInFlight, in)));
    SendInFlight(node, 1, completed_[node][1], 0);
  };
  std::map<std::string, std::string> named;  // "instance/rank" -> summary
  std::vector<std::string> culprits;
  double job_s = -1;
  auto next_state = std::chrono::steady_clock::now();
  while (elapsed() < limit_s + 5 && job_s < 0) {
    if (std::chrono::steady_clock::now() >= next_state) {
      send(0, true);
      send(1, true);
      next_state += std::chrono::seconds(1);
    }
    for (const auto& a : PromFiring()) {
      const std::string name = a["labels"].value("alertname", "");
      if (name == "SentinelJobInFlightHangCulprit") culprits.push_back(a["labels"].dump());
      if (name != "SentinelJobCollectiveMismatch") continue;
      named[a["labels"].value("instance", "") + "/" + a["labels"].value("rank", "")] =
          a["annotations"].value("summary", "");
    }
    if (named.size() == 2) job_s = elapsed();
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  std::string text;
  for (const auto& [who, summary] : named) text += who + ": " + summary + "\n";
  std::printf("mismatch: Prometheus named %zu rank(s) after %.1f s (limit %.0f s):\n%s",
              named.size(), job_s, limit_s, text.c_str());
  ASSERT_GE(job_s, 0) << "not both ranks named within " << limit_s << " s:\n" << text;
  EXPECT_LE(job_s, limit_s);
  const std::string b = named[InstanceOf(1) + "/1"];
  EXPECT_NE(b.find("stuck at collective #" + std::to_string(completed_[1][0] + 1)),
            std::string::npos)
      << b;
  EXPECT_NE(b.find("rank 1 on " + InstanceOf(1) + " issued AllGather 4MiB;"), std::string::npos)
      << b;
  EXPECT_NE(b.find("no operation has a majority"), std::string::npos) << b;
  EXPECT_NE(named[InstanceOf(0) + "/0"].find("issued AllReduce 16MiB bf16"), std::string::npos)
      << text;
  EXPECT_TRUE(culprits.empty()) << "nobody is behind: " << culprits.front();
}

// A wait cycle across nodes: two more communicators X and Y of the same two processes (job ranks
// 0 on A and 2 on B). Job rank 0 is inside X's collective #40 and never issues Y's #12; job rank 2
// is inside Y's #12 and never issues X's #40. Each node sees one side; Prometheus pairs them and
// names both, and the in-flight culprit rule names neither (each waits elsewhere).
TEST_F(JobwideE2eTest, TwoNodesWaitingInEachOthersCommunicatorAreACycleJobWide) {
  if (prom_port_ == 0) GTEST_SKIP() << "prometheus not installed";
  constexpr uint64_t kX = 0x00000000000c0001ULL;
  constexpr uint64_t kY = 0x00000000000c0002ULL;
  for (int node = 0; node < 2; ++node) {
    for (uint64_t comm : {kX, kY}) {
      SentinelWireCommInit init = MakeCommInit(comm, node, 2);
      init.nnodes = 2;
      init.pid = static_cast<uint32_t>(4000 + 2 * node);
      ASSERT_TRUE(clients_[node][0]->Send(Frame(kSentinelWireCommInit, init)));
    }
  }
  send_inflight_ = true;
  Run(300, 0.03, {});
  const auto hung = std::chrono::steady_clock::now();
  const int64_t entered = MonoNow();
  const double limit_s = kHangTimeoutS + 30;
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - hung).count();
  };
  // `comm`'s state on `node`: `done` completed, and inside the next one since `entered` or not.
  auto state = [&](int node, uint64_t comm, uint64_t done, bool inside) {
    const uint64_t at = inside ? done + 1 : done;
    SentinelWireInFlight in = MakeInFlight(comm, node, 2, at, at, done, entered, MonoNow());
    in.pid = static_cast<uint32_t>(4000 + 2 * node);
    ASSERT_TRUE(clients_[node][0]->Send(Frame(kSentinelWireInFlight, in)));
  };
  std::map<std::string, std::string> named;  // "comm/instance/rank in in_comm" -> summary
  std::vector<std::string> culprits;
  double job_s = -1;
  auto next_state = std::chrono::steady_clock::now();
  while (elapsed() < limit_s + 5 && job_s < 0) {
    if (std::chrono::steady_clock::now() >= next_state) {
      state(0, kX, 39, true);
      state(0, kY, 11, false);
      state(1, kY, 11, true);
      state(1, kX, 39, false);
      for (int node = 0; node < 2; ++node) {
        for (int c = 0; c < 2; ++c) SendInFlight(node, c, completed_[node][c], 0);
      }
      next_state += std::chrono::seconds(1);
    }
    for (const auto& a : PromFiring()) {
      const nlohmann::json& l = a["labels"];
      const std::string name = l.value("alertname", "");
      if (name == "SentinelJobInFlightHangCulprit") culprits.push_back(l.dump());
      if (name != "SentinelJobDeadlockCycle") continue;
      named[l.value("comm", "") + "/" + l.value("instance", "") + "/" + l.value("rank", "") +
            " in " + l.value("in_comm", "")] = a["annotations"].value("summary", "");
    }
    if (named.size() == 2) job_s = elapsed();
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  std::string text;
  for (const auto& [who, summary] : named) text += who + ": " + summary + "\n";
  std::printf("cycle: Prometheus named %zu member(s) after %.1f s (limit %.0f s):\n%s",
              named.size(), job_s, limit_s, text.c_str());
  ASSERT_GE(job_s, 0) << "the cycle was not named within " << limit_s << " s:\n" << text;
  EXPECT_LE(job_s, limit_s);
  const std::string x = "0x00000000000c0001";
  const std::string y = "0x00000000000c0002";
  const std::string b = named[x + "/" + InstanceOf(1) + "/1 in " + y];
  EXPECT_NE(b.find("rank 1 on " + InstanceOf(1) + " waits in comm " + y + " #12"),
            std::string::npos)
      << text;
  EXPECT_NE(b.find("rank 0 on " + InstanceOf(0) + " waits in comm " + x + " #40"),
            std::string::npos)
      << text;
  EXPECT_EQ(named.count(y + "/" + InstanceOf(0) + "/0 in " + x), 1u) << text;
  for (const std::string& c : culprits) {
    EXPECT_EQ(c.find("0x00000000000c000"), std::string::npos) << "a cycle member named: " << c;
  }
}

TEST_F(JobwideE2eTest, NoiseOnlyFiresNothing) {
  Run(2500, 0.05, {});
  EXPECT_TRUE(nodes_[0]->FiringAlerts().empty()) << Dump(nodes_[0]->FiringAlerts());
  EXPECT_TRUE(nodes_[1]->FiringAlerts().empty()) << Dump(nodes_[1]->FiringAlerts());
  if (prom_port_ == 0) return;
  // Prometheus had the series (it evaluated the rules over them: 4 ranks in communicators
  // spanning both nodes) and fired nothing.
  const nlohmann::json q =
      GetJson(prom_port_, "/api/v1/query?query=sum%28sentinel%3Anode_ranks%3Acount%29");
  ASSERT_TRUE(q.is_object()) << "prometheus did not answer";
  ASSERT_EQ(q["data"]["result"].size(), 1u) << q.dump();
  EXPECT_EQ(q["data"]["result"][0]["value"][1], "4") << q.dump();
  EXPECT_TRUE(PromFiring().empty()) << nlohmann::json(PromFiring()).dump();
}

}  // namespace
}  // namespace sentinel::testing
