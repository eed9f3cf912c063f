// The HTTP server reads the aggregator only through SnapshotSource (snapshot_source.h): served over
// a fake source on a real loopback socket, each endpoint asks for its snapshot with the request's
// parameters (window, last) at the clock's time, renders what it got (the processes sorted after
// the lock), and a bad parameter is refused before any snapshot is taken. The job-detail snapshots
// are taken for the viewer the kernel names (the uid owning the asking socket), on a worker: a
// slow or large trace leaves /healthz answered at once.
#include "collector/aggregate/snapshot_source.h"

#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

#include "collector/export/http_server.h"
#include "tests/integration/collector/cross_uid_util.h"
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
  RanksSnapshot SnapshotRanks(const ApiViewer& viewer) const override {
    ++calls;
    Saw(viewer);
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
                                      const ApiViewer& viewer) const override {
    ++calls;
    Saw(viewer);
    last_window_ns = window_ns;
    last_mono_ns = now_mono_ns;
    TelemetrySnapshot snap;
    snap.host = "fakehost";
    snap.window_ns = window_ns;
    snap.since_mono_ns = now_mono_ns - window_ns;
    snap.collectives.push_back({0xA0, 0, 4000000, 1000000, 2000000, 10});
    return snap;
  }
  TraceSnapshot SnapshotTrace(int64_t since_ns, const ApiViewer& viewer) const override {
    ++calls;
    Saw(viewer);
    last_since_ns = since_ns;
    std::this_thread::sleep_for(std::chrono::milliseconds(trace_delay_ms.load()));
    TraceSnapshot snap;
    snap.host = "fakehost";
    // A large trace: trace_ranks ranks of 4 collectives each (2,040 ranks: 3 MB of JSON).
    for (int r = 0; r < trace_ranks.load(); ++r) {
      TraceSnapshot::Rank& rank = snap.ranks.emplace_back();
      rank.comm_hash = 0xC0FFEE00ULL + static_cast<uint64_t>(r / 8);
      rank.rank = r % 8;
      rank.pid = static_cast<uint32_t>(1000 + r);
      for (int i = 0; i < 4; ++i) {
        RankSample& x = rank.samples.emplace_back();
        x.seq = static_cast<uint64_t>(i);
        x.bytes = 1 << 20;
        x.arrival_ns = since_ns + i * 1000000LL;
        x.duration_ns = 500000;
        x.lateness_ns = 1000;
      }
    }
    return snap;
  }
  std::vector<Alert> SnapshotAlerts(const ApiViewer& viewer) const override {
    ++calls;
    Saw(viewer);
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

  void Saw(const ApiViewer& viewer) const {
    viewer_uid = viewer.uid;
    viewer_sees_all = viewer.sees_all;
    ++viewers;
  }

  Config config_;
  mutable testing::FakeClock clock_;
  // How SnapshotTrace is slow: it waits this long (a long copy), or renders trace_ranks ranks.
  std::atomic<int> trace_delay_ms{0};
  std::atomic<int> trace_ranks{0};
  // The viewer the last job-detail snapshot was taken for, and how many were.
  mutable std::atomic<uint32_t> viewer_uid{0};
  mutable std::atomic<bool> viewer_sees_all{false};
  mutable std::atomic<int> viewers{0};
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

// The viewer comes from the kernel: this process's own requests are its uid's (the daemon's: it
// sees everything), another uid's requests (curl run as uid 4243) that uid's, seeing only its own
// jobs. /healthz and /metrics take no viewer and answer everyone.
TEST_F(SnapshotSourceTest, JobDetailsAreTakenForTheUidOwningTheAskingSocket) {
  for (const char* path : {"/v1/ranks", "/v1/telemetry", "/v1/alerts", "/v1/trace"}) {
    source_.viewer_uid = 12345;
    Get(path);
    EXPECT_EQ(source_.viewer_uid.load(), geteuid()) << path;
    EXPECT_TRUE(source_.viewer_sees_all.load()) << path << ": the daemon's own uid sees all";
  }
  if (geteuid() != 0) GTEST_SKIP() << "needs root to ask as uid " << testing::kAttacker;
  if (testing::Shell("command -v curl >/dev/null") != 0) GTEST_SKIP() << "no curl";
  for (const char* path : {"/v1/ranks", "/v1/telemetry", "/v1/alerts", "/v1/trace"}) {
    const int viewers = source_.viewers.load();
    const std::string url = "http://127.0.0.1:" + std::to_string(port_) + path;
    ASSERT_EQ(testing::ShellAs(testing::kAttacker, testing::kAttacker,
                               "curl -sf -o /dev/null --max-time 10 " + url),
              0)
        << path;
    EXPECT_EQ(source_.viewers.load(), viewers + 1) << path;
    EXPECT_EQ(source_.viewer_uid.load(), testing::kAttacker) << path;
    EXPECT_FALSE(source_.viewer_sees_all.load()) << path;
  }
  const int viewers = source_.viewers.load();
  for (const char* path : {"/healthz", "/metrics"}) {
    const std::string url = "http://127.0.0.1:" + std::to_string(port_) + path;
    EXPECT_EQ(testing::ShellAs(testing::kAttacker, testing::kAttacker,
                               "curl -sf -o /dev/null --max-time 10 " + url),
              0)
        << path;
  }
  EXPECT_EQ(source_.viewers.load(), viewers);
}

// A /healthz issued while /v1/trace is being taken (slowly) or rendered (a large one) is answered
// at once: the trace is made on the worker, not on the thread that answers /healthz. Before, the
// /healthz waited for the whole trace (3 s here).
TEST_F(SnapshotSourceTest, HealthzIsAnsweredWhileATraceIsMade) {
  const auto healthz_during_trace = [this](int64_t* trace_ms, size_t* trace_bytes) {
    std::atomic<bool> trace_done{false};
    const auto t0 = std::chrono::steady_clock::now();
    std::thread trace([&] {
      httplib::Client c("127.0.0.1", port_);
      c.set_read_timeout(60, 0);
      auto res = c.Get("/v1/trace?last=1h");
      ASSERT_TRUE(res) << httplib::to_string(res.error());
      EXPECT_EQ(res->status, 200) << res->body.substr(0, 300);
      *trace_bytes = res->body.size();
      *trace_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - t0)
                      .count();
      trace_done = true;
    });
    // The trace is under way once its snapshot was asked for.
    while (source_.calls.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const auto h0 = std::chrono::steady_clock::now();
    httplib::Client c("127.0.0.1", port_);
    auto res = c.Get("/healthz");
    const int64_t healthz_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - h0)
            .count();
    EXPECT_TRUE(res && res->status == 200);
    // Answered while the trace was still under way (before, it waited for the whole trace).
    EXPECT_FALSE(trace_done.load()) << "/healthz answered only after the trace";
    trace.join();
    return healthz_ms;
  };
  source_.trace_delay_ms = 3000;
  int64_t trace_ms = 0;
  size_t bytes = 0;
  const int64_t slow_copy = healthz_during_trace(&trace_ms, &bytes);
  std::printf("/healthz while a trace is taken for %lld ms: answered in %lld ms\n",
              static_cast<long long>(trace_ms), static_cast<long long>(slow_copy));
  EXPECT_LT(slow_copy, 1500);
  // A real render of a large trace: measured, not asserted (how long it takes is the host's).
  source_.trace_delay_ms = 0;
  source_.calls = 0;
  source_.trace_ranks = 2040;
  const int64_t large = healthz_during_trace(&trace_ms, &bytes);
  std::printf(
      "/healthz while a trace of 2040 ranks (%zu bytes) renders in %lld ms: answered in %lld ms\n",
      bytes, static_cast<long long>(trace_ms), static_cast<long long>(large));
}

// 400 query parameters (more than the connection's memory pool holds) were left unanswered until
// the connection's deadline; now a JSON 400 at once. 64 are still served.
TEST_F(SnapshotSourceTest, ManyQueryParametersGetA400) {
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(5, 0);
  for (const size_t n : {kMaxQueryParams + 1, size_t{400}, size_t{2000}}) {
    std::string path = "/healthz?";
    for (size_t i = 0; i < n; ++i) path += i ? "&a=1" : "a=1";  // 2,000 of them: 8 KB
    auto res = c.Get(path);
    ASSERT_TRUE(res) << n << " parameters: no answer";
    EXPECT_EQ(res->status, 400) << n;
    EXPECT_EQ(nlohmann::json::parse(res->body)["error"]["code"], 400) << res->body;
  }
  std::string path = "/v1/telemetry?window=5s";
  for (size_t i = 1; i < kMaxQueryParams; ++i) path += "&p" + std::to_string(i) + "=1";
  auto res = c.Get(path);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(source_.last_window_ns.load(), 5 * kSec);
}

}  // namespace
}  // namespace sentinel::collector
