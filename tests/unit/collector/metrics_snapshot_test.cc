// /metrics from a MetricsSnapshot (metrics_snapshot.h): taken under the aggregator's lock, rendered
// after it, byte-identical to what the State renderer gave (testdata/metrics_*.prom were written
// by it, at the commit that had both and asserted them equal under 8 series budgets; since then
// only the owner's `uid` label was added to each communicator, rank and process series). The node
// below feeds every family /metrics carries (joins in several size buckets, three communicators of
// which one ended, in-flight state, heartbeats, CUPTI windows, a verdict alert, NIC counters, a
// baseline run, net-plugin links, a gone process).
#include "collector/aggregate/metrics_snapshot.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/api_snapshot.h"
#include "collector/export/api_json.h"
#include "collector/export/prometheus_text.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

using testing::DeliverControl;
using testing::FakeClock;
using testing::MakeColl;

constexpr uint64_t kWorld = 0xA0;
constexpr uint64_t kPair = 0xB0;
constexpr uint64_t kSolo = 0xC0;
constexpr int64_t kMs = 1000000;
constexpr int kClients = 4;

void CommInit(Aggregator* agg, int client, uint64_t comm, int rank, int nranks, const char* name) {
  SentinelWireCommInit init = testing::MakeCommInit(comm, rank, nranks);
  std::snprintf(init.comm_name, sizeof(init.comm_name), "%s", name);
  DeliverControl(agg, client, kSentinelWireCommInit, init);
}

SentinelWireGpuWindow Window(int64_t start, uint32_t status, bool step) {
  SentinelWireGpuWindow w{};
  w.start_ns = start;
  w.end_ns = start + 100 * kMs;
  if (status == 0) {
    w.compute_ns = 60 * kMs;
    w.nccl_ns = 30 * kMs;
    w.overlap_ns = 10 * kMs;
    w.idle_ns = 20 * kMs;
    w.memcpy_ns = 5 * kMs;
  }
  w.records_dropped = 3;
  w.status = status;
  if (step) {
    w.steps = 1;
    w.step_start_ns = start + 10 * kMs;
    w.step_end_ns = start + 90 * kMs;
    w.step_compute_ns = 50 * kMs;
    w.step_exposed_comm_ns = 20 * kMs;
    w.step_idle_ns = 10 * kMs;
  }
  return w;
}

// The node's one NIC port (mlx5_0/1, ACTIVE at 400 Gb/s), no counters yet.
NicPortReading ActivePort() {
  NicPortReading port;
  port.device = "mlx5_0";
  port.port = 1;
  port.active = true;
  port.rate_gbps = 400;
  return port;
}

class MetricsSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    start_mono_ = clock_.MonoNs();
    agg_ = std::make_unique<Aggregator>(config_, &clock_);
    for (int c = 1; c <= kClients; ++c) {
      agg_->NoteAccepted(c, static_cast<uint32_t>(100 + c), 0);
      agg_->OnHello(c, testing::MakeHello(static_cast<uint32_t>(100 + c)));
      CommInit(agg_.get(), c, kWorld, c - 1, kClients, "world");
    }
    CommInit(agg_.get(), 1, kPair, 0, 2, "pair");
    CommInit(agg_.get(), 2, kPair, 1, 2, "pair");
    CommInit(agg_.get(), 3, kSolo, 0, 1, "solo");
    // Joins on the world communicator in three size buckets and two functions, rank 2 late.
    const uint64_t sizes[] = {4096, 1 << 20, 64 << 20};
    for (uint64_t seq = 0; seq < 24; ++seq) {
      const int64_t t = clock_.MonoNs() + static_cast<int64_t>(seq) * kMs;
      const uint8_t func = seq % 4 == 3 ? kSentinelFuncAllGather : kSentinelFuncAllReduce;
      for (int r = 0; r < kClients; ++r) {
        const auto rec = MakeColl(kWorld, r, kClients, seq, t + (r == 2 ? 300000 : r * 1000),
                                  (2 + r) * kMs, sizes[seq % 3], func);
        agg_->OnRecords(r + 1, &rec, 1);
      }
    }
    for (uint64_t seq = 0; seq < 5; ++seq) {
      const int64_t t = clock_.MonoNs() + static_cast<int64_t>(seq) * kMs;
      for (int r = 0; r < 2; ++r) {
        const auto rec = MakeColl(kPair, r, 2, seq, t + r * 5000, kMs);
        agg_->OnRecords(r + 1, &rec, 1);
      }
    }
    const auto solo = MakeColl(kSolo, 0, 1, 0, clock_.MonoNs(), kMs);
    agg_->OnRecords(3, &solo, 1);
    SentinelWireCommEnd end{};
    end.comm_hash = kSolo;
    end.rank = 0;
    DeliverControl(agg_.get(), 3, kSentinelWireCommEnd, end);
    // In-flight state: rank 1 has a collective outstanding.
    for (int r = 0; r < kClients; ++r) {
      SentinelWireInFlight in{};
      in.comm_hash = kWorld;
      in.now_ns = clock_.MonoNs();
      in.rank = r;
      in.nranks = kClients;
      in.pid = static_cast<uint32_t>(100 + r + 1);
      in.enqueued = 25;
      in.gpu_started = r == 1 ? 24 : 25;
      in.completed = r == 1 ? 24 : 25;
      in.oldest_since_ns = r == 1 ? clock_.MonoNs() - 40 * kMs : 0;
      DeliverControl(agg_.get(), r + 1, kSentinelWireInFlight, in);
    }
    // Heartbeats (two, for the overhead ratio), CUPTI windows (measured with a step, and not).
    for (int c = 1; c <= kClients; ++c) {
      SentinelWireHeartbeat hb{};
      hb.now_ns = clock_.MonoNs();
      hb.records_dropped_ring = static_cast<uint64_t>(c);
      hb.events_dropped_pool = 7;
      DeliverControl(agg_.get(), c, kSentinelWireHeartbeat, hb);
      hb.now_ns += 1000 * kMs;
      hb.callback_ns_total = static_cast<uint64_t>(c) * kMs;
      DeliverControl(agg_.get(), c, kSentinelWireHeartbeat, hb);
      DeliverControl(agg_.get(), c, kSentinelWireGpuWindow,
                     Window(clock_.MonoNs(), c == 3 ? kSentinelGpuWindowForeignOwner : 0, c != 4));
    }
    // A transport verdict (an alert firing).
    SentinelWireVerdict v =
        testing::MakeVerdict(kWorld, 0, kClients, kSentinelVerdictTransport, kSentinelOutcomeFail);
    std::snprintf(v.expected, sizeof(v.expected), "NET/IB");
    std::snprintf(v.found, sizeof(v.found), "NET/Socket");
    DeliverControl(agg_.get(), 1, kSentinelWireVerdict, v);
    // A baseline run at the job's sizes.
    for (uint16_t i = 0; i < 3; ++i) {
      SentinelWireBaseline b{};
      b.run_id = 0x5EED;
      b.bytes = sizes[i];
      b.time_ns = 1000000;
      b.busbw_bps = 100000000000ULL >> i;
      b.algbw_bps = 50000000000ULL;
      b.link_mbps = 400000;
      b.nranks = kClients;
      b.iters = 20;
      b.func = kSentinelFuncAllReduce;
      b.index = i;
      b.count = 3;
      b.flags = i == 2 ? kSentinelBaselineLast : 0;
      DeliverControl(agg_.get(), 1, kSentinelWireBaselineResult, b);
    }
    // Net-plugin devices and a link's two ends.
    SentinelWireNetDevice dev{};
    dev.pid = 101;
    dev.ptr_support = 0x2;
    dev.speed_mbps = 400000;
    std::snprintf(dev.name, sizeof(dev.name), "mlx5_0");
    DeliverControl(agg_.get(), 1, kSentinelWireNetDevice, dev);
    for (int c = 1; c <= 2; ++c) {
      SentinelWireNetConnStats s{};
      s.link_id = 0x1111;
      s.bytes = 1 << 30;
      s.requests = 1000;
      s.errors = static_cast<uint64_t>(c - 1);
      s.latency_ns_sum = 5000000;
      s.pid = static_cast<uint32_t>(100 + c);
      s.is_send = c == 1 ? 1 : 0;
      DeliverControl(agg_.get(), c, kSentinelWireNetConnStats, s);
    }
    // NIC counters, two polls.
    for (uint64_t n : {10u, 25u}) {
      NicPortReading port = ActivePort();
      port.value[0] = n;
      port.value[1] = 2 * n;
      port.present = 0x3;
      agg_->OnNicPoll({port});
      clock_.Advance(5000 * kMs);
    }
    agg_->OnDisconnect(kClients);  // a gone process: no per-process series
    agg_->Tick();
  }

  // Copied under the lock, rendered after it, as the /metrics handler does.
  void Render(const MetricsOptions& options) {
    MetricsSnapshot snap;
    agg_->Read([&](const State& s) { snap = TakeMetricsSnapshot(s); });
    last_ = RenderPrometheus(snap, options);
    host_ = snap.host;
  }
  // The text the State renderer (under the lock, as it was before the snapshots) gave for this
  // node, with the machine's host name replaced by HOST: byte for byte the same.
  void ExpectGolden(const MetricsOptions& options, const std::string& file) {
    Render(options);
    std::ifstream in(std::string(METRICS_GOLDEN_DIR) + "/" + file, std::ios::binary);
    ASSERT_TRUE(in.good()) << file;
    std::stringstream golden;
    golden << in.rdbuf();
    std::string expected = golden.str();
    // Every host label (build_info's, and the net links' src_host/dst_host, which name this node
    // since alert and link hosts are sentineld's own) holds the machine's host name.
    const std::string placeholder = "host=\"HOST\"";
    size_t at = expected.find(placeholder);
    ASSERT_NE(at, std::string::npos);
    for (; at != std::string::npos; at = expected.find(placeholder, at)) {
      expected.replace(at, placeholder.size(), "host=\"" + host_ + "\"");
    }
    EXPECT_EQ(last_, expected);
  }

  // The straggler of these short synthetic jobs is named without the 2 s persistence in time: the
  // flag is what is compared here, not when it rises.
  Config config_ = testing::ConfigWithoutPersistence();
  FakeClock clock_;
  int64_t start_mono_ = 0;
  std::unique_ptr<Aggregator> agg_;
  std::string last_;
  std::string host_;
};

TEST_F(MetricsSnapshotTest, SameTextAsFromStateByDefault) {
  ExpectGolden({}, "metrics_default.prom");
  // The node really has every family with samples (so the comparison covers them).
  for (const char* line : {
           "sentinel_alerts_firing{kind=\"transport\"} 1\n",
           "sentinel_nic_counter_total{device=\"mlx5_0\",port=\"1\",counter=",
           "sentinel_comm_nranks{comm=\"0x00000000000000a0\",uid=\"0\",scope=\"local\"} 4\n",
           "sentinel_collectives_joined_total{comm=\"0x00000000000000a0\",uid=\"0\",func="
           "\"AllGather\"} 6\n",
           "sentinel_skew_seconds_count{comm=\"0x00000000000000a0\",uid=\"0\"} 24\n",
           "sentinel_rank_last_seq{comm=\"0x00000000000000a0\",uid=\"0\",rank=\"3\"}",
           "sentinel_inflight_oldest_age_seconds{comm=\"0x00000000000000a0\",uid=\"0\",rank=\"1\"} "
           "10.039999999999999\n",
           "sentinel_rank_lateness_seconds_count{comm=\"0x00000000000000a0\",uid=\"0\",rank=\"2\"} "
           "22\n",
           "sentinel_rank_clock_free_lateness_seconds_sum{",
           "sentinel_rank_duration_seconds_count{comm=\"0x00000000000000a0\",uid=\"0\",rank=\"0\"} "
           "24\n",
           "sentinel_plugin_dropped_total{rank=\"2\",uid=\"0\",reason=\"ring\"} 3\n",
           "sentinel_plugin_overhead_ratio{rank=\"0\",uid=\"0\"}",
           "sentinel_gpu_overlap_ratio{rank=\"0\",uid=\"0\"}",
           "sentinel_gpu_compute_ratio{rank=\"0\",uid=\"0\"} 0.59999999999999998\n",
           "sentinel_gpu_step_seconds{rank=\"1\",uid=\"0\",part=\"exposed_comm\"}",
           "sentinel_gpu_windows_not_measured_total{rank=\"2\",uid=\"0\"} 1\n",
           "sentinel_job_busbw_gbytes_per_second{func=\"AllReduce\",size_bucket=",
           "sentinel_baseline_job_ratio{func=\"AllReduce\",bytes=\"1048576\"}",
           "sentinel_baseline_link_ratio{",
           "sentinel_net_send_bytes_total{",
           "sentinel_net_device_info{",
       }) {
    EXPECT_NE(last_.find(line), std::string::npos) << line << "\n" << last_;
  }
  // The series budget: the pair and the ended solo communicator are not primary.
  EXPECT_EQ(last_.find("comm=\"0x00000000000000b0\""), std::string::npos);
  // The gone process (client 4, rank 3) has no per-process series.
  EXPECT_EQ(last_.find("sentinel_plugin_dropped_total{rank=\"3\""), std::string::npos);
}

TEST_F(MetricsSnapshotTest, SameTextUnderEverySeriesBudget) {
  MetricsOptions all;
  all.detail.comm = true;
  Render(all);
  EXPECT_NE(last_.find("comm=\"0x00000000000000b0\""), std::string::npos);
  EXPECT_NE(last_.find("comm=\"0x00000000000000c0\""), std::string::npos);
  MetricsOptions size;
  size.detail.size = true;
  Render(size);
  EXPECT_NE(last_.find("size_bucket="), std::string::npos);
  all.detail.size = true;
  ExpectGolden(all, "metrics_comm_size.prom");
  MetricsOptions by_name;
  by_name.comms = {"pair"};
  Render(by_name);
  EXPECT_NE(last_.find("comm=\"0x00000000000000b0\""), std::string::npos);
  MetricsOptions by_hash;
  by_hash.comms = {"0xc0"};
  Render(by_hash);
  EXPECT_NE(last_.find("comm=\"0x00000000000000c0\""), std::string::npos);
  // The ended solo communicator leaves once its retention passed (10 s since it ended).
  by_hash.retention_ns = 1000 * kMs;
  Render(by_hash);
  EXPECT_EQ(last_.find("comm=\"0x00000000000000c0\""), std::string::npos);
  all.retention_ns = 1000 * kMs;
  Render(all);
  EXPECT_EQ(last_.find("comm=\"0x00000000000000c0\""), std::string::npos);
}

// /v1/healthz and /v1/alerts from their snapshots (snapshot.h). The JSON equalled the State
// renderers' at the commit that had both.
TEST_F(MetricsSnapshotTest, HealthzAndAlertsFromSnapshots) {
  // A second alert (placement), so that the sort is exercised.
  SentinelWireVerdict v{};
  v.comm_hash = kPair;
  v.nranks = 2;
  v.kind = kSentinelVerdictPlacement;
  v.outcome = kSentinelOutcomeWarn;
  DeliverControl(agg_.get(), 1, kSentinelWireVerdict, v);
  HealthSnapshot health;
  std::vector<Alert> alerts;
  agg_->Read([&](const State& s) {
    health = TakeHealthSnapshot(s);
    alerts = TakeAlerts(s);
  });
  const nlohmann::json h = HealthzJson(health, 123, clock_.MonoNs());
  EXPECT_EQ(h["records"], 24 * 4 + 5 * 2 + 1);
  EXPECT_EQ(h["clients"], kClients - 1);
  EXPECT_EQ(h["uptime_s"], 10.0);  // two NIC polls 5 s apart
  const nlohmann::json a = AlertsJson(alerts)["alerts"];
  ASSERT_EQ(a.size(), 2u);
  // Firing first, then the newest first: both fired at the same instant, so by id.
  EXPECT_EQ(a[0]["id"], "placement-0x00000000000000b0");
  EXPECT_EQ(a[1]["id"], "transport-0x00000000000000a0");
}

// The windows /v1/telemetry is asked for below (its only query parameter, "window"): the
// default, none of the collectives but the last NIC polls, the straggler's steps (they ended
// ~33 s ago) but not the fixture's collectives (~43 s ago), all of them.
constexpr int64_t kTelemetryWindows[] = {0, 6000 * kMs, 40000 * kMs, 3600000 * kMs};

std::string ReadGolden(const std::string& file) {
  std::ifstream in(std::string(METRICS_GOLDEN_DIR) + "/" + file, std::ios::binary);
  std::stringstream golden;
  golden << in.rdbuf();
  return golden.str();
}

// The machine's host name (the collector's own) replaced by HOST, as in the golden files.
std::string Normalized(std::string text, const std::string& host) {
  const std::string quoted = "\"" + host + "\"";
  for (size_t at = text.find(quoted); at != std::string::npos; at = text.find(quoted, at)) {
    text.replace(at, quoted.size(), "\"HOST\"");
  }
  return text + "\n";
}

// /v1/ranks and /v1/telemetry from their snapshots (api_snapshot.h), taken under the lock and
// rendered after it: the same bytes as the State renderers gave (testdata/ranks.json and
// telemetry_*.json were written by them, at commit ac8621e, which had both paths and asserted
// their output equal for /v1/ranks and for /v1/telemetry under each window; ranks.json has since
// gained only the processes' and communicators' "uid"). The straggler and
// the hang suspect set up below were in that commit's test when the files were written, so the
// comparison covers the "straggler" flag and "collective_hang_suspects" too.
TEST_F(MetricsSnapshotTest, RanksAndTelemetryFromSnapshots) {
  // Two CUPTI kernels on client 1: one over its first world collective (matched), one not.
  for (int64_t at : {start_mono_ - 1000, start_mono_ - 100000 * kMs}) {
    SentinelWireKernelAttribution k{};
    k.start_ns = at;
    k.end_ns = at + kMs;
    k.overlap_ns = kMs / 2;
    DeliverControl(agg_.get(), 1, kSentinelWireKernelAttribution, k);
  }
  // A straggler: more steps on the world communicator, right after its first 24 collectives
  // (which ended by 28 ms into the fixture): 10 ms of compute between collectives, a little
  // jitter, and rank 2 computing 30 % slower. Every rank's collective ends 1 ms after the last
  // one arrived; the collector's clock advances with the steps. Rank 3's process is gone. The
  // straggler detector fires for rank 2 once it has learned the noise (at the 50th step).
  constexpr uint64_t kStragglerSteps = 64;
  int64_t step_end = start_mono_ + 30 * kMs;
  for (uint64_t seq = 24; seq < 24 + kStragglerSteps; ++seq) {
    int64_t arrival[3];
    int64_t last = 0;
    for (int r = 0; r < 3; ++r) {
      const int64_t jitter =
          static_cast<int64_t>((seq * 7 + static_cast<uint64_t>(r) * 3) % 5) * 50000;
      arrival[r] = step_end + (r == 2 ? 13 * kMs : 10 * kMs) + jitter;
      last = std::max(last, arrival[r]);
    }
    clock_.Advance(last + kMs - step_end);
    step_end = last + kMs;
    for (int r = 0; r < 3; ++r) {
      const auto rec = MakeColl(kWorld, r, kClients, seq, arrival[r], step_end - arrival[r]);
      agg_->OnRecords(r + 1, &rec, 1);
    }
  }
  // A hang suspect: rank 0 of the pair communicator reports its next collective, rank 1 never
  // does, for the hang timeout (and the two NIC polls below).
  const auto stuck = MakeColl(kPair, 0, 2, 5, clock_.MonoNs(), kMs);
  agg_->OnRecords(1, &stuck, 1);
  clock_.Advance(config_.hang_timeout_ns);
  // Two more NIC polls, with the retransmit, CNP and ECN counters the window rates read.
  for (uint64_t n : {100u, 160u}) {
    NicPortReading port = ActivePort();
    for (int c : {kNicOutOfSequence, kNicNpCnpSent, kNicNpEcnMarkedRocePackets}) {
      port.value[static_cast<size_t>(c)] = n;
      port.present |= 1u << c;
    }
    agg_->OnNicPoll({port});
    clock_.Advance(1000 * kMs);
  }
  agg_->Tick();
  const int64_t now = clock_.MonoNs();
  std::string host;
  RanksSnapshot ranks_snap;
  agg_->Read([&](const State& s) {
    host = s.host;
    ranks_snap = TakeRanksSnapshot(s);
  });
  const std::string ranks = RanksJson(ranks_snap).dump();
  EXPECT_EQ(Normalized(ranks, host), ReadGolden("ranks.json"));
  // The node really has what the comparison is meant to cover.
  const nlohmann::json r = nlohmann::json::parse(ranks)["ranks"];
  ASSERT_EQ(r.size(), static_cast<size_t>(kClients));
  EXPECT_EQ(r[0]["rank"], 0);
  EXPECT_EQ(r[0]["comms"].size(), 2u);
  EXPECT_EQ(r[0]["gpu"]["kernels_attributed"], 2);
  EXPECT_EQ(r[0]["gpu"]["kernels_matched"], 1);
  EXPECT_FALSE(r[0]["gpu"]["kernelch_minus_cupti_ns"].is_null());
  EXPECT_FALSE(r[1]["gpu"]["step"].is_null());
  EXPECT_FALSE(r[1]["comms"][0]["inflight"]["oldest_func"].is_null());
  EXPECT_FALSE(r[2]["lateness_p99_ms"].is_null());
  EXPECT_EQ(r[3]["connected"], false);
  // The straggler flag (the straggler detector's, on the primary rank): rank 2 only.
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(r[i]["straggler"], i == 2) << i;
  for (size_t i = 0; i < std::size(kTelemetryWindows); ++i) {
    const int64_t window = kTelemetryWindows[i] == 0 ? config_.window_ns : kTelemetryWindows[i];
    TelemetrySnapshot snap;
    agg_->Read([&](const State& s) { snap = TakeTelemetrySnapshot(s, window, now); });
    const std::string file = "telemetry_" + std::to_string(i) + ".json";
    EXPECT_EQ(Normalized(TelemetryJson(snap).dump(), host), ReadGolden(file)) << file;
  }
  const nlohmann::json t =
      nlohmann::json::parse(ReadGolden("telemetry_" + std::to_string(0) + ".json"));
  EXPECT_EQ(t["collectives"], 24 + 5 + 1 + kStragglerSteps);
  // The hang suspect: the pair communicator's seq 5, rank 0 in it, rank 1 missing.
  ASSERT_EQ(t["collective_hang_suspects"].size(), 1u);
  const nlohmann::json& hang = t["collective_hang_suspects"][0];
  EXPECT_EQ(hang["comm"], "0x00000000000000b0");
  EXPECT_EQ(hang["func"], "AllReduce");
  EXPECT_EQ(hang["seq"], 5);
  EXPECT_EQ(hang["arrived_ranks"], nlohmann::json::array({0}));
  EXPECT_EQ(hang["missing_ranks"], nlohmann::json::array({1}));
  EXPECT_GE(hang["waiting_s"].get<double>(), 30.0);
  // Over the window of the straggler's steps: only their collectives, and still the suspect.
  const nlohmann::json t2 = nlohmann::json::parse(ReadGolden("telemetry_2.json"));
  EXPECT_EQ(t2["collectives"], kStragglerSteps);
  EXPECT_EQ(t2["collective_hang_suspects"], t["collective_hang_suspects"]);
  EXPECT_FALSE(t["busbw_link_ratio"].is_null());
  EXPECT_EQ(t["retransmits"], 160);  // the counter appeared at 0: all its growth
  EXPECT_FALSE(t["cnp_rate"].is_null());
  EXPECT_EQ(t["gpu"]["ranks_measured"], 3);  // the gone process's last window too
  EXPECT_EQ(t["gpu"]["ranks_not_measured"], 1);
  EXPECT_FALSE(t["baseline"].is_null());
  EXPECT_FALSE(t["net"]["links"].empty());
}

}  // namespace
}  // namespace sentinel::collector
