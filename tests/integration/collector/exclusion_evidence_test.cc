// Node exclusion rests on sentineld's own evidence (collector/aggregate/exclusion.h), against the
// REAL sentineld: users allowed on the socket through --allow-group (the .deb set-up) connect from
// child processes dropped to uids 4242 and 4243. One user's straggler or link_degraded guard
// verdict about their own communicator still fires and is shown, but never puts this node on
// /v1/exclude, sentinel_exclude_host or `sentinelctl exclude`; two users' jobs seeing trouble
// corroborate each other; a guard verdict counts when it names a port sentineld's own sysfs poll
// finds degraded. Skips unless run as root.
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "tests/integration/collector/daemon_fixture.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::testing {
namespace {

constexpr int kUserA = 4242;
constexpr int kUserB = 4243;

class ExclusionEvidenceTest : public DaemonFixture {
 protected:
  void SetUp() override { SetUpForOtherUsers("to connect clients as uids 4242 and 4243"); }
  void StartDaemon(std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--straggler-learn", "4", "--straggler-evidence", "0"});
    StartAllowingGroup(std::move(extra));
  }
  std::unique_ptr<WireClient> Client(int uid, uint32_t claimed_pid) {
    return ClientAsUser(uid, claimed_pid, "gpu-node-017");
  }
  // A 2-rank job of `uid` on `comm` (one process per rank) whose rank 1 arrives 40 ms late in each
  // of 12 collectives: a straggler alert about that user's own communicator.
  void StragglerJob(int uid, uint64_t comm) {
    StreamStragglerJob(&clients_, comm, uid, "gpu-node-017");
  }
  // A guard verdict (link_degraded, fail) from a client of `uid` about its own communicator.
  void LinkVerdict(int uid, uint64_t comm, const std::string& found) {
    clients_.push_back(Client(uid, 4000));
    WireClient* c = clients_.back().get();
    ASSERT_TRUE(c->Send(Frame(kSentinelWireCommInit, MakeCommInit(comm, 0, 2))));
    SentinelWireVerdict v =
        MakeVerdict(comm, 0, 2, kSentinelVerdictLinkDegraded, kSentinelOutcomeFail);
    std::snprintf(v.expected, sizeof(v.expected), "%s", "link_gbps>=800");
    std::snprintf(v.found, sizeof(v.found), "%s", found.c_str());
    ASSERT_TRUE(c->Send(Frame(kSentinelWireVerdict, v)));
  }
  // Waits until every id in `ids` fires.
  nlohmann::json WaitFiring(const std::vector<std::string>& ids) {
    return WaitFor("/v1/alerts", [&](const nlohmann::json& j) {
      size_t n = 0;
      for (const auto& a : j["alerts"]) {
        for (const auto& id : ids) n += a["id"] == id && a["state"] == "firing" ? 1 : 0;
      }
      return n == ids.size();
    });
  }
  std::string OwnHost() { return GetJson("/v1/ranks")["host"].get<std::string>(); }
  std::string CtlExclude() {
    std::string out;
    EXPECT_EQ(RunCommand(std::string(SENTINELCTL_PATH) + " --port-file " + port_file_ +
                             " exclude --format hostfile 2>/dev/null",
                         &out),
              0)
        << out;
    return out;
  }
  // The fake sysfs port <dir>/sys/class/infiniband/<dev>/ports/1.
  void SetPort(const std::string& dev, const std::string& rate, const std::string& state) {
    const std::string port = dir_ + "/sys/class/infiniband/" + dev + "/ports/1";
    RunCommand("mkdir -p " + port + "/counters " + port + "/hw_counters");
    for (const auto& [name, value] : {std::pair<std::string, std::string>{"rate", rate},
                                      {"state", state},
                                      {"link_layer", "InfiniBand"}}) {
      std::ofstream(port + "/" + name + ".tmp") << value << "\n";
      std::rename((port + "/" + name + ".tmp").c_str(), (port + "/" + name).c_str());
    }
  }

  std::vector<std::unique_ptr<WireClient>> clients_;
};

// The remaining path to a forged exclusion: one allowed user makes their own rank a straggler and
// sends a link_degraded guard verdict about their own communicator. Both alerts fire and are shown
// (naming this node); the node stays off the exclusion list. Before, /v1/exclude,
// sentinel_exclude_host and `sentinelctl exclude` all listed this node for them.
TEST_F(ExclusionEvidenceTest, OneUsersStragglerOrLinkVerdictNeverExcludesThisNode) {
  StartDaemon();
  StragglerJob(kUserA, 0xA11CE00000000001ULL);
  LinkVerdict(kUserA, 0xA11CE00000000002ULL, "link rate below 800 Gb/s: mlx5_0:1 at 400 Gb/s");
  const nlohmann::json alerts =
      WaitFiring({"straggler-0xa11ce00000000001-r1", "link_degraded-0xa11ce00000000002"});
  const std::string own = OwnHost();
  for (const auto& a : alerts["alerts"]) EXPECT_EQ(a["host"], own) << a.dump();
  const nlohmann::json exclude = GetJson("/v1/exclude");
  EXPECT_EQ(exclude["hosts"], nlohmann::json::array()) << exclude.dump();
  std::string metrics;
  ASSERT_EQ(Get("/metrics", &metrics), 200);
  EXPECT_EQ(metrics.find("sentinel_exclude_host{"), std::string::npos) << metrics;
  EXPECT_EQ(CtlExclude(), "");
  // A second job of the same user is no independent witness.
  StragglerJob(kUserA, 0xA11CE00000000003ULL);
  WaitFiring({"straggler-0xa11ce00000000003-r1"});
  EXPECT_EQ(GetJson("/v1/exclude")["hosts"], nlohmann::json::array());
}

// Two users' jobs both seeing a straggler on this node corroborate each other: the node is listed
// with both alerts (and only under its own name, not the hellos' gpu-node-017).
TEST_F(ExclusionEvidenceTest, TwoUsersStragglersListThisNode) {
  StartDaemon();
  StragglerJob(kUserA, 0xA11CE00000000001ULL);
  WaitFiring({"straggler-0xa11ce00000000001-r1"});
  EXPECT_EQ(GetJson("/v1/exclude")["hosts"], nlohmann::json::array());
  StragglerJob(kUserB, 0xB0B0000000000001ULL);
  WaitFiring({"straggler-0xb0b0000000000001-r1"});
  const nlohmann::json exclude = GetJson("/v1/exclude");
  ASSERT_EQ(exclude["hosts"].size(), 1u) << exclude.dump();
  EXPECT_EQ(exclude["hosts"][0]["host"], OwnHost());
  EXPECT_EQ(exclude["hosts"][0]["reasons"], nlohmann::json({"straggler"}));
  EXPECT_EQ(exclude["hosts"][0]["alert_ids"],
            nlohmann::json({"straggler-0xa11ce00000000001-r1", "straggler-0xb0b0000000000001-r1"}));
  EXPECT_EQ(CtlExclude(), OwnHost() + "\n");
}

// A guard verdict is re-checked against sentineld's own sysfs poll: naming a port that is merely
// down (an unused, uncabled port looks the same), or a healthy port the job's own threshold calls
// slow, lists nobody; naming a port sentineld itself finds slower than the node's fastest lists
// the node, the verdict beside sentineld's own alert. Before, every verdict listed the node.
TEST_F(ExclusionEvidenceTest, LinkVerdictCountsOnlyForAPortSentineldFindsDegraded) {
  SetPort("mlx5_0", "400 Gb/sec (4X NDR)", "4: ACTIVE");
  SetPort("mlx5_1", "400 Gb/sec (4X NDR)", "4: ACTIVE");
  SetPort("mlx5_2", "400 Gb/sec (4X NDR)", "1: DOWN");
  StartDaemon({"--sysfs-root", dir_ + "/sys", "--nic-poll", "200ms"});
  const std::string rate = "sentinel_nic_port_rate_gbps{device=\"mlx5_1\",port=\"1\"}";
  for (int i = 0; i < 200 && Metric(rate) != 400; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(Metric(rate), 400) << "sentineld never polled the fake sysfs";
  LinkVerdict(kUserA, 0xA11CE00000000001ULL,
              "NIC port(s) not ACTIVE/LinkUp: mlx5_2:1 state '1: DOWN', rate '400 Gb/sec'");
  LinkVerdict(kUserA, 0xA11CE00000000002ULL, "link rate below 800 Gb/s: mlx5_0:1 at 400 Gb/s");
  WaitFiring({"link_degraded-0xa11ce00000000001", "link_degraded-0xa11ce00000000002"});
  EXPECT_EQ(GetJson("/v1/exclude")["hosts"], nlohmann::json::array());

  SetPort("mlx5_1", "200 Gb/sec (4X HDR)", "4: ACTIVE");  // sentineld sees it trained down
  WaitFiring({"link_degraded-nic-mlx5_1-1"});
  LinkVerdict(kUserA, 0xA11CE00000000003ULL, "link rate below 400 Gb/s: mlx5_1:1 at 200 Gb/s");
  WaitFiring({"link_degraded-0xa11ce00000000003"});
  const nlohmann::json exclude = GetJson("/v1/exclude");
  ASSERT_EQ(exclude["hosts"].size(), 1u) << exclude.dump();
  EXPECT_EQ(exclude["hosts"][0]["host"], OwnHost());
  EXPECT_EQ(exclude["hosts"][0]["alert_ids"],
            nlohmann::json({"link_degraded-0xa11ce00000000003", "link_degraded-nic-mlx5_1-1"}))
      << exclude.dump();
}

}  // namespace
}  // namespace sentinel::testing
