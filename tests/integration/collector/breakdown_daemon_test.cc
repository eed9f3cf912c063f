// Where the time went through the real sentineld and the real sentinelctl: four ranks stream
// collectives (rank 3 arrives 2 ms after the others) and CUPTI windows over the real socket;
// /v1/ranks (schema-checked) carries each rank's parts and the verdict, /metrics the four counters
// per rank, and `sentinelctl breakdown` prints the table and names rank 3. Without CUPTI windows
// only the wait is known and the table says "n/m" for the rest.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "tests/integration/collector/daemon_fixture.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::testing {
namespace {

constexpr uint64_t kComm = 0x00000000000000b2ULL;
constexpr int kRanks = 4;
constexpr int64_t kMs = 1000000;
constexpr int64_t kSec = 1000 * kMs;

class BreakdownDaemonTest : public DaemonFixture {
 protected:
  void Connect() {
    for (int r = 0; r < kRanks; ++r) {
      auto c = std::make_unique<WireClient>();
      ASSERT_TRUE(c->Connect(socket_, static_cast<uint32_t>(7000 + r)));
      Bytes b;
      const SentinelWireCommInit init = MakeCommInit(kComm, r, kRanks);
      AppendFrame(&b, kSentinelWireCommInit, &init, sizeof(init));
      ASSERT_TRUE(c->Send(b));
      clients_.push_back(std::move(c));
    }
    // Every rank known before the first record, so that every join waits for all four.
    WaitFor("/v1/ranks", [](const nlohmann::json& j) {
      int active = 0;
      for (const auto& p : j["ranks"]) {
        for (const auto& c : p["comms"]) active += c["active"] == true ? 1 : 0;
      }
      return active == kRanks;
    });
  }
  // Second `s`: 100 collectives 10 ms apart, rank 3 arriving 2 ms late and every rank ending 1 ms
  // after it; once the daemon joined them all, each rank's CUPTI window of that second (compute
  // 700 ms, its NCCL time, idle the rest, 2 steps) when `cupti`.
  void Second(int64_t t0, int s, bool cupti) {
    const int64_t start = t0 + s * kSec;
    for (int r = 0; r < kRanks; ++r) {
      Bytes b;
      for (int k = 0; k < 100; ++k) {
        const int64_t at = start + k * 10 * kMs;
        const int64_t arrival = at + (r == 3 ? 2 * kMs : 0);
        const uint64_t seq = static_cast<uint64_t>(s * 100 + k);
        auto rec = MakeColl(kComm, r, kRanks, seq, arrival, at + 3 * kMs - arrival);
        rec.ordinal_lo = static_cast<uint32_t>(seq + 1);
        AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
      }
      ASSERT_TRUE(clients_[static_cast<size_t>(r)]->Send(b));
    }
    const double joined = 100.0 * (s + 1);
    double got = 0;
    for (int i = 0; i < 200 && got != joined; ++i) {
      got = Metric("sentinel_collectives_joined_total{comm=\"0x00000000000000b2\",uid=\"" +
                   std::to_string(getuid()) + "\",func=\"AllReduce\"}");
      if (got != joined) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ(got, joined) << "the daemon did not join second " << s;
    if (!cupti) return;
    for (int r = 0; r < kRanks; ++r) {
      const int64_t nccl = 100 * ((r == 3 ? 0 : 2 * kMs) + kMs);
      SentinelWireGpuWindow w{};
      w.start_ns = start;
      w.end_ns = start + kSec;
      w.compute_ns = 700 * kMs;
      w.nccl_ns = nccl;
      w.idle_ns = kSec - 700 * kMs - nccl;
      w.kernels = 300;
      w.nccl_kernels = 100;
      w.steps = 2;
      w.step_start_ns = start;
      w.step_end_ns = start + kSec / 2;
      Bytes b;
      AppendFrame(&b, kSentinelWireGpuWindow, &w, sizeof(w));
      ASSERT_TRUE(clients_[static_cast<size_t>(r)]->Send(b));
    }
  }
  std::string Ctl(const std::string& args) const {
    return std::string(SENTINELCTL_PATH) + " --port-file " + port_file_ + " " + args;
  }
  std::vector<std::unique_ptr<WireClient>> clients_;
};

TEST_F(BreakdownDaemonTest, TheTableNamesTheRankTheOthersWaitFor) {
  Start();
  Connect();
  if (HasFatalFailure()) return;
  const int64_t t0 = MonoNow() - 10 * kSec;
  for (int s = 0; s < 3; ++s) {
    Second(t0, s, /*cupti=*/true);
    if (HasFatalFailure()) return;
  }
  const nlohmann::json ranks = WaitFor("/v1/ranks", [](const nlohmann::json& j) {
    return j["breakdown"].size() == 1 && j["breakdown"][0]["ranks_cupti"] == kRanks;
  });
  const nlohmann::json& b = ranks["breakdown"][0];
  EXPECT_EQ(b["verdict"], "one_rank") << b.dump();
  ASSERT_EQ(b["culprits"].size(), 1u);
  EXPECT_EQ(b["culprits"][0]["rank"], 3);
  std::string out;
  EXPECT_EQ(Validate({"ranks=" + Save("ranks.json", ranks.dump())}, &out) % 77, 0) << out;

  // Four counters per rank; rank 0 waited 2 ms in 298 collectives (the first 2 are the warm-up).
  const std::string uid = std::to_string(getuid());
  const auto series = [&](int rank, const char* part) {
    return "sentinel_rank_time_seconds_total{comm=\"0x00000000000000b2\",uid=\"" + uid +
           "\",rank=\"" + std::to_string(rank) + "\",part=\"" + part + "\"}";
  };
  EXPECT_NEAR(Metric(series(0, "wait")), 0.596, 1e-9);
  EXPECT_NEAR(Metric(series(0, "compute")), 2.1, 1e-9);
  EXPECT_NEAR(Metric(series(0, "communication")), 0.304, 1e-9);
  EXPECT_NEAR(Metric(series(3, "host")), 0.6, 1e-9);
  EXPECT_NEAR(Metric(series(3, "wait")), 0.0, 1e-12);

  ASSERT_EQ(RunCommand(Ctl("breakdown"), &out), 0) << out;
  std::printf("%s", out.c_str());  // the table as a user sees it
  EXPECT_NE(out.find("WHERE THE TIME WENT"), std::string::npos) << out;
  // Rank 0: compute 350 ms of each step, 70 % of its time; wait 19.9 %.
  EXPECT_NE(out.find("350.0ms 70.0%"), std::string::npos) << out;
  EXPECT_NE(out.find("99.3ms 19.9%"), std::string::npos) << out;
  EXPECT_NE(out.find("verdict: one bad rank: rank 3 (comm 0x00000000000000b2, pid "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("lost to waiting: 14.9%"), std::string::npos) << out;

  ASSERT_EQ(RunCommand(Ctl("breakdown --json"), &out), 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["ranks"].size(), static_cast<size_t>(kRanks));
  EXPECT_EQ(j["breakdown"][0]["verdict"], "one_rank");
  EXPECT_EQ(RunCommand(Ctl("breakdown --help"), &out), 0);
  EXPECT_NE(out.find("breakdown [--json]"), std::string::npos) << out;
}

TEST_F(BreakdownDaemonTest, WithoutCuptiOnlyTheWaitIsKnown) {
  Start();
  Connect();
  if (HasFatalFailure()) return;
  const int64_t t0 = MonoNow() - 10 * kSec;
  Second(t0, 0, /*cupti=*/false);
  if (HasFatalFailure()) return;
  const std::string uid = std::to_string(getuid());
  const std::string wait0 = "sentinel_rank_time_seconds_total{comm=\"0x00000000000000b2\",uid=\"" +
                            uid + "\",rank=\"0\",part=\"wait\"}";
  EXPECT_NEAR(Metric(wait0), 0.196, 1e-9);
  std::string body;
  ASSERT_EQ(Get("/metrics", &body), 200);
  EXPECT_EQ(body.find("part=\"compute\""), std::string::npos);
  EXPECT_EQ(body.find("part=\"host\""), std::string::npos);
  std::string out;
  ASSERT_EQ(RunCommand(Ctl("breakdown"), &out), 0) << out;
  EXPECT_NE(out.find("n/m"), std::string::npos) << out;
  EXPECT_NE(out.find("(0 with CUPTI)"), std::string::npos) << out;
  const nlohmann::json ranks = GetJson("/v1/ranks");
  EXPECT_EQ(Validate({"ranks=" + Save("ranks.json", ranks.dump())}, &out) % 77, 0) << out;
}

}  // namespace
}  // namespace sentinel::testing
