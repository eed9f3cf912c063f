// Node exclusion through the real sentineld: stragglers of two users' jobs streamed over the real
// socket (one user's alone is that job's own problem: collector/aggregate/exclusion.h) put the
// host on GET /v1/exclude (schema-checked) and on /metrics, and `sentinelctl exclude` prints it in
// each format; a policy that does not count stragglers lists nobody.
#include <sys/stat.h>

#include <algorithm>
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
constexpr uint64_t kOtherUsersComm = 0x1234567890ABCDF0ULL;
constexpr int kOtherUid = 4242;

class ExcludeDaemonTest : public DaemonFixture {
 protected:
  // A second user (uid 4242) reaches the socket through --allow-group (the .deb set-up). False
  // when no group to allow exists.
  bool AllowSecondUser() { return FindGroupToAllow() && GiveSocketDirToGroup(); }
  // Two ranks of `comm` stream 12 collectives; rank 1 arrives 40 ms late every time. uid -1: this
  // test's own; else a process dropped to that uid.
  void StreamStraggler(uint64_t comm = kComm, int uid = -1) {
    StreamStragglerJob(&clients_, comm, uid);
  }
  std::string Ctl() const {
    return std::string(SENTINELCTL_PATH) + " --port-file " + port_file_ + " exclude";
  }
  std::vector<std::unique_ptr<WireClient>> clients_;
};

TEST_F(ExcludeDaemonTest, StragglerHostListedInApiMetricsAndEveryFormat) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "needs root: a straggler lists the node only when two users' jobs show one, "
                    "and the second user is uid 4242";
  }
  if (!AllowSecondUser()) GTEST_SKIP() << "no group to allow (users, nogroup, daemon)";
  Start({"--straggler-learn", "4", "--straggler-evidence", "0", "--exclude-hold", "10m",
         "--allow-group", group_});
  // Nothing fired yet: an empty list, and an empty slurm line.
  const nlohmann::json empty = GetJson("/v1/exclude");
  EXPECT_EQ(empty["hosts"], nlohmann::json::array());
  std::string out;
  EXPECT_EQ(RunCommand(Ctl() + " 2>/dev/null", &out), 0) << out;
  EXPECT_EQ(out, "\n");

  StreamStraggler();
  StreamStraggler(kOtherUsersComm, kOtherUid);
  const nlohmann::json alerts =
      WaitFor("/v1/alerts", [](const nlohmann::json& j) { return j["alerts"].size() == 2; });
  ASSERT_EQ(alerts["alerts"].size(), 2u);
  std::vector<std::string> ids;
  for (const auto& a : alerts["alerts"]) {
    ASSERT_EQ(a["kind"], "straggler");
    ids.push_back(a["id"]);
  }
  std::sort(ids.begin(), ids.end());
  const std::string host = alerts["alerts"][0]["host"];
  ASSERT_FALSE(host.empty());

  const nlohmann::json exclude = GetJson("/v1/exclude");
  ASSERT_EQ(exclude["hosts"].size(), 1u) << exclude.dump();
  const nlohmann::json& h = exclude["hosts"][0];
  EXPECT_EQ(h["host"], host);
  EXPECT_EQ(h["reasons"], nlohmann::json({"straggler"}));
  EXPECT_EQ(h["alert_ids"], nlohmann::json(ids));
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
  // Two users' stragglers where a second user can connect (root), which would list the node
  // under a policy that counts stragglers.
  const bool two = geteuid() == 0 && AllowSecondUser();
  std::vector<std::string> flags = {"--straggler-learn",    "4",
                                    "--straggler-evidence", "0",
                                    "--exclude-kinds",      "nic_errors,link_degraded"};
  if (two) flags.insert(flags.end(), {"--allow-group", group_});
  Start(flags);
  StreamStraggler();
  if (two) StreamStraggler(kOtherUsersComm, kOtherUid);
  const size_t n = two ? 2 : 1;
  WaitFor("/v1/alerts", [n](const nlohmann::json& j) { return j["alerts"].size() == n; });
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
