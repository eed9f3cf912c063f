// Node exclusion through the real sentineld: a straggler streamed over the real socket puts its
// host on GET /v1/exclude (schema-checked) and on /metrics, and `sentinelctl exclude` prints it in
// each format; a policy that does not count stragglers lists nobody.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "tests/integration/collector/daemon_fixture.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::testing {
namespace {

constexpr uint64_t kComm = 0x1234567890ABCDEFULL;
constexpr int64_t kMs = 1000000;

class ExcludeDaemonTest : public DaemonFixture {
 protected:
  // Two ranks stream 12 collectives; rank 1 arrives 40 ms late every time.
  void StreamStraggler() {
    constexpr int kRanks = 2;
    for (int r = 0; r < kRanks; ++r) {
      clients_.push_back(std::make_unique<WireClient>());
      ASSERT_TRUE(clients_.back()->Connect(socket_, static_cast<uint32_t>(3000 + r)));
      ASSERT_TRUE(
          clients_.back()->Send(Frame(kSentinelWireCommInit, MakeCommInit(kComm, r, kRanks))));
    }
    const int64_t base = MonoNow() - 60LL * 1000 * kMs;
    for (int r = 0; r < kRanks; ++r) {
      Bytes b;
      for (uint64_t seq = 0; seq < 12; ++seq) {
        const int64_t start = base + static_cast<int64_t>(seq) * 100 * kMs;
        const int64_t arrival = start + (r == 1 ? 40 * kMs : 0);
        const auto rec = MakeColl(kComm, r, kRanks, seq, arrival, start + 50 * kMs - arrival);
        AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
      }
      ASSERT_TRUE(clients_[static_cast<size_t>(r)]->Send(b));
    }
  }
  std::string Ctl() const {
    return std::string(SENTINELCTL_PATH) + " --port-file " + port_file_ + " exclude";
  }
  std::vector<std::unique_ptr<WireClient>> clients_;
};

TEST_F(ExcludeDaemonTest, StragglerHostListedInApiMetricsAndEveryFormat) {
  Start({"--straggler-learn", "4", "--exclude-hold", "10m"});
  // Nothing fired yet: an empty list, and an empty slurm line.
  const nlohmann::json empty = GetJson("/v1/exclude");
  EXPECT_EQ(empty["hosts"], nlohmann::json::array());
  std::string out;
  EXPECT_EQ(RunCommand(Ctl() + " 2>/dev/null", &out), 0) << out;
  EXPECT_EQ(out, "\n");

  StreamStraggler();
  const nlohmann::json alerts =
      WaitFor("/v1/alerts", [](const nlohmann::json& j) { return j["alerts"].size() == 1; });
  ASSERT_EQ(alerts["alerts"].size(), 1u);
  ASSERT_EQ(alerts["alerts"][0]["kind"], "straggler");
  const std::string host = alerts["alerts"][0]["host"];
  const std::string id = alerts["alerts"][0]["id"];
  ASSERT_FALSE(host.empty());

  const nlohmann::json exclude = GetJson("/v1/exclude");
  ASSERT_EQ(exclude["hosts"].size(), 1u) << exclude.dump();
  const nlohmann::json& h = exclude["hosts"][0];
  EXPECT_EQ(h["host"], host);
  EXPECT_EQ(h["reasons"], nlohmann::json({"straggler"}));
  EXPECT_EQ(h["alert_ids"], nlohmann::json({id}));
  EXPECT_EQ(h["firing"], true);
  EXPECT_TRUE(h["until"].is_null());
  EXPECT_EQ(exclude["policy"]["kinds"],
            nlohmann::json({"straggler", "link_degraded", "nic_errors"}));
  EXPECT_EQ(exclude["policy"]["hold_s"], 600.0);
  EXPECT_EQ(Metric("sentinel_exclude_host{host=\"" + host + "\",reason=\"straggler\"}"), 1);

  EXPECT_EQ(RunCommand(Ctl() + " 2>/dev/null", &out), 0) << out;
  EXPECT_EQ(out, host + "\n");
  EXPECT_EQ(RunCommand(Ctl() + " --format slurm 2>/dev/null", &out), 0) << out;
  EXPECT_EQ(out, host + "\n");
  EXPECT_EQ(RunCommand(Ctl() + " --format hostfile 2>/dev/null", &out), 0) << out;
  EXPECT_EQ(out, host + "\n");
  EXPECT_EQ(RunCommand(Ctl() + " --format json 2>/dev/null", &out), 0) << out;
  const nlohmann::json printed = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(printed.is_discarded()) << out;
  EXPECT_EQ(printed, exclude);

  // Usage errors and an unreachable collector, as for the other commands.
  EXPECT_EQ(RunCommand(Ctl() + " --format csv", &out), 2) << out;
  EXPECT_NE(out.find("--format needs slurm, hostfile or json"), std::string::npos) << out;
  EXPECT_EQ(RunCommand(Ctl() + " --format", &out), 2) << out;
  EXPECT_EQ(RunCommand(std::string(SENTINELCTL_PATH) + " --addr 127.0.0.1:1 exclude", &out), 1)
      << out;
  EXPECT_EQ(RunCommand(std::string(SENTINELCTL_PATH) + " exclude --help", &out), 0) << out;
  EXPECT_NE(out.find("sbatch --exclude="), std::string::npos) << out;

  std::string val;
  const int rc = Validate({"exclude=" + Save("exclude.json", exclude.dump()),
                           "exclude=" + Save("empty.json", empty.dump())},
                          &val);
  if (rc == 77) GTEST_SKIP() << val;
  EXPECT_EQ(rc, 0) << val;
}

TEST_F(ExcludeDaemonTest, PolicyWithoutStragglersListsNobody) {
  Start({"--straggler-learn", "4", "--exclude-kinds", "nic_errors,link_degraded"});
  StreamStraggler();
  WaitFor("/v1/alerts", [](const nlohmann::json& j) { return j["alerts"].size() == 1; });
  const nlohmann::json exclude = GetJson("/v1/exclude");
  EXPECT_EQ(exclude["hosts"], nlohmann::json::array()) << exclude.dump();
  EXPECT_EQ(exclude["policy"]["kinds"], nlohmann::json({"link_degraded", "nic_errors"}));
  std::string out;
  EXPECT_EQ(RunCommand(Ctl() + " --format hostfile 2>/dev/null", &out), 0) << out;
  EXPECT_EQ(out, "");
}

TEST_F(ExcludeDaemonTest, BadPolicyIsAUsageError) {
  std::string out;
  EXPECT_EQ(RunCommand(std::string(SENTINELD_PATH) + " --exclude-kinds straggler,slow", &out), 2)
      << out;
  EXPECT_NE(out.find("unknown alert kind 'slow'"), std::string::npos) << out;
}

}  // namespace
}  // namespace sentinel::testing
