// The HTTP server reads the aggregator only through SnapshotSource (snapshot_source.h): served over
// a fake source on a real loopback socket, each endpoint asks for its snapshot with the request's
// parameters (window, last) at the clock's time, renders what it got (the processes sorted after
// the lock), and a bad parameter is refused before any snapshot is taken.
#include "collector/aggregate/snapshot_source.h"

#include <httplib.h>

#include <atomic>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

#include "collector/export/http_server.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

constexpr int64_t kSec = 1000000000;

class FakeSource : public SnapshotSource {
 public:
  const Config& config() const override { return config_; }
  Clock* clock() const override { return &clock_; }
  MetricsSnapshot SnapshotMetrics(const ExcludePolicy& /*exclude*/, int64_t now_real_ns,
                                  std::vector<ExcludedHost>* excluded) const override {
    ++calls;
    last_real_ns = now_real_ns;
    excluded->push_back({"bad-node", {"nic_errors"}, {"nic_errors-x"}, true, 0});
    MetricsSnapshot snap;
    snap.host = "fakehost";
    return snap;
  }
  HealthSnapshot SnapshotHealth() const override {
    ++calls;
    return {"fakehost", 0, clock_.MonoNs() - 5 * kSec, 3, 42};
  }
  RanksSnapshot SnapshotRanks(const ApiViewer& /*viewer*/) const override {
    ++calls;
    RanksSnapshot snap;
    snap.host = "fakehost";
    // Out of the listing order: rank 2, one without a rank, rank 0.
    for (const auto& [has_rank, rank, client] :
         std::vector<std::tuple<bool, int32_t, int>>{{true, 2, 1}, {false, 0, 2}, {true, 0, 3}}) {
      RanksSnapshot::Process& p = snap.processes.emplace_back();
      p.has_rank = has_rank;
      p.rank = rank;
      p.client = client;
      p.pid = static_cast<uint32_t>(100 + client);
      p.samples = {{3000000, -1, -1}, {1000000, -1, -1}, {2000000, -1, -1}, {-1, -1, -1}};
    }
    return snap;
  }
  TelemetrySnapshot SnapshotTelemetry(int64_t window_ns, int64_t now_mono_ns,
                                      const ApiViewer& /*viewer*/) const override {
    ++calls;
    last_window_ns = window_ns;
    last_mono_ns = now_mono_ns;
    TelemetrySnapshot snap;
    snap.host = "fakehost";
    snap.window_ns = window_ns;
    snap.since_mono_ns = now_mono_ns - window_ns;
    snap.collectives.push_back({0xA0, 0, 4000000, 1000000, 2000000, 10});
    return snap;
  }
  TraceSnapshot SnapshotTrace(int64_t since_ns, const ApiViewer& /*viewer*/) const override {
    ++calls;
    last_since_ns = since_ns;
    TraceSnapshot snap;
    snap.host = "fakehost";
    return snap;
  }
  std::vector<Alert> SnapshotAlerts(const ApiViewer& /*viewer*/) const override {
    ++calls;
    Alert resolved;
    resolved.id = "old";
    resolved.state = AlertState::kResolved;
    resolved.resolved_real_ns = 2;
    Alert firing;
    firing.id = "new";
    return {resolved, firing};
  }
  std::vector<ExcludedHost> SnapshotExclusions(const ExcludePolicy& /*exclude*/,
                                               int64_t now_real_ns) const override {
    ++calls;
    last_real_ns = now_real_ns;
    return {{"bad-node", {"nic_errors"}, {"nic_errors-x"}, true, 0}};
  }
  std::vector<Alert> FiringAlerts() const override { return {}; }
  std::vector<Alert> TakeAlertChanges() override { return {}; }

  Config config_;
  mutable testing::FakeClock clock_;
  // What the server asked for, written on its thread, read by the test after each response.
  mutable std::atomic<int> calls{0};
  mutable std::atomic<int64_t> last_window_ns{0};
  mutable std::atomic<int64_t> last_mono_ns{0};
  mutable std::atomic<int64_t> last_since_ns{0};
  mutable std::atomic<int64_t> last_real_ns{0};
};

class SnapshotSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto port = server_.Start("127.0.0.1:0");
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }
  nlohmann::json Get(const std::string& path, int want_status = 200) {
    httplib::Client c("127.0.0.1", port_);
    auto res = c.Get(path);
    EXPECT_TRUE(res) << path;
    if (!res) return nullptr;
    EXPECT_EQ(res->status, want_status) << path << ": " << res->body;
    return path == "/metrics" ? nlohmann::json(res->body) : nlohmann::json::parse(res->body);
  }

  FakeSource source_;
  HttpServer server_{&source_};
  int port_ = 0;
};

TEST_F(SnapshotSourceTest, TelemetryAsksForTheRequestedWindowAtTheClocksTime) {
  const nlohmann::json t = Get("/v1/telemetry?window=5s");
  EXPECT_EQ(source_.last_window_ns.load(), 5 * kSec);
  EXPECT_EQ(source_.last_mono_ns.load(), source_.clock_.MonoNs());
  EXPECT_EQ(t["host"], "fakehost");
  EXPECT_EQ(t["window_s"], 5.0);
  EXPECT_EQ(t["collectives"], 1);
  EXPECT_EQ(t["skew_p99_ms"], 4.0);
  // Without the parameter: the configured window.
  Get("/v1/telemetry");
  EXPECT_EQ(source_.last_window_ns.load(), source_.config_.window_ns);
}

TEST_F(SnapshotSourceTest, BadParameterTakesNoSnapshot) {
  const nlohmann::json e = Get("/v1/telemetry?window=soon", 400);
  EXPECT_EQ(e["error"]["code"], 400);
  Get("/v1/trace?last=-3", 400);
  EXPECT_EQ(source_.calls.load(), 0);
}

TEST_F(SnapshotSourceTest, RanksAreSortedAfterTheCopy) {
  const nlohmann::json r = Get("/v1/ranks")["ranks"];
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0]["pid"], 103);  // rank 0
  EXPECT_EQ(r[1]["pid"], 101);  // rank 2
  EXPECT_EQ(r[2]["pid"], 102);  // no rank: last, and its figures null
  EXPECT_TRUE(r[2]["rank"].is_null());
  EXPECT_EQ(r[0]["lateness_p50_ms"], 2.0);
}

TEST_F(SnapshotSourceTest, TraceAlertsHealthExcludeAndMetricsComeFromTheSource) {
  source_.clock_.Advance(7 * kSec);
  Get("/v1/trace?last=2s");
  EXPECT_EQ(source_.last_since_ns.load(), source_.clock_.MonoNs() - 2 * kSec);
  const nlohmann::json a = Get("/v1/alerts")["alerts"];
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0]["id"], "new");  // firing first
  const nlohmann::json h = Get("/healthz");
  EXPECT_EQ(h["records"], 42);
  EXPECT_EQ(h["uptime_s"], 5.0);
  const nlohmann::json x = Get("/v1/exclude");
  EXPECT_EQ(source_.last_real_ns.load(), source_.clock_.RealNs());
  ASSERT_EQ(x["hosts"].size(), 1u);
  const std::string metrics = Get("/metrics").get<std::string>();
  EXPECT_NE(metrics.find("sentinel_exclude_host{host=\"bad-node\",reason=\"nic_errors\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(source_.calls.load(), 5);
}

}  // namespace
}  // namespace sentinel::collector
