// NIC counters on fake sysfs trees in a temp dir: reading, deltas, resets, missing files, window
// rates, and the nic_errors / link_degraded alerts through the aggregator.
#include "collector/nic/nic_counters.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "collector/aggregate/aggregator.h"
#include "collector/export/api_json.h"
#include "collector/export/prometheus_text.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::testing {
namespace {

using collector::NicPortReading;
using collector::NicState;

constexpr int64_t kSec = 1000000000;

class FakeSysfs {
 public:
  FakeSysfs() {
    char tmpl[] = "/tmp/snic-XXXXXX";
    root_ = mkdtemp(tmpl) != nullptr ? tmpl : "";
  }
  ~FakeSysfs() { std::system(("rm -rf " + root_).c_str()); }
  const std::string& root() const { return root_; }
  std::string PortDir(const std::string& dev, int port) const {
    return root_ + "/class/infiniband/" + dev + "/ports/" + std::to_string(port);
  }
  void AddPort(const std::string& dev, int port, const std::string& rate, bool active = true,
               const std::string& layer = "InfiniBand") {
    const std::string d = PortDir(dev, port);
    std::system(("mkdir -p " + d + "/counters " + d + "/hw_counters").c_str());
    Write(d + "/rate", rate);
    Write(d + "/state", active ? "4: ACTIVE" : "1: DOWN");
    Write(d + "/link_layer", layer);
  }
  void Set(const std::string& dev, int port, const std::string& counter, uint64_t value) {
    const bool hw = counter == "out_of_sequence" || counter == "packet_seq_err" ||
                    counter == "local_ack_timeout_err" || counter == "np_cnp_sent" ||
                    counter == "rp_cnp_handled" || counter == "np_ecn_marked_roce_packets";
    Write(PortDir(dev, port) + (hw ? "/hw_counters/" : "/counters/") + counter,
          std::to_string(value));
  }
  void Remove(const std::string& dev, int port, const std::string& rel) {
    std::remove((PortDir(dev, port) + "/" + rel).c_str());
  }

 private:
  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path) << text << "\n";
  }
  std::string root_;
};

uint64_t Delta(const NicState& s, const std::string& dev, int port, int counter) {
  return s.ports.at({dev, port}).delta[static_cast<size_t>(counter)];
}
uint64_t Total(const NicState& s, const std::string& dev, int port, int counter) {
  return s.ports.at({dev, port}).total[static_cast<size_t>(counter)];
}

TEST(NicCountersTest, ParsesRates) {
  EXPECT_DOUBLE_EQ(collector::ParseNicRate("400 Gb/sec (4X NDR)"), 400);
  EXPECT_DOUBLE_EQ(collector::ParseNicRate("2.5 Gb/sec (1X SDR)"), 2.5);
  EXPECT_DOUBLE_EQ(collector::ParseNicRate("garbage"), 0);
  EXPECT_DOUBLE_EQ(collector::ParseNicRate(""), 0);
}

TEST(NicCountersTest, NoSysfsMeansNoPorts) {
  EXPECT_TRUE(collector::ReadNicPorts("/nonexistent-sysfs-root").empty());
}

TEST(NicCountersTest, ReadsPortsAndMissingFilesAreAbsent) {
  FakeSysfs fs;
  fs.AddPort("mlx5_0", 1, "400 Gb/sec (4X NDR)");
  fs.Set("mlx5_0", 1, "symbol_error", 3);
  fs.Set("mlx5_0", 1, "out_of_sequence", 7);
  fs.Set("mlx5_0", 1, "port_rcv_errors", 0);
  std::vector<NicPortReading> r = collector::ReadNicPorts(fs.root());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].device, "mlx5_0");
  EXPECT_EQ(r[0].port, 1);
  EXPECT_TRUE(r[0].active);
  EXPECT_EQ(r[0].link_layer, "InfiniBand");
  EXPECT_DOUBLE_EQ(r[0].rate_gbps, 400);
  EXPECT_EQ(r[0].value[collector::kNicSymbolError], 3u);
  EXPECT_EQ(r[0].value[collector::kNicOutOfSequence], 7u);
  EXPECT_NE(r[0].present & (1u << collector::kNicPortRcvErrors), 0u);
  EXPECT_EQ(r[0].present & (1u << collector::kNicLinkDowned), 0u);  // file absent
  EXPECT_EQ(r[0].present & (1u << collector::kNicNpCnpSent), 0u);
}

TEST(NicCountersTest, DeltasAndResets) {
  FakeSysfs fs;
  fs.AddPort("mlx5_0", 1, "200 Gb/sec (4X HDR)");
  fs.Set("mlx5_0", 1, "port_xmit_wait", 100);
  NicState s;
  int64_t now = 10 * kSec;
  collector::UpdateNicState(&s, collector::ReadNicPorts(fs.root()), now);
  EXPECT_EQ(Delta(s, "mlx5_0", 1, collector::kNicPortXmitWait), 0u);  // first sight: baseline
  EXPECT_EQ(Total(s, "mlx5_0", 1, collector::kNicPortXmitWait), 100u);
  fs.Set("mlx5_0", 1, "port_xmit_wait", 150);
  collector::UpdateNicState(&s, collector::ReadNicPorts(fs.root()), now += kSec);
  EXPECT_EQ(Delta(s, "mlx5_0", 1, collector::kNicPortXmitWait), 50u);
  EXPECT_EQ(Total(s, "mlx5_0", 1, collector::kNicPortXmitWait), 150u);
  // Reset: the counter restarted from zero and counted 20 since.
  fs.Set("mlx5_0", 1, "port_xmit_wait", 20);
  collector::UpdateNicState(&s, collector::ReadNicPorts(fs.root()), now += kSec);
  EXPECT_EQ(Delta(s, "mlx5_0", 1, collector::kNicPortXmitWait), 20u);
  EXPECT_EQ(Total(s, "mlx5_0", 1, collector::kNicPortXmitWait), 170u);
  EXPECT_EQ(s.ports.at({"mlx5_0", 1}).resets, 1u);
  // The file disappears (PMA read error): no growth, total kept, then it comes back.
  fs.Remove("mlx5_0", 1, "counters/port_xmit_wait");
  collector::UpdateNicState(&s, collector::ReadNicPorts(fs.root()), now += kSec);
  EXPECT_EQ(Delta(s, "mlx5_0", 1, collector::kNicPortXmitWait), 0u);
  EXPECT_EQ(Total(s, "mlx5_0", 1, collector::kNicPortXmitWait), 170u);
  fs.Set("mlx5_0", 1, "port_xmit_wait", 25);
  collector::UpdateNicState(&s, collector::ReadNicPorts(fs.root()), now += kSec);
  EXPECT_EQ(Total(s, "mlx5_0", 1, collector::kNicPortXmitWait), 170u);  // re-baselined
  fs.Set("mlx5_0", 1, "port_xmit_wait", 30);
  collector::UpdateNicState(&s, collector::ReadNicPorts(fs.root()), now += kSec);
  EXPECT_EQ(Delta(s, "mlx5_0", 1, collector::kNicPortXmitWait), 5u);
  EXPECT_EQ(Total(s, "mlx5_0", 1, collector::kNicPortXmitWait), 175u);
}

TEST(NicCountersTest, WindowRatesAndRetransmits) {
  FakeSysfs fs;
  fs.AddPort("mlx5_0", 1, "100 Gb/sec (4X EDR)", true, "Ethernet");
  fs.AddPort("mlx5_1", 1, "200 Gb/sec (4X HDR)", true, "Ethernet");
  fs.AddPort("mlx5_2", 1, "400 Gb/sec (4X NDR)", false, "Ethernet");  // down: not "fastest"
  NicState s;
  int64_t now = 100 * kSec;
  collector::NicWindow w = collector::ComputeNicWindow(s, 60 * kSec, now);
  EXPECT_FALSE(w.any_port);
  for (int i = 0; i <= 10; ++i) {
    fs.Set("mlx5_0", 1, "np_cnp_sent", static_cast<uint64_t>(1000 + 10 * i));
    fs.Set("mlx5_0", 1, "rp_cnp_handled", static_cast<uint64_t>(5 * i));
    fs.Set("mlx5_1", 1, "np_ecn_marked_roce_packets", static_cast<uint64_t>(100 * i));
    fs.Set("mlx5_0", 1, "out_of_sequence", static_cast<uint64_t>(2 * i));
    fs.Set("mlx5_1", 1, "local_ack_timeout_err", static_cast<uint64_t>(i));
    collector::UpdateNicState(&s, collector::ReadNicPorts(fs.root()), now);
    now += kSec;
  }
  now -= kSec;  // the last poll
  w = collector::ComputeNicWindow(s, 60 * kSec, now);
  EXPECT_TRUE(w.any_port);
  ASSERT_TRUE(w.has_cnp);
  EXPECT_DOUBLE_EQ(w.cnp_per_s, 15.0);  // (10 + 5) per second
  ASSERT_TRUE(w.has_ecn);
  EXPECT_DOUBLE_EQ(w.ecn_per_s, 100.0);
  ASSERT_TRUE(w.has_retransmits);
  EXPECT_EQ(w.retransmits, 30u);  // 20 out_of_sequence + 10 local_ack_timeout_err
  EXPECT_DOUBLE_EQ(w.fastest_active_gbps, 200);
  // A 4 s window sees 4 s of growth.
  w = collector::ComputeNicWindow(s, 4 * kSec, now);
  EXPECT_EQ(w.retransmits, 12u);
  EXPECT_DOUBLE_EQ(w.cnp_per_s, 15.0);
}

class NicAlertsTest : public ::testing::Test {
 protected:
  NicAlertsTest() : agg_(collector::Config(), &clock_) {}
  void Poll() {
    agg_.OnNicPoll(collector::ReadNicPorts(fs_.root()));
    clock_.Advance(kSec);
  }
  const collector::Alert* Find(const std::string& id) {
    const collector::Alert* found = nullptr;
    agg_.Read([&](const collector::State& st) {
      found = st.alerts.Find(id);  // alerts outlive Read (no writer here)
    });
    return found;
  }
  FakeClock clock_;
  collector::Aggregator agg_;
  FakeSysfs fs_;
};

TEST_F(NicAlertsTest, NicErrorsFiresAfterTwoGrowingPollsAndResolvesAfterTwoClean) {
  fs_.AddPort("mlx5_0", 1, "400 Gb/sec (4X NDR)");
  fs_.Set("mlx5_0", 1, "symbol_error", 5);
  fs_.Set("mlx5_0", 1, "port_xmit_wait", 0);
  Poll();
  fs_.Set("mlx5_0", 1, "port_xmit_wait", 999);  // congestion, not an error
  Poll();
  EXPECT_EQ(Find("nic_errors-mlx5_0-1"), nullptr);
  fs_.Set("mlx5_0", 1, "symbol_error", 6);
  Poll();
  EXPECT_EQ(Find("nic_errors-mlx5_0-1"), nullptr);  // one growing poll is not enough
  fs_.Set("mlx5_0", 1, "symbol_error", 9);
  Poll();
  const collector::Alert* a = Find("nic_errors-mlx5_0-1");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->state, collector::AlertState::kFiring);
  EXPECT_EQ(a->kind, collector::AlertKind::kNicErrors);
  EXPECT_EQ(a->evidence["device"], "mlx5_0");
  EXPECT_EQ(a->evidence["port"], 1);
  EXPECT_EQ(a->evidence["counter"], "symbol_error");
  EXPECT_EQ(a->evidence["delta"], 3);
  EXPECT_EQ(a->runbook, "collector/README.md#alert-nic_errors");
  const nlohmann::json j = collector::AlertJson(*a);
  EXPECT_TRUE(j["comm"].is_null());
  Poll();  // one clean poll: still firing
  EXPECT_EQ(Find("nic_errors-mlx5_0-1")->state, collector::AlertState::kFiring);
  Poll();
  EXPECT_EQ(Find("nic_errors-mlx5_0-1")->state, collector::AlertState::kResolved);
}

TEST_F(NicAlertsTest, LinkDegradedComparesPortsOfTheSameLinkLayer) {
  fs_.AddPort("mlx5_0", 1, "400 Gb/sec (4X NDR)");
  fs_.AddPort("mlx5_1", 1, "200 Gb/sec (4X HDR)");
  fs_.AddPort("mlx5_2", 1, "100 Gb/sec (4X EDR)", true, "Ethernet");  // other layer: fine
  fs_.AddPort("mlx5_3", 1, "10 Gb/sec (4X SDR)", false);              // not ACTIVE: ignored
  Poll();
  const collector::Alert* a = Find("link_degraded-nic-mlx5_1-1");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->state, collector::AlertState::kFiring);
  EXPECT_EQ(a->severity, collector::AlertSeverity::kWarning);
  EXPECT_DOUBLE_EQ(a->evidence["rate_gbps"].get<double>(), 200);
  EXPECT_DOUBLE_EQ(a->evidence["expected_gbps"].get<double>(), 400);
  EXPECT_EQ(Find("link_degraded-nic-mlx5_0-1"), nullptr);
  EXPECT_EQ(Find("link_degraded-nic-mlx5_2-1"), nullptr);
  EXPECT_EQ(Find("link_degraded-nic-mlx5_3-1"), nullptr);
  // The link retrains to full speed: resolved.
  fs_.AddPort("mlx5_1", 1, "400 Gb/sec (4X NDR)");
  Poll();
  EXPECT_EQ(Find("link_degraded-nic-mlx5_1-1")->state, collector::AlertState::kResolved);
}

TEST_F(NicAlertsTest, MetricsAndTelemetry) {
  fs_.AddPort("mlx5_0", 1, "400 Gb/sec (4X NDR)");
  fs_.Set("mlx5_0", 1, "local_ack_timeout_err", 1);
  Poll();
  fs_.Set("mlx5_0", 1, "local_ack_timeout_err", 4);
  Poll();
  std::string metrics;
  nlohmann::json telemetry;
  agg_.Read([&](const collector::State& st) {
    metrics = collector::RenderPrometheus(collector::TakeMetricsSnapshot(st));
    telemetry =
        collector::TelemetryJson(collector::TakeTelemetrySnapshot(st, 60 * kSec, clock_.MonoNs()));
  });
  EXPECT_NE(metrics.find("sentinel_nic_counter_total{device=\"mlx5_0\",port=\"1\",counter=\"local_"
                         "ack_timeout_err\"} 4\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sentinel_nic_port_rate_gbps{device=\"mlx5_0\",port=\"1\"} 400\n"),
            std::string::npos);
  EXPECT_EQ(metrics.find("counter=\"symbol_error\""), std::string::npos);  // absent file
  EXPECT_EQ(telemetry["retransmits"], 3);
  EXPECT_TRUE(telemetry["cnp_rate"].is_null());          // no such counter on this port
  EXPECT_TRUE(telemetry["busbw_link_ratio"].is_null());  // no collectives yet
}

}  // namespace
}  // namespace sentinel::testing
