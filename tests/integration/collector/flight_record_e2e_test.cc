// A flight record per hang end to end: two real sentinelds on this machine stand for two nodes
// (their own sockets, HTTP ports, --node names and record-log directories), and a simulated job of
// 4 ranks through the fake NCCL and the plugin streams ranks 0-1 to node A's and ranks 2-3 to node
// B's. Rank 3 issues AllGather where the others issue AllReduce (the fake NCCL hangs as NCCL
// does). Each daemon confirms a hang of its own, writes a flight record beside its record log and
// names the file in its hang alert; `sentinelctl record` writes one more on demand for the job's
// user (never for another user); and `sentinelctl hang-report` on the two nodes' files names the
// mismatch with both sides, which neither node sees whole.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#include "tests/integration/collector/cross_uid_util.h"
#include "tests/integration/collector/daemon_api.h"
#include "tests/integration/fake_nccl/test_util.h"

namespace sentinel::testing {
namespace {

constexpr int kRanks = 4;

// One sentineld standing for one node.
class Node {
 public:
  explicit Node(const std::string& name) : name_(name), dir_(MakeTempDir()) {
    daemon_ = StartProgram({SENTINEL_SENTINELD_PATH, "--socket", socket(), "--listen",
                            "127.0.0.1:0", "--port-file", dir_ + "/port", "--node", name,
                            "--hang-timeout", "2s", "--record-log", dir_ + "/records.jsonl"},
                           {}, 180);
  }
  ~Node() {
    Stop();
    RunProgram({"/bin/rm", "-rf", dir_}, {});
  }
  std::string Stop() {
    if (daemon_.pid > 0) {
      kill(daemon_.pid, SIGTERM);
      log_ = WaitProgram(daemon_).output;
      daemon_.pid = -1;
    }
    return log_;
  }
  int port() const { return std::atoi(ReadFile(dir_ + "/port").c_str()); }
  std::string socket() const { return dir_ + "/s.sock"; }
  const std::string& dir() const { return dir_; }
  // The firing hang alert's flight record path, "" while there is none.
  std::string HangRecord() const {
    const nlohmann::json alerts = GetDaemonJson(port(), "/v1/alerts");
    if (!alerts.is_object() || !alerts.contains("alerts")) return "";
    for (const auto& a : alerts["alerts"]) {
      if (a.value("kind", "") != "hang" || a.value("state", "") != "firing") continue;
      const nlohmann::json& e = a["evidence"];
      if (e.is_object() && e.contains("flight_record") && e["flight_record"].is_string()) {
        return e["flight_record"].get<std::string>();
      }
    }
    return "";
  }

 private:
  std::string name_;
  std::string dir_;
  Started daemon_;
  std::string log_;
};

bool IsFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

class FlightRecordE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(SENTINEL_SIM_PATH).empty()) GTEST_SKIP() << "sentinel-sim is not built";
    a_ = std::make_unique<Node>("node-a");
    b_ = std::make_unique<Node>("node-b");
    for (Node* n : {a_.get(), b_.get()}) {
      ASSERT_TRUE(Eventually([n] { return n->port() > 0; }, 10000)) << "sentineld did not start";
    }
  }
  std::unique_ptr<Node> a_;
  std::unique_ptr<Node> b_;
};

TEST_F(FlightRecordE2eTest, EachNodeWritesARecordAndTheMergeNamesTheMismatch) {
  const char* asan = getenv("ASAN_OPTIONS");
  const std::string asan_options = std::string(asan != nullptr ? asan : "") +
                                   (asan != nullptr && *asan != '\0' ? ":" : "") +
                                   "verify_asan_link_order=0";
  Started sim =
      StartProgram({SENTINEL_SIM_PATH, "--ranks", std::to_string(kRanks), "--nodes", "2",
                    "--node-sockets", a_->socket() + "," + b_->socket(), "--steps", "20",
                    "--compute-ms", "2", "--bytes", "64K", "--timeout-s", "40", "--plugin",
                    SENTINEL_PLUGIN_PATH, "--mismatch", "rank=3,at=3,kind=func"},
                   {{"LD_PRELOAD", SENTINEL_PLUGIN_PATH}, {"ASAN_OPTIONS", asan_options}}, 120);
  // Both nodes confirm a hang (within the 2 s timeout and a tick of it; generous for a loaded
  // machine) and name a file that is then written.
  std::string record_a;
  std::string record_b;
  const bool both = Eventually(
      [&] {
        if (record_a.empty()) record_a = a_->HangRecord();
        if (record_b.empty()) record_b = b_->HangRecord();
        return !record_a.empty() && !record_b.empty() && IsFile(record_a) && IsFile(record_b);
      },
      30000);
  // On demand, while the job hangs: for its own user (root here), and never for another user.
  RunResult own = RunProgram(
      {SENTINELCTL_PATH, "--addr", "127.0.0.1:" + std::to_string(a_->port()), "record"}, {});
  int other_user = -1;
  const std::string other_out = "/tmp/flight_e2e_other_" + std::to_string(getpid());
  if (geteuid() == 0) {
    other_user =
        ShellAs(kAttacker, kAttacker,
                std::string(SENTINELCTL_PATH) + " --addr 127.0.0.1:" + std::to_string(a_->port()) +
                    " record >" + other_out + " 2>&1");
  }
  kill(-sim.pid, SIGKILL);
  kill(sim.pid, SIGKILL);
  const RunResult job = WaitProgram(sim);
  ASSERT_TRUE(both) << "records: '" << record_a << "' '" << record_b << "'\n"
                    << job.output << "\nnode A:\n"
                    << a_->Stop() << "\nnode B:\n"
                    << b_->Stop();
  EXPECT_EQ(record_a.rfind(a_->dir() + "/flight-node-a-", 0), 0u) << record_a;
  EXPECT_EQ(record_b.rfind(b_->dir() + "/flight-node-b-", 0), 0u) << record_b;

  EXPECT_EQ(own.exit_code, 0) << own.output;
  const std::string on_demand = own.output.substr(0, own.output.find('\n'));
  EXPECT_EQ(on_demand.rfind(a_->dir() + "/flight-node-a-", 0), 0u) << own.output;
  EXPECT_NE(on_demand.find("-on-demand-uid"), std::string::npos) << own.output;
  EXPECT_TRUE(IsFile(on_demand)) << on_demand;
  if (other_user >= 0) {  // root only: the other user is uid 4243 through setpriv
    const std::string said = ReadFile(other_out);
    unlink(other_out.c_str());
    EXPECT_EQ(other_user, 1) << said;
    EXPECT_NE(said.find("answered 404"), std::string::npos) << said;
    EXPECT_NE(said.find("no flight history of your communicator"), std::string::npos) << said;
  }

  // The merge of the two nodes' hang records: neither node saw the mismatch whole (node A only
  // waits for node B; node B sees one against one), the merge names rank 3 against the 3 others.
  const RunResult report = RunProgram({SENTINELCTL_PATH, "hang-report", record_a, record_b}, {});
  EXPECT_EQ(report.exit_code, 0) << report.output;
  EXPECT_NE(report.output.find("rank 3 issued AllGather"), std::string::npos) << report.output;
  EXPECT_NE(report.output.find("the other 3 ranks issued AllReduce"), std::string::npos)
      << report.output;
  const RunResult json =
      RunProgram({SENTINELCTL_PATH, "hang-report", "--json", record_a, record_b}, {});
  EXPECT_EQ(json.exit_code, 0) << json.output;
  const nlohmann::json j = nlohmann::json::parse(json.output, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json.output;
  ASSERT_EQ(j["jobs"].size(), 1u) << json.output;
  EXPECT_EQ(j["jobs"][0]["verdict"]["kind"], "mismatch") << json.output;
  ASSERT_FALSE(j["jobs"][0]["mismatches"].empty()) << json.output;
  const nlohmann::json& sides = j["jobs"][0]["mismatches"][0]["sides"];
  ASSERT_EQ(sides.size(), 2u) << json.output;
  EXPECT_EQ(sides[0]["ranks"], nlohmann::json::array({0, 1, 2})) << json.output;  // most first
  EXPECT_EQ(sides[1]["ranks"], nlohmann::json::array({3})) << json.output;

  // Each daemon logged the record it wrote.
  const std::string log_a = a_->Stop();
  const std::string log_b = b_->Stop();
  EXPECT_NE(log_a.find("flight record of the hang on comm"), std::string::npos) << log_a;
  EXPECT_NE(log_b.find("flight record of the hang on comm"), std::string::npos) << log_b;
  EXPECT_NE(log_b.find("mismatched collectives"), std::string::npos) << log_b;
}

}  // namespace
}  // namespace sentinel::testing
