// End to end: a process loads libnccl-net-sentinel.so (wrapping the fake net plugin over loopback
// TCP), opens four connections on four devices, one of them slow, and exits; the REAL sentineld
// receives NetDevice/NetConnStats records, shows devices and links in /v1/telemetry and /metrics,
// and raises link_degraded naming both ends of the slow connection only.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "plugin/net/net_abi.h"
#include "tests/integration/collector/daemon_fixture.h"
#include "tests/integration/collector/net_test_util.h"

namespace sentinel::testing {
namespace {

// The child: what NCCL's proxy would do over four links. Exit code 0 = all transfers correct.
int DriveLinks(const std::string& socket) {
  void* ctx = nullptr;
  int rc = 0;
  SentinelNetV11* n =
      LoadSentinelOverFakeNet(socket, /*slow_dev=*/2, /*send_delay_us=*/5000, &ctx, &rc);
  if (n == nullptr) return rc;
  static char out[100000];
  static char in[100000];
  for (int d = 0; d < 4; ++d) {
    void* send = nullptr;
    void* recv = nullptr;
    if ((rc = ConnectOnDevice(n, ctx, d, &send, &recv)) != 0) return rc;
    for (int k = 0; k < 10; ++k) {
      memset(out, 'a' + k, sizeof(out));
      if ((rc = TransferOnce(n, send, recv, out, in, sizeof(in), k)) != 0) return rc;
    }
  }
  return 0;  // exit() runs the reporter's last round and flush
}

class NetE2eTest : public DaemonFixture {};

TEST_F(NetE2eTest, SlowLinkRaisesLinkDegradedNamingBothEnds) {
  Start();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) exit(DriveLinks(socket_));
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);

  nlohmann::json t = WaitFor("/v1/telemetry", [](const nlohmann::json& j) {
    return j.contains("net") && j["net"]["links"].size() == 4 && j["net"]["devices"].size() == 4;
  });
  for (const auto& l : t["net"]["links"]) {
    EXPECT_EQ(l["send"]["requests"], 10) << l.dump();
    EXPECT_EQ(l["recv"]["bytes"], 1000000) << l.dump();
  }
  EXPECT_EQ(t["net"]["devices"][0]["gdr_offered"], true);
  EXPECT_EQ(t["net"]["devices"][1]["gdr_offered"], false);

  nlohmann::json alerts = WaitFor("/v1/alerts", FiringAlertOf("link_degraded"));
  std::vector<nlohmann::json> found = AlertsOfKind(alerts, "link_degraded");
  int degraded = static_cast<int>(found.size());
  for (const auto& a : found) {
    EXPECT_EQ(a["evidence"]["send_pid"], a["evidence"]["recv_pid"]) << a.dump();  // one process
    EXPECT_EQ(a["evidence"]["size_class"], "lt256K");
    EXPECT_NE(a["summary"].get<std::string>().find(" -> "), std::string::npos);
    // The fake's 5 ms, less 0.1 % for the wrapper's ticks -> ns rate.
    EXPECT_GE(a["evidence"]["mean_latency_ns"].get<double>(), 5e6 * 0.999);
  }
  EXPECT_EQ(degraded, 1) << alerts.dump();
  std::string body;
  ASSERT_EQ(Get("/metrics", &body), 200);
  EXPECT_NE(body.find("sentinel_net_send_requests_total{src_host="), std::string::npos);
  EXPECT_NE(body.find("sentinel_net_device_info{"), std::string::npos);
}

}  // namespace
}  // namespace sentinel::testing
