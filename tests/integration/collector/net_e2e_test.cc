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
  setenv("SENTINEL_SOCKET", socket.c_str(), 1);
  setenv("SENTINEL_NET_WRAP", FAKE_NET_SO, 1);
  setenv("SENTINEL_NET_REPORT_MS", "50", 1);
  setenv("FAKE_NET_NDEV", "4", 1);
  setenv("FAKE_NET_SLOW_DEV", "2", 1);
  setenv("FAKE_NET_SEND_DELAY_US", "5000", 1);
  void* dl = dlopen(SENTINEL_NET_SO, RTLD_NOW | RTLD_LOCAL);
  if (dl == nullptr) return 10;
  auto* n = static_cast<SentinelNetV11*>(dlsym(dl, "ncclNetPlugin_v11"));
  void* ctx = nullptr;
  if (n->init(&ctx, 7, nullptr, nullptr, nullptr) != 0) return 11;
  int ndev = 0;
  if (n->devices(&ndev) != 0 || ndev != 4) return 12;
  SentinelNetPropertiesV11 p;
  for (int d = 0; d < ndev; ++d) {
    if (n->get_properties(d, &p) != 0) return 13;
  }
  static char out[100000];
  static char in[100000];
  for (int d = 0; d < ndev; ++d) {
    char handle[SENTINEL_NET_HANDLE_MAXSIZE];
    void* listen = nullptr;
    void* send = nullptr;
    void* recv = nullptr;
    if (n->listen(ctx, d, handle, &listen) != 0) return 14;
    for (int i = 0; i < 100000 && (send == nullptr || recv == nullptr); ++i) {
      if (send == nullptr && n->connect(ctx, d, handle, &send, nullptr) != 0) return 15;
      if (recv == nullptr && n->accept(listen, &recv, nullptr) != 0) return 16;
    }
    if (send == nullptr || recv == nullptr) return 17;
    for (int k = 0; k < 10; ++k) {
      memset(out, 'a' + k, sizeof(out));
      void* sreq = nullptr;
      void* rreq = nullptr;
      void* data[1] = {in};
      size_t sizes[1] = {sizeof(in)};
      int tags[1] = {k};
      if (n->isend(send, out, sizeof(out), k, nullptr, nullptr, &sreq) != 0) return 18;
      if (n->irecv(recv, 1, data, sizes, tags, nullptr, nullptr, &rreq) != 0) return 19;
      int sdone = 0;
      int rdone = 0;
      while (!sdone || !rdone) {
        if (!sdone && n->test(sreq, &sdone, nullptr) != 0) return 20;
        if (!rdone && n->test(rreq, &rdone, nullptr) != 0) return 21;
      }
      if (memcmp(in, out, sizeof(in)) != 0) return 22;
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
