// Exporters: Prometheus text rendering (bounded labels, cumulative histograms), the telemetry
// window, the trace, and the Alertmanager payload and push.
#include <httplib.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "collector/export/alertmanager.h"
#include "collector/export/api_json.h"
#include "collector/export/prometheus_text.h"
#include "collector/export/trace_json.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

using testing::FakeClock;
using testing::MakeColl;

constexpr uint64_t kComm = 0x42;
constexpr int64_t kMs = 1000000;

// As the plugin does before any record: the collector then knows both local ranks.
void CommInit(Aggregator* agg, int client, int rank) {
  const SentinelWireCommInit init = testing::MakeCommInit(kComm, rank, 2);
  Frame f;
  f.type = kSentinelWireCommInit;
  f.payload = reinterpret_cast<const uint8_t*>(&init);
  f.payload_size = sizeof(init);
  agg->OnControlFrame(client, f);
}

class ExportersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    agg_ = std::make_unique<Aggregator>(config_, &clock_);
    for (int r = 0; r < 2; ++r) {
      agg_->NoteAccepted(r + 1, static_cast<uint32_t>(100 + r), 0);
      agg_->OnHello(r + 1, testing::MakeHello(static_cast<uint32_t>(100 + r)));
      CommInit(agg_.get(), r + 1, r);
    }
  }
  void Feed(uint64_t seqs, int64_t late1) {
    for (uint64_t seq = 0; seq < seqs; ++seq) {
      const int64_t t = clock_.MonoNs() + static_cast<int64_t>(seq) * kMs;
      for (int r = 0; r < 2; ++r) {
        const auto rec = MakeColl(kComm, r, 2, seq, t + (r == 1 ? late1 : 0), 3 * kMs);
        agg_->OnRecords(r + 1, &rec, 1);
      }
    }
  }
  std::string Metrics() {
    std::string out;
    agg_->Read([&](const State& s) { out = RenderPrometheus(TakeMetricsSnapshot(s)); });
    return out;
  }
  FakeClock clock_;
  // Every collective's lateness counts here (no start-up collectives excluded).
  Config config_ = [] {
    Config c;
    c.straggler_warmup = 0;
    return c;
  }();
  std::unique_ptr<Aggregator> agg_;
};

TEST_F(ExportersTest, PrometheusSeriesAndHistograms) {
  Feed(5, 2 * kMs);
  const std::string text = Metrics();
  EXPECT_NE(
      text.find("sentinel_rank_last_seq{comm=\"0x0000000000000042\",uid=\"0\",rank=\"1\"} 4\n"),
      std::string::npos);
  EXPECT_NE(
      text.find(
          "sentinel_rank_collectives_total{comm=\"0x0000000000000042\",uid=\"0\",rank=\"0\",func="
          "\"AllReduce\"} 5\n"),
      std::string::npos);
  // The default series budget has no size buckets; --metrics-detail size adds them.
  EXPECT_NE(
      text.find("sentinel_collectives_joined_total{comm=\"0x0000000000000042\",uid=\"0\",func="
                "\"AllReduce\"} 5\n"),
      std::string::npos);
  {  // ... only the node's job bus bandwidth is by size bucket (one series per func and bucket).
    std::istringstream lines(text);
    std::string l;
    while (std::getline(lines, l)) {
      if (l.find("size_bucket=") == std::string::npos) continue;
      EXPECT_EQ(l.rfind("sentinel_job_busbw_gbytes_per_second{", 0), 0u) << l;
    }
  }
  MetricsOptions detail;
  detail.detail.size = true;
  std::string by_size;
  agg_->Read([&](const State& s) { by_size = RenderPrometheus(TakeMetricsSnapshot(s), detail); });
  EXPECT_NE(
      by_size.find("sentinel_collectives_joined_total{comm=\"0x0000000000000042\",uid=\"0\",func="
                   "\"AllReduce\",size_bucket=\"<=1MiB\"} 5\n"),
      std::string::npos);
  EXPECT_NE(
      by_size.find("sentinel_rank_duration_seconds_count{comm=\"0x0000000000000042\",uid=\"0\","
                   "rank=\"1\",size_bucket=\"<=1MiB\"} 5\n"),
      std::string::npos);
  EXPECT_NE(text.find("sentinel_rank_duration_seconds_count{comm=\"0x0000000000000042\",uid=\"0\","
                      "rank=\"1\"} 5\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE sentinel_rank_lateness_seconds histogram"), std::string::npos);
  EXPECT_EQ(text.find("seq="), std::string::npos);
  // Rank 1's lateness histogram: 5 samples of 2 ms, cumulative, +Inf == count, sum exact.
  const std::string prefix =
      "sentinel_rank_lateness_seconds_bucket{comm=\"0x0000000000000042\",uid=\"0\",rank=\"1\",le="
      "\"";
  std::istringstream in(text);
  std::string line;
  double previous = 0;
  int buckets = 0;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    const double v = std::stod(line.substr(line.rfind(' ') + 1));
    EXPECT_GE(v, previous) << line;
    previous = v;
    ++buckets;
    if (line.find("le=\"0.001\"") != std::string::npos) {
      EXPECT_EQ(v, 0) << line;
    }
    if (line.find("le=\"0.002\"") != std::string::npos) {
      EXPECT_EQ(v, 5) << line;
    }
  }
  EXPECT_EQ(buckets, 15);
  EXPECT_EQ(previous, 5);
  EXPECT_NE(text.find("sentinel_rank_lateness_seconds_sum{comm=\"0x0000000000000042\",uid=\"0\","
                      "rank=\"1\"} 0.01"),
            std::string::npos);
  EXPECT_NE(text.find("sentinel_evicted_total{what=\"pending_join\"} 0"), std::string::npos);
}

// A process that finalizes its communicator and makes a new one of the same size (an in-process
// restart): the new one is exported at once, the ended one only for the series retention.
TEST_F(ExportersTest, EndedCommunicatorLeavesAfterRetentionNewOneExportedAtOnce) {
  Feed(3, 0);
  constexpr uint64_t kNext = 0x43;
  for (int r = 0; r < 2; ++r) {
    SentinelWireCommEnd end{};
    end.comm_hash = kComm;
    end.rank = r;
    Frame f;
    f.type = kSentinelWireCommEnd;
    f.payload = reinterpret_cast<const uint8_t*>(&end);
    f.payload_size = sizeof(end);
    agg_->OnControlFrame(r + 1, f);
    const SentinelWireCommInit init = testing::MakeCommInit(kNext, r, 2);
    f.type = kSentinelWireCommInit;
    f.payload = reinterpret_cast<const uint8_t*>(&init);
    f.payload_size = sizeof(init);
    agg_->OnControlFrame(r + 1, f);
  }
  MetricsOptions options;
  options.retention_ns = 10000 * kMs;
  auto render = [&] {
    agg_->Tick();
    std::string out;
    agg_->Read([&](const State& s) { out = RenderPrometheus(TakeMetricsSnapshot(s), options); });
    return out;
  };
  const std::string old_up =
      "sentinel_rank_up{comm=\"0x0000000000000042\",uid=\"0\",rank=\"0\"} 0\n";
  const std::string new_up =
      "sentinel_rank_up{comm=\"0x0000000000000043\",uid=\"0\",rank=\"0\"} 1\n";
  std::string text = render();
  EXPECT_NE(text.find(old_up), std::string::npos) << "within the retention";
  EXPECT_NE(text.find(new_up), std::string::npos);
  clock_.Advance(9000 * kMs);
  EXPECT_NE(render().find(old_up), std::string::npos);
  clock_.Advance(1000 * kMs);
  text = render();
  EXPECT_EQ(text.find("comm=\"0x0000000000000042\""), std::string::npos) << "after the retention";
  EXPECT_NE(text.find(new_up), std::string::npos);
  // The JSON API still has it.
  nlohmann::json ranks;
  agg_->Read([&](const State& s) { ranks = RanksJson(TakeRanksSnapshot(s)); });
  EXPECT_NE(ranks.dump().find("0x0000000000000042"), std::string::npos);
}

TEST_F(ExportersTest, TelemetryWindowExcludesOldCollectives) {
  Feed(3, 0);
  clock_.Advance(10LL * 60 * 1000 * kMs);
  for (uint64_t seq = 3; seq < 5; ++seq) {
    for (int r = 0; r < 2; ++r) {
      const auto rec = MakeColl(kComm, r, 2, seq, clock_.MonoNs(), kMs);
      agg_->OnRecords(r + 1, &rec, 1);
    }
  }
  nlohmann::json t5;
  nlohmann::json t15;
  agg_->Read([&](const State& s) {
    t5 = TelemetryJson(TakeTelemetrySnapshot(s, 5LL * 60 * 1000 * kMs, clock_.MonoNs()));
    t15 = TelemetryJson(TakeTelemetrySnapshot(s, 15LL * 60 * 1000 * kMs, clock_.MonoNs()));
  });
  EXPECT_EQ(t5["collectives"], 2);
  EXPECT_EQ(t15["collectives"], 5);
  EXPECT_TRUE(t5["retransmits"].is_null()) << "unmeasured is null, not 0";
}

TEST_F(ExportersTest, TraceHasOneSpanPerOperationAndNamedTracks) {
  Feed(3, kMs);
  nlohmann::json trace;
  const int64_t window = 3600LL * 1000 * kMs;
  const int64_t now = clock_.MonoNs() + 10 * kMs;
  trace = TraceJson(agg_->SnapshotTrace(now - window, ApiViewer::Everything()), window, now);
  int spans = 0;
  int names = 0;
  int flow_steps = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") {
      ++spans;
      EXPECT_EQ(e["dur"], 3000.0);
      EXPECT_EQ(e["name"], absl::StrCat("AllReduce 1MiB #", e["args"]["seq"].get<int>()));
    } else if (e["ph"] == "M") {
      ++names;
    } else if (e["ph"] == "s" || e["ph"] == "f") {
      ++flow_steps;  // one flow per collective, from the first arrival to the last
    }
  }
  EXPECT_EQ(spans, 6);
  EXPECT_EQ(names, 6);  // process_name + process_sort_index per rank, thread_name per track
  EXPECT_EQ(flow_steps, 6);
}

TEST(AlertmanagerTest, PayloadAndPush) {
  Alert a;
  a.id = "hang-0x1";
  a.kind = AlertKind::kHang;
  a.severity = AlertSeverity::kCritical;
  a.state = AlertState::kFiring;
  a.comm = "0x0000000000000001";
  a.ranks = {3, 5};
  a.host = "n1";
  a.summary = "stuck";
  a.runbook = "https://example/runbook";
  a.started_real_ns = 1767225600000000000LL;
  const nlohmann::json p = AlertmanagerPayload({a});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0]["labels"]["alertname"], "SentinelHang");
  EXPECT_EQ(p[0]["labels"]["ranks"], "3,5");
  EXPECT_EQ(p[0]["startsAt"], "2026-01-01T00:00:00.000Z");
  EXPECT_FALSE(p[0].contains("endsAt"));

  // Push through a real HTTP server standing in for Alertmanager.
  httplib::Server server;
  std::string received;
  std::mutex mu;
  server.Post("/api/v2/alerts", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    received = req.body;
    res.status = 200;
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread t([&] { server.listen_after_bind(); });
  FakeClock clock;
  Config config;
  config.straggler_learn = 4;  // a short stream: learn the noise from 4 collectives
  Aggregator agg(config, &clock);
  for (int r = 0; r < 2; ++r) {
    agg.NoteAccepted(r + 1, 1, 0);
    CommInit(&agg, r + 1, r);
  }
  for (uint64_t seq = 0; seq < 20; ++seq) {
    for (int r = 0; r < 2; ++r) {
      const int64_t start = 1000000000 + static_cast<int64_t>(seq) * 100 * kMs;
      const auto rec =
          MakeColl(kComm, r, 2, seq, start + (r == 1 ? 50 * kMs : 0), (r == 1 ? 1 : 51) * kMs);
      agg.OnRecords(r + 1, &rec, 1);
    }
  }
  {
    AlertPusher pusher("http://127.0.0.1:" + std::to_string(port), &agg);
    pusher.Start();
    for (int i = 0; i < 100; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!received.empty()) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    pusher.Stop();
  }
  server.stop();
  t.join();
  const nlohmann::json body = nlohmann::json::parse(received, nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << received;
  ASSERT_EQ(body.size(), 1u);
  EXPECT_EQ(body[0]["labels"]["alertname"], "SentinelStraggler");
  EXPECT_EQ(body[0]["labels"]["ranks"], "1");
}

// The plugin's overhead-budget step reaches /v1/ranks with the measured overhead ratio.
TEST_F(ExportersTest, RanksShowOverheadRatioAndBudgetLevel) {
  SentinelWireHeartbeat hb{};
  Frame f;
  f.type = kSentinelWireHeartbeat;
  f.payload = reinterpret_cast<const uint8_t*>(&hb);
  f.payload_size = sizeof(hb);
  hb.now_ns = 1000000000;
  agg_->OnControlFrame(1, f);
  hb.now_ns += 1000000000;
  hb.callback_ns_total = 8000000;  // 8 ms of plugin time per second
  hb.budget_level = 2;
  agg_->OnControlFrame(1, f);
  nlohmann::json ranks;
  agg_->Read([&](const State& s) { ranks = RanksJson(TakeRanksSnapshot(s)); });
  bool seen = false;
  for (const auto& r : ranks["ranks"]) {
    if (r["rank"] != 0) continue;
    seen = true;
    EXPECT_DOUBLE_EQ(r["overhead_ratio"].get<double>(), 0.008);
    EXPECT_EQ(r["budget_level"], 2);
  }
  EXPECT_TRUE(seen) << ranks.dump();
}

}  // namespace
}  // namespace sentinel::collector
