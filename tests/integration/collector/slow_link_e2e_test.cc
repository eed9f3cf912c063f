// A slow link, end to end through the REAL sentineld: two ranks of a communicator stream GPU-timed
// collectives (real socket, real CLOCK_MONOTONIC times) while the daemon polls a fake sysfs tree
// (--sysfs-root) and a child process drives the net plugin wrapping the fake net plugin. For 2 s
// the collectives' transfer after the last arrival takes 3 ms instead of 2 (every rank on time),
// port_xmit_wait of mlx5_0 port 1 climbs at 100x its pace and a connection on a slow device
// carries traffic; mlx5_1 keeps its usual pace. The finding names mlx5_0 and says "network", not
// a rank: a link_degraded alert without ranks, no straggler, /v1/telemetry slow_windows, /metrics
// and `sentinelctl slow`.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "plugin/net/net_abi.h"
#include "tests/integration/collector/daemon_fixture.h"
#include "tests/integration/collector/net_test_util.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::testing {
namespace {

constexpr int64_t kMs = 1000000;
constexpr uint64_t kComm = 0x5105;
// Phases from T0 (CLOCK_MONOTONIC): usual, slow link, usual again.
constexpr int64_t kSlowFrom = 3000 * kMs;
constexpr int64_t kSlowTo = 5000 * kMs;
constexpr int64_t kEnd = 6500 * kMs;

// The child: connections on devices 0-2 busy all along, one on device 3 (the fake's slow device,
// 2 ms per send) busy only while the link is slow. Exit code 0 = every transfer correct.
int DriveNet(const std::string& socket, int64_t t0) {
  void* ctx = nullptr;
  int rc = 0;
  SentinelNetV11* n =
      LoadSentinelOverFakeNet(socket, /*slow_dev=*/3, /*send_delay_us=*/2000, &ctx, &rc);
  if (n == nullptr) return rc;
  void* send[4] = {};
  void* recv[4] = {};
  for (int d = 0; d < 4; ++d) {
    if ((rc = ConnectOnDevice(n, ctx, d, &send[d], &recv[d])) != 0) return rc;
  }
  static char out[65536];
  static char in[65536];
  int tag = 0;
  for (int64_t now = MonoNow(); now - t0 < kEnd; now = MonoNow()) {
    const bool slow = now - t0 >= kSlowFrom && now - t0 < kSlowTo;
    for (int d = 0; d < (slow ? 4 : 3); ++d) {
      memset(out, 'a' + tag % 26, sizeof(out));
      if ((rc = TransferOnce(n, send[d], recv[d], out, in, sizeof(in), tag)) != 0) return rc;
      ++tag;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return 0;  // exit() runs the reporter's last round and flush
}

class SlowLinkE2eTest : public DaemonFixture {
 protected:
  std::string Port(const std::string& dev) {
    return dir_ + "/sys/class/infiniband/" + dev + "/ports/1";
  }
  void AddPort(const std::string& dev) {
    RunCommand("mkdir -p " + Port(dev) + "/counters " + Port(dev) + "/hw_counters");
    std::ofstream(Port(dev) + "/rate") << "400 Gb/sec (4X NDR)\n";
    std::ofstream(Port(dev) + "/state") << "4: ACTIVE\n";
    std::ofstream(Port(dev) + "/link_layer") << "InfiniBand\n";
    SetCounter(dev, "counters/port_xmit_wait", 0);
    SetCounter(dev, "counters/symbol_error", 0);
  }
  void SetCounter(const std::string& dev, const std::string& rel, uint64_t v) {
    const std::string path = Port(dev) + "/" + rel;  // write then rename: never half-read
    std::ofstream(path + ".tmp") << v << "\n";
    std::rename((path + ".tmp").c_str(), path.c_str());
  }
};

TEST_F(SlowLinkE2eTest, TheFindingNamesTheNicAndSaysNetworkNotARank) {
  AddPort("mlx5_0");
  AddPort("mlx5_1");
  Start({"--sysfs-root", dir_ + "/sys", "--nic-poll", "200ms", "--node-wait-alerts", "on"});
  WireClient ranks[2];
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(ranks[r].Connect(socket_, static_cast<uint32_t>(1000 + r)));
    // Two of the communicator's four ranks are on this node.
    SentinelWireCommInit init = MakeCommInit(kComm, r, 4);
    init.nnodes = 2;
    ASSERT_TRUE(ranks[r].Send(Frame(kSentinelWireCommInit, init)));
  }
  const int64_t t0 = MonoNow() + 300 * kMs;
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(DriveNet(socket_, t0));

  // The ranks compute 8 ms between collectives, then rank 0 arrives 20 us before rank 1 and the
  // transfer after rank 1 takes 2 ms (3 ms while the link is slow): as in a real job, a slower
  // link makes the step longer, not the compute shorter. Every 100 ms the NIC counters move.
  uint64_t xmit0 = 0;
  uint64_t xmit1 = 0;
  uint64_t seq = 1;
  int64_t next = t0;
  int64_t next_counters = t0;
  while (MonoNow() - t0 < kEnd) {
    std::this_thread::sleep_until(std::chrono::steady_clock::time_point(
        std::chrono::nanoseconds(next)));  // steady_clock is CLOCK_MONOTONIC
    const int64_t now = MonoNow();
    const bool slow = now - t0 >= kSlowFrom && now - t0 < kSlowTo;
    const int64_t transfer = slow ? 3 * kMs : 2 * kMs;
    const int64_t a1 = now - transfer;
    const int64_t a0 = a1 - 20000;
    const auto r0 = MakeColl(kComm, 0, 4, seq, a0, a1 + transfer - a0);
    const auto r1 = MakeColl(kComm, 1, 4, seq, a1, transfer);
    ASSERT_TRUE(ranks[0].Send(Frame(kSentinelWireColl, r0)));
    ASSERT_TRUE(ranks[1].Send(Frame(kSentinelWireColl, r1)));
    ++seq;
    if (now >= next_counters) {
      xmit0 += slow ? 20000 : 200;
      xmit1 += 200;
      SetCounter("mlx5_0", "counters/port_xmit_wait", xmit0);
      SetCounter("mlx5_1", "counters/port_xmit_wait", xmit1);
      next_counters += 100 * kMs;
    }
    next = now + 8 * kMs + transfer;  // the next collective ends after its compute and transfer
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);

  const std::string id = "link_degraded-slow-0x0000000000005105";
  const nlohmann::json alerts = WaitFor("/v1/alerts", [&](const nlohmann::json& j) {
    for (const auto& a : j["alerts"]) {
      if (a["id"] == id && a["state"] == "firing") return true;
    }
    return false;
  });
  nlohmann::json finding;
  for (const auto& a : alerts["alerts"]) {
    if (a["id"] == id) finding = a;
    EXPECT_NE(a["kind"], "straggler") << a.dump();  // no rank is blamed
  }
  ASSERT_FALSE(finding.is_null()) << alerts.dump();
  const std::string summary = finding["summary"];
  EXPECT_NE(summary.find("network (mlx5_0 port 1: port_xmit_wait +"), std::string::npos) << summary;
  EXPECT_NE(summary.find("so not a rank"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("mlx5_1"), std::string::npos) << summary;  // its usual pace
  EXPECT_TRUE(finding["ranks"].empty()) << finding.dump();
  EXPECT_EQ(finding["evidence"]["cause"], "network");
  EXPECT_EQ(finding["evidence"]["device"], "mlx5_0");
  EXPECT_EQ(finding["evidence"]["late_ranks"].size(), 0u);
  // About 1 ms of slower transfer per collective, next to none of waiting.
  const double n = finding["evidence"]["windows"].get<double>();
  EXPECT_GE(n, 50) << finding.dump();
  EXPECT_NEAR(finding["evidence"]["transfer_ms"].get<double>() / n, 1.0, 0.1) << finding.dump();
  EXPECT_LT(finding["evidence"]["late_rank_ms"].get<double>(),
            finding["evidence"]["transfer_ms"].get<double>() / 20);
  // The slow device's connection, against the other links over the same span.
  bool slow_link = false;
  for (const auto& l : finding["evidence"]["links"]) {
    slow_link |= l["dev_name"] == "fake3" && l["compared_with"] == "other_links";
  }
  EXPECT_TRUE(slow_link) << finding.dump();

  const nlohmann::json t = GetJson("/v1/telemetry");
  ASSERT_FALSE(t["slow_windows"]["spans"].empty()) << t["slow_windows"].dump();
  EXPECT_EQ(t["slow_windows"]["spans"][0]["cause"], "network");
  EXPECT_EQ(t["slow_windows"]["spans"][0]["nics"][0]["device"], "mlx5_0");
  std::string out;
  const int rc = Validate({"telemetry=" + Save("telemetry.json", t.dump()),
                           "alerts=" + Save("alerts.json", alerts.dump())},
                          &out);
  if (rc != 77) {
    EXPECT_EQ(rc, 0) << out;
  }
  // The communicator's owner is this process's uid (the plugin in this process announced it).
  const std::string owner = "uid=\"" + std::to_string(getuid()) + "\"";
  EXPECT_GT(Metric("sentinel_comm_slow_seconds_total{comm=\"0x0000000000005105\"," + owner +
                   ",cause=\"network\"}"),
            0.05);
  EXPECT_EQ(Metric("sentinel_comm_slow_seconds_total{comm=\"0x0000000000005105\"," + owner +
                   ",cause=\"late_rank\"}"),
            0);
  std::string ctl;
  ASSERT_EQ(RunCommand(std::string(SENTINELCTL_PATH) + " --addr " + Addr() + " slow", &ctl), 0);
  EXPECT_NE(ctl.find("network (mlx5_0 port 1: port_xmit_wait +"), std::string::npos) << ctl;
  std::printf("finding: %s\nsentinelctl slow:\n%s", summary.c_str(), ctl.c_str());
}

}  // namespace
}  // namespace sentinel::testing
