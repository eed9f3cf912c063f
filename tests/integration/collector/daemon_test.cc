// The real sentineld binary over a temp-dir socket: ranks streaming through our own wire client,
// every HTTP payload validated against schemas/api, malformed input closing only its client,
// another uid refused, the major-version refusal, sentinelctl's exit codes, the record log, and
// `promtool check metrics` on the real /metrics.
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "tests/integration/collector/daemon_fixture.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::testing {
namespace {

constexpr uint64_t kComm = 0x1234567890ABCDEFULL;
constexpr int64_t kMs = 1000000;

class DaemonTest : public DaemonFixture {
 protected:
  // n ranks, one connection each, CommInit sent.
  void ConnectRanks(int n) {
    for (int r = 0; r < n; ++r) {
      clients_.push_back(std::make_unique<WireClient>());
      // Each rank from a process of its own, as in a job: sentineld names processes by the
      // kernel's pid, and the trace draws one track per process.
      clients_.back()->ConnectAsOwnProcess();
      ASSERT_TRUE(clients_.back()->Connect(socket_, static_cast<uint32_t>(2000 + r)));
      ASSERT_TRUE(clients_.back()->Send(Frame(kSentinelWireCommInit, MakeCommInit(kComm, r, n))));
    }
  }
  // `count` collectives from every rank (seq from `first`); `late_rank` arrives 40 ms late.
  void Stream(uint64_t first, int count, int late_rank) {
    const int n = static_cast<int>(clients_.size());
    const int64_t base = MonoNow() - 60LL * 1000 * kMs;
    for (int r = 0; r < n; ++r) {
      Bytes b;
      for (uint64_t seq = first; seq < first + static_cast<uint64_t>(count); ++seq) {
        const int64_t start = base + static_cast<int64_t>(seq) * 100 * kMs;
        const int64_t arrival = start + (r == late_rank ? 40 * kMs : r * 10000);
        const auto rec = MakeColl(kComm, r, n, seq, arrival, start + 50 * kMs - arrival);
        AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
      }
      ASSERT_TRUE(clients_[static_cast<size_t>(r)]->Send(b));
    }
  }
  std::vector<std::unique_ptr<WireClient>> clients_;
};

TEST_F(DaemonTest, RanksTelemetryAlertsTraceMatchSchemas) {
  Start({"--record-log", dir_ + "/records.jsonl", "--record-log-max-mb", "1", "--straggler-learn",
         "4", "--straggler-evidence", "0"});
  struct stat st {};
  ASSERT_EQ(stat(socket_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "socket must be owner-only without --allow-group";
  ConnectRanks(4);
  Stream(0, 20, /*late_rank=*/2);
  for (auto& c : clients_) {
    SentinelWireHeartbeat hb{};
    hb.now_ns = MonoNow();
    hb.records_completed = 20;
    hb.records_dropped_ring = 1;
    ASSERT_TRUE(c->Send(Frame(kSentinelWireHeartbeat, hb)));
  }
  const nlohmann::json ranks = WaitFor("/v1/ranks", [](const nlohmann::json& j) {
    if (j["ranks"].size() != 4) return false;
    for (const auto& r : j["ranks"]) {
      if (r["collectives"] != 20 || r["drops"] != 1) return false;
    }
    return true;
  });
  for (const auto& r : ranks["ranks"]) {
    const int rank = r["rank"];
    // Identity from the kernel and from sentineld itself: the pid is this test process's
    // (SO_PEERCRED), the host this node's; the hello's pid is shown as claimed only.
    EXPECT_NE(r["pid"], 2000 + rank);
    EXPECT_GT(r["pid"], 0);
    EXPECT_EQ(r["claimed_pid"], 2000 + rank);
    EXPECT_EQ(r["last_seq"], 19);
    EXPECT_EQ(r["host"], ranks["host"]);
    EXPECT_NE(r["host"], "testhost");
    const double expected = rank == 2 ? 40.0 : 0.0;
    EXPECT_NEAR(r["lateness_p50_ms"].get<double>(), expected, 0.05) << rank;
  }
  const nlohmann::json alerts = GetJson("/v1/alerts");
  ASSERT_EQ(alerts["alerts"].size(), 1u) << alerts.dump();
  EXPECT_EQ(alerts["alerts"][0]["kind"], "straggler");
  EXPECT_EQ(alerts["alerts"][0]["ranks"], nlohmann::json({2}));
  const nlohmann::json telemetry = GetJson("/v1/telemetry?window=15m");
  EXPECT_EQ(telemetry["collectives"], 20);
  EXPECT_NEAR(telemetry["skew_p99_ms"].get<double>(), 40.0, 0.05);
  std::string body;
  EXPECT_EQ(Get("/v1/telemetry?window=soon", &body), 400);
  const std::string error_file = Save("error.json", body);
  EXPECT_EQ(Get("/v1/nope", &body), 404);
  const std::string notfound_file = Save("notfound.json", body);
  const nlohmann::json trace = GetJson("/v1/trace?last=2h");
  int complete_events = 0;
  for (const auto& e : trace["traceEvents"]) complete_events += e["ph"] == "X" ? 1 : 0;
  EXPECT_EQ(complete_events, 80);
  std::string out;
  const int rc = Validate(
      {"ranks=" + Save("ranks.json", ranks.dump()), "alerts=" + Save("alerts.json", alerts.dump()),
       "telemetry=" + Save("telemetry.json", telemetry.dump()),
       "healthz=" + Save("healthz.json", GetJson("/healthz").dump()),
       "trace=" + Save("trace.json", trace.dump()), "error=" + error_file,
       "error=" + notfound_file},
      &out);
  if (rc == 77) GTEST_SKIP() << out;
  EXPECT_EQ(rc, 0) << out;
  // The record log has one JSON line per record.
  std::ifstream log(dir_ + "/records.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(log, line)) {
    ++lines;
    EXPECT_FALSE(nlohmann::json::parse(line, nullptr, false).is_discarded()) << line;
  }
  EXPECT_EQ(lines, 80);
}

TEST_F(DaemonTest, MalformedInputClosesOnlyThatClient) {
  Start();
  ConnectRanks(2);
  Stream(0, 5, -1);
  // Three bad clients: a truncated frame then EOF, an oversized frame, garbage.
  WireClient truncated, oversized, garbage;
  ASSERT_TRUE(truncated.Connect(socket_, 3001));
  ASSERT_TRUE(oversized.Connect(socket_, 3002));
  ASSERT_TRUE(garbage.Connect(socket_, 3003));
  Bytes t = Frame(kSentinelWireColl, MakeColl(kComm, 0, 2, 99, 0, 0));
  t.resize(50);
  ASSERT_TRUE(truncated.Send(t));
  truncated.Close();
  Bytes o;
  const uint8_t zeros[64] = {};
  AppendFrame(&o, kSentinelWireColl, zeros, sizeof(zeros), SENTINEL_WIRE_FRAME_MAX + 8);
  ASSERT_TRUE(oversized.Send(o));
  Bytes g(256);
  for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<uint8_t>(i * 131 + 7);
  ASSERT_TRUE(garbage.Send(g));
  EXPECT_TRUE(oversized.PeerClosed());
  EXPECT_TRUE(garbage.PeerClosed());
  // The good clients keep streaming and every record of theirs is counted.
  Stream(5, 15, -1);
  WaitFor("/v1/ranks", [](const nlohmann::json& j) {
    int full = 0;
    for (const auto& r : j["ranks"]) full += r["collectives"] == 20 ? 1 : 0;
    return full == 2;
  });
  for (int i = 0; i < 100 && Metric("sentinel_malformed_frames_total") < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(Metric("sentinel_malformed_frames_total"), 3);
  EXPECT_EQ(Metric("sentinel_clients_connected"), 2);
  EXPECT_EQ(Metric("sentinel_records_received_total"), 40);
}

TEST_F(DaemonTest, MajorMismatchIsRefusedWithAnAck) {
  Start();
  WireClient c;
  SentinelWireHelloAck ack{};
  EXPECT_FALSE(c.Connect(socket_, 4000, SENTINEL_WIRE_MAJOR + 1, &ack));
  EXPECT_EQ(ack.status, static_cast<uint32_t>(kSentinelHelloRefusedMajor));
  EXPECT_TRUE(c.PeerClosed());
  for (int i = 0; i < 100 && Metric("sentinel_clients_refused_total{reason=\"major\"}") < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(Metric("sentinel_clients_refused_total{reason=\"major\"}"), 1);
}

TEST_F(DaemonTest, ClientWithAnotherUidIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch the client to uid 65534";
  Start();
  // Open the file modes up so the unprivileged client reaches accept(): the SO_PEERCRED check
  // is the second line of defence, and this test exercises it.
  chmod((dir_ + "/run").c_str(), 0755);
  chmod(dir_.c_str(), 0755);
  chmod(socket_.c_str(), 0666);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0) {
      _exit(10);
    }
    WireClient c;
    SentinelWireHelloAck ack{};
    const bool accepted = c.Connect(socket_, 5000, SENTINEL_WIRE_MAJOR, &ack);
    _exit(accepted ? 11 : 0);  // refused = the connection is closed with no ack
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  for (int i = 0; i < 100 && Metric("sentinel_clients_refused_total{reason=\"uid\"}") < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(Metric("sentinel_clients_refused_total{reason=\"uid\"}"), 1);
  EXPECT_EQ(Metric("sentinel_clients_accepted_total"), 0);
}

TEST_F(DaemonTest, SentinelctlExitCodes) {
  Start({"--straggler-learn", "4", "--straggler-evidence", "0"});
  ConnectRanks(2);
  Stream(0, 12, 1);
  WaitFor("/v1/alerts", [](const nlohmann::json& j) { return j["alerts"].size() == 1; });
  const std::string ctl = std::string(SENTINELCTL_PATH) + " --port-file " + port_file_;
  std::string out;
  EXPECT_EQ(RunCommand(ctl + " status", &out), 0) << out;
  EXPECT_NE(out.find("1 firing alert"), std::string::npos) << out;
  EXPECT_EQ(RunCommand(ctl + " ranks", &out), 0) << out;
  EXPECT_NE(out.find("LATE_P50"), std::string::npos) << out;
  EXPECT_EQ(RunCommand(ctl + " top --once", &out), 0) << out;
  EXPECT_EQ(RunCommand(ctl + " alerts", &out), 3) << out;
  EXPECT_NE(out.find("straggler"), std::string::npos);
  EXPECT_EQ(RunCommand(ctl + " trace --last 2h > " + dir_ + "/t.json", &out), 0) << out;
  std::ifstream in(dir_ + "/t.json");
  const nlohmann::json trace = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(trace.is_discarded());
  std::map<std::string, int> by_ph;
  for (const auto& e : trace["traceEvents"]) ++by_ph[e["ph"].get<std::string>()];
  EXPECT_EQ(by_ph["X"], 24);  // 24 spans
  EXPECT_EQ(by_ph["M"], 6);   // per rank: process name and sort index; one thread name each
  EXPECT_EQ(by_ph["s"], 12);  // one flow per collective: first arrival ...
  EXPECT_EQ(by_ph["f"], 12);  // ... to the last
  EXPECT_EQ(by_ph["i"], 1);   // the straggler alert on the late rank's track
  EXPECT_EQ(RunCommand(std::string(SENTINELCTL_PATH) + " --addr 127.0.0.1:1 status", &out), 1);
  EXPECT_EQ(RunCommand(ctl + " frobnicate", &out), 2);
  EXPECT_EQ(RunCommand(ctl + " ranks --bogus", &out), 2);
  EXPECT_EQ(RunCommand(ctl + " alerts --help", &out), 0);
}

// A collective two of three ranks completed and the third never reached: past --hang-timeout
// the trace marks it with an instant event on the missing rank's track, naming the collective.
// (sentinel-sim's --hang cannot show this on main: its barrier keeps every rank from completing.)
// Two processes of one node reach sentineld in any order: here all of rank 0's records are
// ingested before rank 1 announces itself (a drainer delayed on a busy host). The joins wait for
// rank 1, so its 40 ms lateness is judged (a straggler alert) rather than left as late joins.
TEST_F(DaemonTest, ARankAnnouncedAfterAnothersRecordsIsStillJudged) {
  Start({"--straggler-learn", "4", "--straggler-evidence", "0"});
  std::vector<std::unique_ptr<WireClient>> ranks;
  const int64_t base = MonoNow() - 60LL * 1000 * kMs;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::make_unique<WireClient>());
    ranks.back()->ConnectAsOwnProcess();
    ASSERT_TRUE(ranks.back()->Connect(socket_, static_cast<uint32_t>(2000 + r)));
    ASSERT_TRUE(ranks.back()->Send(Frame(kSentinelWireCommInit, MakeCommInit(kComm, r, 2))));
    ASSERT_TRUE(ranks.back()->Send(LateRankOneRecords(kComm, r, 2, base)));
    if (r == 0) {
      ASSERT_EQ(WaitForMetric("sentinel_records_received_total", 12), 12)
          << "sentineld did not ingest rank 0's records";
    }
  }
  const std::string id = "straggler-0x1234567890abcdef-r1";
  const nlohmann::json alerts = WaitFor("/v1/alerts", [&id](const nlohmann::json& j) {
    return std::any_of(j["alerts"].begin(), j["alerts"].end(),
                       [&id](const nlohmann::json& a) { return a["id"] == id; });
  });
  EXPECT_EQ(alerts["alerts"].size(), 1u) << alerts.dump();
  EXPECT_EQ(Metric("sentinel_late_joins_total"), 0);
  EXPECT_EQ(Metric("sentinel_records_received_total"), 24);
}

TEST_F(DaemonTest, TraceMarksHangOnTheMissingRanksTrack) {
  Start({"--hang-timeout", "300ms"});
  ConnectRanks(3);
  Stream(0, 5, -1);
  const int64_t now = MonoNow();
  for (int r = 0; r < 2; ++r) {
    Bytes b;
    const auto rec = MakeColl(kComm, r, 3, 5, now - 10 * kMs, kMs);
    AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
    ASSERT_TRUE(clients_[static_cast<size_t>(r)]->Send(b));
  }
  WaitFor("/v1/telemetry?window=1m",
          [](const nlohmann::json& j) { return !j["collective_hang_suspects"].empty(); });
  const nlohmann::json trace = GetJson("/v1/trace?last=10m");
  std::map<int64_t, int> rank_of_pid;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_sort_index")
      rank_of_pid[e["pid"].get<int64_t>()] = e["args"]["sort_index"].get<int>();
  }
  std::vector<std::string> marks;  // the hang alert at its start, the suspect now
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "i") continue;
    marks.push_back(e["name"]);
    EXPECT_EQ(e["s"], "t");
    EXPECT_EQ(rank_of_pid[e["pid"].get<int64_t>()], 2) << e.dump();
  }
  std::sort(marks.begin(), marks.end());
  EXPECT_THAT(marks,
              ::testing::ElementsAre("hang alert: rank 2", "hang: AllReduce #5 waits for rank 2"));
}

// Hangs through the real daemon and socket: synthetic in-flight frames as the plugin sends
// them (each rank once a second), one rank behind. The alert names it within the timeout + 5 s,
// /metrics and /v1/ranks carry the in-flight state, every payload matches its schema, and when
// the processes go the alert resolves as ended and stays listed (sentinelctl --all / --since).
TEST_F(DaemonTest, InFlightHangNamesTheCulpritAndEndsWithTheJob) {
  for (int kind = 0; kind < 3; ++kind) {
    SCOPED_TRACE(kind);  // 0 never launched, 1 kernel not started, 2 killed (gone)
    Stop();
    port_ = 0;
    RunCommand("rm -f " + port_file_);
    clients_.clear();
    Start({"--hang-timeout", "2s", "--hang-silent", "2s"});
    ConnectRanks(4);
    const int64_t since = MonoNow();
    auto send = [&](int r, uint64_t enq, uint64_t gpu) {
      SentinelWireInFlight in{};
      in.comm_hash = kComm;
      in.now_ns = MonoNow();
      in.enqueued = enq;
      in.gpu_started = gpu;
      in.completed = 6;
      in.oldest_since_ns = enq > 6 ? since : 0;
      in.oldest_seq = 2;
      in.oldest_func = kSentinelFuncAllReduce;
      in.rank = r;
      in.nranks = 4;
      in.pid = static_cast<uint32_t>(2000 + r);
      ASSERT_TRUE(clients_[static_cast<size_t>(r)]->Send(Frame(kSentinelWireInFlight, in)));
    };
    if (kind == 2) clients_[1]->Close();  // rank 1's process is killed
    const int64_t t0 = MonoNow();
    nlohmann::json alert;
    for (int i = 0; i < 70 && alert.is_null(); ++i) {
      for (int r = 0; r < 4; ++r) {
        if (r == 1 && kind == 2) continue;
        send(r, r == 1 && kind == 0 ? 6 : 7, r == 1 ? 6 : 7);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const nlohmann::json now = GetJson("/v1/alerts");
      for (const auto& a : now["alerts"]) {
        if (a["kind"] == "hang" && a["state"] == "firing") alert = a;
      }
    }
    ASSERT_FALSE(alert.is_null()) << "no hang alert: " << GetJson("/v1/alerts").dump()
                                  << GetJson("/v1/ranks").dump();
    EXPECT_LE(MonoNow() - t0, 7LL * 1000 * kMs) << "within the timeout + 5 s";
    EXPECT_EQ(alert["ranks"], nlohmann::json({1}));
    const char* role[] = {"never_launched", "launched_kernel_not_started", "gone"};
    EXPECT_EQ(alert["evidence"]["ranks"][1]["role"], role[kind]) << alert.dump();
    EXPECT_EQ(alert["evidence"]["func"], "AllReduce");
    EXPECT_EQ(alert["evidence"]["ordinal"], 7);
    if (kind == 0) {
      // The in-flight series and /v1/ranks.
      EXPECT_EQ(Metric("sentinel_inflight_enqueued{comm=\"" + collector::CommLabel(kComm) +
                       "\",uid=\"0\",rank=\"1\"}"),
                6);
      EXPECT_EQ(Metric("sentinel_inflight_gpu_started{comm=\"" + collector::CommLabel(kComm) +
                       "\",uid=\"0\",rank=\"0\"}"),
                7);
      EXPECT_GE(Metric("sentinel_inflight_oldest_age_seconds{comm=\"" +
                       collector::CommLabel(kComm) + "\",uid=\"0\",rank=\"0\"}"),
                2.0);
      const nlohmann::json ranks = GetJson("/v1/ranks");
      std::string body;
      ASSERT_EQ(Get("/v1/alerts", &body), 200);
      const std::string alerts_file = Save("hang_alerts.json", body);
      const std::string ranks_file = Save("hang_ranks.json", ranks.dump());
      std::string out;
      const int rc = Validate({"alerts=" + alerts_file, "ranks=" + ranks_file}, &out);
      if (rc != 77) {
        EXPECT_EQ(rc, 0) << out;
      }
      bool seen = false;
      for (const auto& r : ranks["ranks"]) {
        for (const auto& c : r["comms"]) {
          if (c["rank"] == 1) {
            seen = true;
            EXPECT_EQ(c["inflight"]["enqueued"], 6);
          }
        }
      }
      EXPECT_TRUE(seen);
    }
    // The job ends: every process goes, the alert resolves as ended and stays listed.
    for (auto& c : clients_) c->Close();
    const nlohmann::json after = WaitFor("/v1/alerts", [](const nlohmann::json& j) {
      return j["alerts"].size() == 1 && j["alerts"][0]["state"] == "resolved";
    });
    EXPECT_EQ(after["alerts"][0]["resolve_reason"], "ended");
    const std::string ctl = std::string(SENTINELCTL_PATH) + " --port-file " + port_file_;
    std::string out;
    EXPECT_EQ(RunCommand(ctl + " alerts", &out), 0) << out;
    EXPECT_NE(out.find("no firing alerts"), std::string::npos) << out;
    EXPECT_EQ(RunCommand(ctl + " alerts --all", &out), 0) << out;
    EXPECT_NE(out.find("(ended)"), std::string::npos) << out;
    EXPECT_EQ(RunCommand(ctl + " alerts --since 10m --json", &out), 0) << out;
    EXPECT_NE(out.find("\"hang\""), std::string::npos) << out;
    EXPECT_EQ(RunCommand(ctl + " alerts --since soon", &out), 2) << out;
  }
}

TEST_F(DaemonTest, PromtoolAcceptsMetrics) {
  if (!HaveProgram("promtool")) GTEST_SKIP() << "promtool not installed";
  Start();
  ConnectRanks(3);
  Stream(0, 12, 0);
  // Every rank's records read (sentineld reads the three connections in any order).
  WaitFor("/v1/ranks", [](const nlohmann::json& j) {
    return j["ranks"].size() == 3 &&
           std::all_of(j["ranks"].begin(), j["ranks"].end(),
                       [](const nlohmann::json& r) { return r["collectives"] == 12; });
  });
  std::string body;
  ASSERT_EQ(Get("/metrics", &body), 200);
  EXPECT_EQ(body.find("seq="), std::string::npos) << "no per-sequence labels";
  EXPECT_NE(
      body.find("sentinel_rank_last_seq{comm=\"0x1234567890abcdef\",uid=\"0\",rank=\"1\"} 11"),
      std::string::npos)
      << body;
  const std::string file = Save("metrics.txt", body);
  std::string out;
  EXPECT_EQ(RunCommand("promtool check metrics < " + file, &out), 0) << out;
}

// The node default expectation: served at /v1/expect (schema-checked), published atomically as
// `expect` next to the socket (0644), removed at SIGTERM; a bad --expect stops sentineld at start.
TEST_F(DaemonTest, NodeDefaultExpectationIsServedAndPublished) {
  const std::string expect_file = dir_ + "/run/expect";
  Start({"--expect", "net=ib affinity=pcie", "--expect-on-mismatch", "warn"});
  const nlohmann::json expect = GetJson("/v1/expect");
  EXPECT_EQ(expect["expect"], "net=ib affinity=pcie");
  EXPECT_EQ(expect["on_mismatch"], "warn");
  EXPECT_EQ(expect["source"], "node-default");
  struct stat st {};
  ASSERT_EQ(stat(expect_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  std::ifstream in(expect_file);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(content.find("\n# on_mismatch=warn\nnet=ib affinity=pcie\n"), std::string::npos)
      << content;
  std::string out;
  const int rc = Validate({"expect=" + Save("expect.json", expect.dump())}, &out);
  Stop();
  EXPECT_TRUE(WIFEXITED(exit_status_) && WEXITSTATUS(exit_status_) == 0) << exit_status_;
  EXPECT_NE(stat(expect_file.c_str(), &st), 0) << "the node default must go away with sentineld";
  if (rc == 77) GTEST_SKIP() << out;
  EXPECT_EQ(rc, 0) << out;
}

TEST_F(DaemonTest, NoNodeDefaultIs404AndNoFile) {
  Start();
  std::string body;
  EXPECT_EQ(Get("/v1/expect", &body), 404);
  struct stat st {};
  EXPECT_NE(stat((dir_ + "/run/expect").c_str(), &st), 0);
  std::string out;
  const int rc = Validate({"error=" + Save("expect404.json", body)}, &out);
  if (rc == 77) GTEST_SKIP() << out;
  EXPECT_EQ(rc, 0) << out;
}

TEST_F(DaemonTest, OutOfDescriptorsRefusesPeersWithoutSpinning) {
  max_fds_ = 24;  // sentineld needs about 10 for itself
  Start();
  std::vector<int> peers;
  for (int i = 0; i < 40; ++i) {  // more connections than descriptors left
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_.c_str());
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      peers.push_back(fd);
    } else {
      close(fd);
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double cpu0 = CpuSeconds();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double cpu1 = CpuSeconds();
  // A listen socket left readable would wake the event loop for the whole second.
  EXPECT_LT(cpu1 - cpu0, 0.3) << "sentineld spins when out of file descriptors";
  for (int fd : peers) close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string metrics;
  ASSERT_EQ(Get("/metrics", &metrics), 200);
  // --max-clients is clamped to the descriptors (one connection here): the peers past it are
  // closed and counted rather than running sentineld out of descriptors.
  EXPECT_EQ(metrics.find("sentinel_clients_refused_total{reason=\"hello_timeout\"} 0"),
            std::string::npos)
      << "peers past the clamped --max-clients are counted";
}

TEST_F(DaemonTest, HelpAndBadFlags) {
  std::string out;
  EXPECT_EQ(RunCommand(std::string(SENTINELD_PATH) + " --help", &out), 0);
  EXPECT_NE(out.find("--hang-timeout"), std::string::npos);
  EXPECT_EQ(RunCommand(std::string(SENTINELD_PATH) + " --window nope", &out), 2);
  EXPECT_EQ(RunCommand(std::string(SENTINELD_PATH) + " --expect 'net=ib gdr=maybe'", &out), 2);
  EXPECT_NE(out.find("unknown value 'maybe' for gdr"), std::string::npos) << out;
}

}  // namespace
}  // namespace sentinel::testing
