// A rogue plugin client against the REAL sentineld: a process of another uid, allowed in through
// --allow-group (the .deb set-up), speaking valid wire frames over the real socket. It must not be
// able to abort another user's job, end its ranks, put hosts on the exclusion list, take the
// daemon's memory, or pass its own word for its pid. The job's ranks are stand-ins of their own
// (root, one process each); the rogue connects from a child dropped to uid 4242.
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "tests/integration/collector/daemon_fixture.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::testing {
namespace {

constexpr int64_t kMs = 1000000;
constexpr int kRogueUid = 4242;
constexpr uint64_t kJobComm = 0x5EED000000000001ULL;

// The in-flight state of a job rank, as its plugin reports it now.
SentinelWireInFlight InFlight(uint64_t comm, int rank, int nranks, uint64_t enqueued,
                              uint64_t gpu_started, uint64_t completed, int64_t oldest_since_ns) {
  return MakeInFlight(comm, rank, nranks, enqueued, gpu_started, completed, oldest_since_ns,
                      MonoNow());
}

class RogueClientTest : public DaemonFixture {
 protected:
  // The rogue connects with the allowed group as its gid: the socket directory belongs to that
  // group (the .deb set-up), so its members, the rogue among them, reach the socket.
  void SetUp() override { SetUpForOtherUsers("to connect a rogue client as uid 4242"); }
  void TearDown() override {
    stop_ = true;
    if (reporter_.joinable()) reporter_.join();
    DaemonFixture::TearDown();
  }
  void StartDaemon(std::vector<std::string> extra = {}) { StartAllowingGroup(std::move(extra)); }
  std::unique_ptr<WireClient> Rogue(uint32_t claimed_pid = 1, const std::string& host = "") {
    return ClientAsUser(kRogueUid, claimed_pid, host);
  }
  // The job: `n` ranks of kJobComm, one process each (this test's uid).
  void StartJob(int n) {
    for (int r = 0; r < n; ++r) {
      job_.push_back(std::make_unique<WireClient>());
      job_.back()->ConnectAsOwnProcess();
      ASSERT_TRUE(job_.back()->Connect(socket_, static_cast<uint32_t>(3000 + r)));
      ASSERT_TRUE(job_.back()->Send(Frame(kSentinelWireCommInit, MakeCommInit(kJobComm, r, n))));
    }
  }
  // A healthy job as its plugins report it every 300 ms: collective #101 just launched on every
  // rank (fast collectives: one is nearly always in flight), #100 completed.
  void ReportHealthyJob() {
    reporter_ = std::thread([this] {
      while (!stop_) {
        for (size_t r = 0; r < job_.size(); ++r) {
          const auto in = InFlight(kJobComm, static_cast<int>(r), static_cast<int>(job_.size()),
                                   101, 101, 100, MonoNow() - kMs);
          (void)job_[r]->Send(Frame(kSentinelWireInFlight, in));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
      }
    });
  }
  // Bytes waiting on a job rank's socket: sentineld sends nothing unasked but hang verdicts.
  static bool GotFrame(WireClient* c) {
    uint8_t b;
    return recv(c->fd(), &b, 1, MSG_DONTWAIT | MSG_PEEK) > 0;
  }
  // A heartbeat sent after a connection's other frames: once /v1/ranks shows its budget level,
  // everything before it was processed.
  static SentinelWireHeartbeat Marker() {
    SentinelWireHeartbeat hb{};
    hb.now_ns = MonoNow();
    hb.budget_level = 1;
    return hb;
  }
  static int Marked(const nlohmann::json& ranks) {
    int n = 0;
    for (const auto& p : ranks["ranks"]) n += p["budget_level"] == 1 ? 1 : 0;
    return n;
  }
  std::string OwnHost() { return GetJson("/v1/ranks")["host"].get<std::string>(); }

  std::vector<std::unique_ptr<WireClient>> job_;
  std::thread reporter_;
  std::atomic<bool> stop_{false};
};

// A forged rank 7 in a healthy 4-rank communicator: it claims to be stuck in #101 for a
// minute, and a second fake rank 6 claims never to have launched it. Before, sentineld confirmed
// the hang within --hang-timeout and told the 4 real ranks (waiting in #101) to abort.
TEST_F(RogueClientTest, FakeStuckRankInAHealthyCommAbortsNobody) {
  StartDaemon({"--hang-timeout", "1s"});
  StartJob(4);
  ReportHealthyJob();
  WaitFor("/v1/ranks", [](const nlohmann::json& j) { return j["ranks"].size() == 4; });
  auto rogue = Rogue();
  ASSERT_TRUE(rogue->Send(Frame(kSentinelWireCommInit, MakeCommInit(kJobComm, 7, 8))));
  ASSERT_TRUE(rogue->Send(Frame(kSentinelWireCommInit, MakeCommInit(kJobComm, 6, 8))));
  const int64_t start = MonoNow();
  while (MonoNow() - start < 5000 * kMs) {  // 5 x --hang-timeout of "evidence"
    Bytes b;
    const auto stuck = InFlight(kJobComm, 7, 8, 101, 101, 100, start - 60000 * kMs);
    const auto behind = InFlight(kJobComm, 6, 8, 100, 100, 100, 0);
    AppendFrame(&b, kSentinelWireInFlight, &stuck, sizeof(stuck));
    AppendFrame(&b, kSentinelWireInFlight, &behind, sizeof(behind));
    ASSERT_TRUE(rogue->Send(b));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  for (size_t r = 0; r < job_.size(); ++r) {
    EXPECT_FALSE(GotFrame(job_[r].get())) << "real rank " << r << " was sent a hang verdict";
  }
  // Its announcements made a communicator of its own uid's (the same hash, another owner): the
  // job's communicator has no hang and only its 4 ranks.
  const nlohmann::json alerts = GetJson("/v1/alerts");
  for (const auto& a : alerts["alerts"]) {
    EXPECT_FALSE(a["kind"] == "hang" && a["uid"] == 0) << a.dump();
  }
  const nlohmann::json ranks = GetJson("/v1/ranks");
  int rogue_ranks = 0;
  for (const auto& p : ranks["ranks"]) {
    for (const auto& c : p["comms"]) {
      if (c["uid"] == 0) {
        EXPECT_LT(c["rank"].get<int>(), 4) << p.dump();
      }
      rogue_ranks += c["uid"] == kRogueUid ? 1 : 0;
    }
  }
  EXPECT_EQ(rogue_ranks, 2) << ranks.dump();
}

// A real hang (rank 2 never reaches seq 5) is firing; the rogue sends CommEnd for every rank of
// the communicator. Before, the alert resolved as "ended" and the hung job went unseen.
TEST_F(RogueClientTest, CommEndOfRanksItDoesNotOwnLeavesTheHangFiring) {
  StartDaemon({"--hang-timeout", "500ms"});
  StartJob(3);
  const int64_t now = MonoNow();
  for (int r = 0; r < 2; ++r) {
    const auto rec = MakeColl(kJobComm, r, 3, 5, now - 10 * kMs, kMs);
    ASSERT_TRUE(job_[static_cast<size_t>(r)]->Send(Frame(kSentinelWireColl, rec)));
  }
  const std::string id = "hang-0x5eed000000000001";
  auto firing = [&](const nlohmann::json& j) {
    for (const auto& a : j["alerts"]) {
      if (a["id"] == id) return a["state"] == "firing";
    }
    return false;
  };
  WaitFor("/v1/alerts", firing);
  auto rogue = Rogue();
  for (int r = 0; r < 3; ++r) {
    SentinelWireCommEnd end{};
    end.comm_hash = kJobComm;
    end.now_ns = MonoNow();
    end.rank = r;
    ASSERT_TRUE(rogue->Send(Frame(kSentinelWireCommEnd, end)));
  }
  // Let it be processed (its heartbeat shown after its CommEnds) and ticked (--tick 100ms) several
  // times. The CommEnds name ranks of the rogue's own uid's communicator of that hash: none.
  ASSERT_TRUE(rogue->Send(Frame(kSentinelWireHeartbeat, Marker())));
  WaitFor("/v1/ranks", [](const nlohmann::json& j) { return Marked(j) == 1; });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const nlohmann::json alerts = GetJson("/v1/alerts");
  EXPECT_TRUE(firing(alerts)) << "the real hang stopped firing: " << alerts.dump();
}

// A guard verdict from a peer that calls itself gpu-node-017 (and a link_degraded kind, which
// counts for exclusion): the alert, if any, names this node, and /v1/exclude never lists the
// claimed host. Before, the alert took the hello's host and gpu-node-017 was listed.
TEST_F(RogueClientTest, GuardVerdictCannotPutAClaimedHostOnTheExclusionList) {
  StartDaemon();
  auto rogue = Rogue(1, "gpu-node-017");
  constexpr uint64_t kOwn = 0xB0B0000000000001ULL;
  ASSERT_TRUE(rogue->Send(Frame(kSentinelWireCommInit, MakeCommInit(kOwn, 0, 2))));
  for (uint64_t comm : {kOwn, kJobComm, uint64_t{0x1234}}) {
    SentinelWireVerdict v =
        MakeVerdict(comm, 0, 2, kSentinelVerdictLinkDegraded, kSentinelOutcomeFail);
    std::strcpy(v.found, "link at 100 Gb/s");
    std::strcpy(v.evidence, "gpu-node-017 is slow");
    ASSERT_TRUE(rogue->Send(Frame(kSentinelWireVerdict, v)));
  }
  const std::string own = OwnHost();
  const nlohmann::json alerts =
      WaitFor("/v1/alerts", [](const nlohmann::json& j) { return !j["alerts"].empty(); });
  for (const auto& a : alerts["alerts"]) {
    EXPECT_EQ(a["host"], own) << a.dump();
    EXPECT_EQ(a["comm"], "0xb0b0000000000001") << "a verdict for a comm it does not own fired";
  }
  const nlohmann::json exclude = GetJson("/v1/exclude");
  for (const auto& h : exclude["hosts"]) EXPECT_NE(h["host"], "gpu-node-017") << exclude.dump();
  std::string metrics;
  ASSERT_EQ(Get("/metrics", &metrics), 200);
  EXPECT_EQ(metrics.find("gpu-node-017"), std::string::npos);
  const nlohmann::json ranks = GetJson("/v1/ranks");
  for (const auto& p : ranks["ranks"]) EXPECT_EQ(p["host"], own);
}

// 40,000 verdicts over 4 connections, half for the 16 communicators each announced (3 kinds each:
// 48 alert ids per connection), half for communicators it never announced: the firing alerts stay
// within the per-client bound and /v1/alerts answers.
// Before, every verdict became a firing alert (1.2 GB RSS measured then).
TEST_F(RogueClientTest, FortyThousandVerdictsStayBounded) {
  StartDaemon();
  constexpr int kConnections = 4;
  constexpr int kVerdicts = 40000;
  std::vector<std::unique_ptr<WireClient>> rogues;
  for (int c = 0; c < kConnections; ++c) rogues.push_back(Rogue(static_cast<uint32_t>(c + 1)));
  Bytes b;
  for (int c = 0; c < kConnections; ++c) {
    b.clear();
    for (int k = 0; k < 16; ++k) {
      const auto init = MakeCommInit(0xA000000000000000ULL + c * 16 + k, 0, 2);
      AppendFrame(&b, kSentinelWireCommInit, &init, sizeof(init));
    }
    ASSERT_TRUE(rogues[static_cast<size_t>(c)]->Send(b));
  }
  for (int c = 0; c < kConnections; ++c) {
    b.clear();
    for (int i = c; i < kVerdicts; i += kConnections) {
      const int k = i / kConnections;
      SentinelWireVerdict v{};
      v.comm_hash = k % 2 == 0
                        ? 0xA000000000000000ULL + static_cast<uint64_t>(c * 16 + (k / 2) % 16)
                        : 0xC000000000000000ULL + static_cast<uint64_t>(i);
      v.rank = 0;
      v.nranks = 2;
      v.kind = static_cast<uint16_t>(1 + (k / 32) % 3);
      v.outcome = kSentinelOutcomeFail;
      std::snprintf(v.evidence, sizeof(v.evidence), "verdict %d", i);
      AppendFrame(&b, kSentinelWireVerdict, &v, sizeof(v));
    }
    ASSERT_TRUE(rogues[static_cast<size_t>(c)]->Send(b));
  }
  for (int c = 0; c < kConnections; ++c) {
    ASSERT_TRUE(rogues[static_cast<size_t>(c)]->Send(Frame(kSentinelWireHeartbeat, Marker())));
  }
  WaitFor("/v1/ranks", [&](const nlohmann::json& j) { return Marked(j) == kConnections; });
  const auto t0 = std::chrono::steady_clock::now();
  std::string body;
  ASSERT_EQ(Get("/v1/alerts", &body), 200);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 10.0) << "/v1/alerts took " << secs << " s";
  const nlohmann::json alerts = nlohmann::json::parse(body);
  EXPECT_LE(alerts["alerts"].size(), static_cast<size_t>(32 * kConnections)) << body.size();
  EXPECT_GE(alerts["alerts"].size(), 1u);
  EXPECT_GE(Metric("sentinel_frames_refused_total{reason=\"alert_bound\"}"), 1);
  EXPECT_GE(Metric("sentinel_frames_refused_total{reason=\"not_owner\"}"), 1);
}

// 10,240 fake ranks from 160 connections of one uid: the uid holds at most its budget (half of
// --max-ranks), and another user's job that starts afterwards still gets every rank.
TEST_F(RogueClientTest, TenThousandFakeRanksStayWithinTheUidBudget) {
  max_fds_ = 4096;
  StartDaemon({"--max-clients", "1024"});
  constexpr int kConnections = 160;
  std::vector<std::unique_ptr<WireClient>> rogues;
  for (int c = 0; c < kConnections; ++c) {
    rogues.push_back(Rogue(static_cast<uint32_t>(c + 1)));
    Bytes b;
    for (int r = 0; r < 64; ++r) {
      const auto init = MakeCommInit(0xD000000000000000ULL + static_cast<uint64_t>(c), r, 16384);
      AppendFrame(&b, kSentinelWireCommInit, &init, sizeof(init));
    }
    const auto hb = Marker();
    AppendFrame(&b, kSentinelWireHeartbeat, &hb, sizeof(hb));
    ASSERT_TRUE(rogues.back()->Send(b));
  }
  auto rogue_ranks = [](const nlohmann::json& j) {
    size_t n = 0;
    for (const auto& p : j["ranks"]) n += p["comms"].size();
    return n;
  };
  // Every connection's frames processed (its heartbeat counted) before judging.
  const nlohmann::json ranks =
      WaitFor("/v1/ranks", [&](const nlohmann::json& j) { return Marked(j) == kConnections; });
  EXPECT_LE(rogue_ranks(ranks), 2048u) << "one uid holds more than its budget";
  EXPECT_GE(Metric("sentinel_frames_refused_total{reason=\"budget\"}"), 1);
  StartJob(4);
  const nlohmann::json after = WaitFor("/v1/ranks", [&](const nlohmann::json& j) {
    int job = 0;
    for (const auto& p : j["ranks"]) {
      for (const auto& c : p["comms"]) job += c["comm"] == "0x5eed000000000001" ? 1 : 0;
    }
    return job == 4;
  });
  (void)after;
}

// The hello's pid is shown only as claimed_pid; pid is the kernel's (the connecting child's).
TEST_F(RogueClientTest, HelloPidIsShownOnlyAsClaimed) {
  StartDaemon();
  auto rogue = Rogue(/*claimed_pid=*/1);
  ASSERT_TRUE(rogue->Send(Frame(kSentinelWireCommInit, MakeCommInit(0xE0, 0, 1))));
  const nlohmann::json ranks = WaitFor("/v1/ranks", [](const nlohmann::json& j) {
    return j["ranks"].size() == 1 && j["ranks"][0]["comms"].size() == 1;
  });
  const auto& p = ranks["ranks"][0];
  EXPECT_EQ(p["claimed_pid"], 1);
  EXPECT_NE(p["pid"], 1) << "the hello's pid replaced the kernel's";
  EXPECT_GT(p["pid"].get<int>(), 1);
  std::string out;
  const std::string file = Save("rogue_ranks.json", ranks.dump());
  const int rc = Validate({"ranks=" + file}, &out);
  if (rc != 77) {
    EXPECT_EQ(rc, 0) << out;
  }
}

}  // namespace
}  // namespace sentinel::testing
