// Job details belong to the job's owner, against the REAL sentineld on a shared node (the .deb
// set-up: the daemon as root, jobs of users in --allow-group). A victim's 2-rank job runs as uid
// 4242; another local user (uid 4243) asking the HTTP API over loopback gets none of its
// communicator hashes, ranks, trace or alerts from /v1/ranks, /v1/telemetry, /v1/trace or
// /v1/alerts, while the owner (sentinelctl run as 4242) and root see them. /healthz and /metrics
// answer everyone.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "collector/aggregate/snapshot.h"
#include "tests/integration/collector/cross_uid_util.h"
#include "tests/integration/collector/daemon_fixture.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::testing {
namespace {

constexpr uint64_t kVictimComm = 0x0DE7A115000000A1ULL;

class ApiOwnerTest : public DaemonFixture {
 protected:
  void SetUp() override {
    SetUpForOtherUsers("to run a job as uid 4242 and ask as uid 4243");
    if (IsSkipped() || HasFatalFailure()) return;
    if (Shell("command -v curl >/dev/null") != 0) GTEST_SKIP() << "no curl";
    // Answers written by the other users' shells land here.
    out_ = dir_ + "/out";
    ASSERT_EQ(mkdir(out_.c_str(), 0777), 0);
    ASSERT_EQ(chmod(out_.c_str(), 0777), 0);
  }
  // `path`'s answer to `uid` (curl run as that uid), or "" when it failed.
  std::string GetAs(uid_t uid, const std::string& path) {
    const std::string file = out_ + "/answer-" + std::to_string(uid);
    const std::string url = "http://" + Addr() + path;
    if (ShellAs(uid, uid, "curl -sf --max-time 20 -o " + file + " \"" + url + "\"") != 0) return "";
    return ReadAll(file);
  }
  // `sentinelctl ARGS` run as `uid`: its output.
  std::string CtlAs(uid_t uid, const std::string& args) {
    const std::string file = out_ + "/ctl-" + std::to_string(uid);
    (void)ShellAs(
        uid, uid,
        std::string(SENTINELCTL_PATH) + " --addr " + Addr() + " " + args + " >" + file + " 2>&1");
    return ReadAll(file);
  }

  std::string out_;
};

TEST_F(ApiOwnerTest, AnotherUserGetsNoneOfTheVictimsJobDetails) {
  StartAllowingGroup();
  std::vector<std::unique_ptr<WireClient>> victim;
  StreamStragglerJob(&victim, kVictimComm, static_cast<int>(kVictim));
  const std::string label = collector::CommLabel(kVictimComm);
  // Root sees the job once its records were taken in.
  std::string body;
  for (int i = 0; i < 200 && body.find(label) == std::string::npos; ++i) {
    ASSERT_EQ(Get("/v1/ranks", &body), 200);
    if (body.find(label) == std::string::npos) usleep(50000);
  }
  ASSERT_NE(body.find(label), std::string::npos) << "root does not see the job: " << body;
  ASSERT_EQ(Get("/v1/trace?last=1h", &body), 200);
  EXPECT_NE(body.find(label), std::string::npos) << "root's trace";

  // The other user: answered, but with none of the victim's details.
  for (const char* path : {"/v1/ranks", "/v1/telemetry", "/v1/trace?last=1h", "/v1/alerts"}) {
    const std::string answer = GetAs(kAttacker, path);
    ASSERT_FALSE(answer.empty()) << path << ": no answer to uid " << kAttacker;
    EXPECT_EQ(answer.find(label), std::string::npos)
        << path << " shows the victim's job: " << answer.substr(0, 2000);
  }
  const nlohmann::json ranks = nlohmann::json::parse(GetAs(kAttacker, "/v1/ranks"));
  EXPECT_TRUE(ranks["ranks"].empty()) << ranks.dump();
  // Node-level answers are everyone's.
  EXPECT_FALSE(GetAs(kAttacker, "/healthz").empty());
  EXPECT_FALSE(GetAs(kAttacker, "/metrics").empty());

  // The owner, through sentinelctl on the same host, sees its job's ranks; the other user none.
  const std::string own = CtlAs(kVictim, "ranks");
  EXPECT_NE(own.find("RANK"), std::string::npos) << own;
  EXPECT_GE(std::count(own.begin(), own.end(), '\n'), 3) << "the owner's 2 ranks: " << own;
  const std::string other = CtlAs(kAttacker, "ranks");
  EXPECT_LE(std::count(other.begin(), other.end(), '\n'), 1) << "uid 4243 sees ranks: " << other;
  const nlohmann::json own_ranks = nlohmann::json::parse(GetAs(kVictim, "/v1/ranks"));
  EXPECT_NE(own_ranks.dump().find(label), std::string::npos) << own_ranks.dump();
}

}  // namespace
}  // namespace sentinel::testing
