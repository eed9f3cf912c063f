// GPU activity in the collector (collector/aggregate/gpu_activity.h): GpuWindow and
// KernelAttribution records through the aggregator, and every export of them, checked exactly.
#include "collector/aggregate/gpu_activity.h"

#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "collector/aggregate/aggregator.h"
#include "collector/export/api_json.h"
#include "collector/export/prometheus_text.h"
#include "collector/export/trace_json.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

using testing::FakeClock;
using testing::MakeColl;
using testing::MakeCommInit;

constexpr uint64_t kComm = 0x1111222233334444ULL;
constexpr int64_t kMs = 1000000;
constexpr int64_t kSec = 1000 * kMs;

SentinelWireGpuWindow Window(int64_t start, int64_t compute, int64_t nccl, int64_t overlap,
                             int64_t memcpy = 0) {
  SentinelWireGpuWindow w{};
  w.start_ns = start;
  w.end_ns = start + kSec;
  w.compute_ns = compute;
  w.nccl_ns = nccl;
  w.overlap_ns = overlap;
  w.memcpy_ns = memcpy;
  w.idle_ns = kSec - (compute + nccl - overlap + memcpy);
  w.kernels = 10;
  w.nccl_kernels = 2;
  w.clock_offset_ns = 1790000000LL * kSec;
  return w;
}

class GpuActivityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    agg_ = std::make_unique<Aggregator>(config_, &clock_);
    for (int r = 0; r < 4; ++r) {
      agg_->NoteAccepted(Client(r), static_cast<uint32_t>(2000 + r), 0);
      agg_->OnHello(Client(r), testing::MakeHello(static_cast<uint32_t>(2000 + r)));
      Control(Client(r), kSentinelWireCommInit, MakeCommInit(kComm, r, 4));
    }
  }
  static int Client(int rank) { return 10 + rank; }
  template <typename T>
  void Control(int client, uint16_t type, const T& body) {
    testing::DeliverControl(agg_.get(), client, type, body);
  }
  nlohmann::json Ranks() {
    nlohmann::json out;
    RanksSnapshot snap;
    agg_->Read([&](const State& s) { snap = TakeRanksSnapshot(s); });
    out = RanksJson(snap);
    return out;
  }
  nlohmann::json RankJson(int rank) {
    const nlohmann::json all = Ranks();
    for (const auto& r : all["ranks"]) {
      if (r["rank"] == rank) return r;
    }
    return nullptr;
  }
  std::string Prom() {
    std::string out;
    agg_->Read([&](const State& s) { out = RenderPrometheus(TakeMetricsSnapshot(s)); });
    return out;
  }

  FakeClock clock_;
  Config config_;
  std::unique_ptr<Aggregator> agg_;
};

TEST_F(GpuActivityTest, WindowFiguresAreExactInRanksAndPrometheus) {
  const int64_t t0 = clock_.MonoNs() - 2 * kSec;
  // compute 450 ms, NCCL 400 ms of which 250 under compute, memcpy 100 ms.
  Control(Client(0), kSentinelWireGpuWindow,
          Window(t0, 450 * kMs, 400 * kMs, 250 * kMs, 100 * kMs));
  const nlohmann::json r = RankJson(0);
  ASSERT_TRUE(r.is_object());
  const nlohmann::json& g = r["gpu"];
  EXPECT_TRUE(g["measured"].get<bool>());
  EXPECT_DOUBLE_EQ(g["compute_ratio"].get<double>(), 0.45);
  EXPECT_DOUBLE_EQ(g["comm_ratio"].get<double>(), 0.40);
  EXPECT_DOUBLE_EQ(g["overlap_ratio"].get<double>(), 0.625);
  EXPECT_DOUBLE_EQ(g["exposed_comm_ratio"].get<double>(), 0.15);
  EXPECT_DOUBLE_EQ(g["memcpy_ratio"].get<double>(), 0.10);
  EXPECT_DOUBLE_EQ(g["idle_ratio"].get<double>(), 0.30);
  EXPECT_DOUBLE_EQ(r["overlap"].get<double>(), 0.625);  // the long-standing field, now filled
  EXPECT_TRUE(g["step"].is_null());
  const std::string prom = Prom();
  EXPECT_NE(prom.find("sentinel_gpu_overlap_ratio{rank=\"0\",uid=\"0\"} 0.625\n"),
            std::string::npos);
  EXPECT_NE(prom.find("sentinel_gpu_compute_ratio{rank=\"0\",uid=\"0\"} 0.45000000000000001\n"),
            std::string::npos)
      << prom;
  EXPECT_NE(
      prom.find("sentinel_gpu_exposed_comm_ratio{rank=\"0\",uid=\"0\"} 0.14999999999999999\n"),
      std::string::npos);
  // Ranks without windows have no GPU samples and null figures.
  EXPECT_EQ(prom.find("sentinel_gpu_compute_ratio{rank=\"1\",uid=\"0\"}"), std::string::npos);
  EXPECT_TRUE(RankJson(1)["gpu"]["compute_ratio"].is_null());
  EXPECT_TRUE(RankJson(1)["overlap"].is_null());
}

TEST_F(GpuActivityTest, NotMeasuredWindowGivesNullsNeverZeros) {
  const int64_t t0 = clock_.MonoNs() - 2 * kSec;
  Control(Client(0), kSentinelWireGpuWindow, Window(t0, 450 * kMs, 400 * kMs, 250 * kMs));
  SentinelWireGpuWindow w{};
  w.start_ns = t0 + kSec;
  w.end_ns = t0 + 2 * kSec;
  w.status = kSentinelGpuWindowForeignOwner;
  Control(Client(0), kSentinelWireGpuWindow, w);
  const nlohmann::json g = RankJson(0)["gpu"];
  EXPECT_FALSE(g["measured"].get<bool>());
  EXPECT_EQ(g["not_measured_reasons"], nlohmann::json::array({"foreign_owner"}));
  EXPECT_TRUE(g["compute_ratio"].is_null());
  EXPECT_TRUE(g["idle_ratio"].is_null());
  EXPECT_TRUE(RankJson(0)["overlap"].is_null());
  EXPECT_EQ(g["windows"], 2);
  EXPECT_EQ(g["windows_not_measured"], 1);
  const std::string prom = Prom();
  EXPECT_EQ(prom.find("sentinel_gpu_compute_ratio{rank=\"0\",uid=\"0\"}"), std::string::npos);
  EXPECT_NE(prom.find("sentinel_gpu_windows_not_measured_total{rank=\"0\",uid=\"0\"} 1\n"),
            std::string::npos);
  // Telemetry: the measured window still counts, the not-measured one is reported as such.
  nlohmann::json t;
  TelemetrySnapshot snap;
  agg_->Read([&](const State& s) { snap = TakeTelemetrySnapshot(s, 10 * kSec, clock_.MonoNs()); });
  t = TelemetryJson(snap);
  EXPECT_EQ(t["gpu"]["ranks_measured"], 1);
  EXPECT_DOUBLE_EQ(t["gpu"]["compute_ratio"].get<double>(), 0.45);
}

TEST_F(GpuActivityTest, InvalidWindowIsCountedAndIgnored) {
  SentinelWireGpuWindow w =
      Window(clock_.MonoNs(), 450 * kMs, 400 * kMs, 500 * kMs);  // overlap > nccl
  Control(Client(0), kSentinelWireGpuWindow, w);
  uint64_t invalid = 0;
  agg_->Read([&](const State& s) { invalid = s.counters.records_invalid; });
  EXPECT_EQ(invalid, 1u);
  EXPECT_EQ(RankJson(0)["gpu"]["windows"], 0);
}

// Timestamps come off the wire: spans that do not fit in int64 are refused, not computed
// (the frame-parser fuzzer found end_ns = INT64_MIN overflowing end - start; UBSan in CI).
TEST_F(GpuActivityTest, SpansThatOverflowAreRefusedAndCounted) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  SentinelWireGpuWindow w = Window(30064771075, 0, 0, 0);
  w.end_ns = kMin;  // the fuzzer's input
  Control(Client(0), kSentinelWireGpuWindow, w);
  w = Window(kMin + kSec, 0, 0, 0);
  w.start_ns = kMax;  // end - start underflows the other way
  Control(Client(0), kSentinelWireGpuWindow, w);
  w = Window(clock_.MonoNs(), 0, 0, 0);
  w.steps = 1;
  w.step_start_ns = kMin;
  w.step_end_ns = kMax;  // the step's span does not fit
  Control(Client(0), kSentinelWireGpuWindow, w);
  SentinelWireKernelAttribution a{};
  a.start_ns = kMin;
  a.end_ns = kMax;
  Control(Client(0), kSentinelWireKernelAttribution, a);
  uint64_t invalid_records = 0;
  uint64_t invalid_gpu = 0;
  agg_->Read([&](const State& s) {
    invalid_records = s.counters.records_invalid;                // the windows
    invalid_gpu = s.processes.at(Client(0))->gpu.invalid_total;  // windows and the attribution
  });
  EXPECT_EQ(invalid_records, 3u);
  EXPECT_EQ(invalid_gpu, 4u);
  const nlohmann::json g = RankJson(0)["gpu"];
  EXPECT_EQ(g["windows"], 0);
  EXPECT_EQ(g["kernels_attributed"], 0);
}

// A kernel far from a collective whose end (arrival + duration) does not fit is not matched.
TEST_F(GpuActivityTest, AttributionFarFromEveryCollectiveIsUnmatched) {
  const int64_t gpu_start = clock_.MonoNs() - kSec;
  for (int r = 0; r < 4; ++r) {
    SentinelWireCollRecord rec = MakeColl(kComm, r, 4, 7, gpu_start, 40 * kMs);
    agg_->OnRecords(Client(r), &rec, 1);
  }
  SentinelWireKernelAttribution a{};
  a.start_ns = std::numeric_limits<int64_t>::min() + 10;  // hi - lo of the candidate underflows
  a.end_ns = a.start_ns + 40 * kMs;
  Control(Client(0), kSentinelWireKernelAttribution, a);
  const nlohmann::json g = RankJson(0)["gpu"];
  EXPECT_EQ(g["kernels_attributed"], 1);
  EXPECT_EQ(g["kernels_matched"], 0);
}

TEST_F(GpuActivityTest, StepSplitIsExported) {
  SentinelWireGpuWindow w = Window(clock_.MonoNs() - 2 * kSec, 450 * kMs, 400 * kMs, 250 * kMs);
  w.steps = 1;
  w.step_start_ns = w.start_ns + 100 * kMs;
  w.step_end_ns = w.start_ns + 600 * kMs;
  w.step_compute_ns = 200 * kMs;
  w.step_exposed_comm_ns = 150 * kMs;
  w.step_idle_ns = 150 * kMs;
  Control(Client(2), kSentinelWireGpuWindow, w);
  const nlohmann::json s = RankJson(2)["gpu"]["step"];
  EXPECT_DOUBLE_EQ(s["duration_ms"].get<double>(), 500);
  EXPECT_DOUBLE_EQ(s["compute_ms"].get<double>(), 200);
  EXPECT_DOUBLE_EQ(s["exposed_comm_ms"].get<double>(), 150);
  EXPECT_DOUBLE_EQ(s["idle_ms"].get<double>(), 150);
  EXPECT_NE(Prom().find("sentinel_gpu_step_seconds{rank=\"2\",uid=\"0\",part=\"exposed_comm\"} "
                        "0.14999999999999999\n"),
            std::string::npos);
}

TEST_F(GpuActivityTest, AttributionMatchesTheCollectiveAndMeasuresClockDisagreement) {
  const int64_t gpu_start = clock_.MonoNs() - kSec;
  for (int r = 0; r < 4; ++r) {  // the join completes: the samples enter the ranks' history
    SentinelWireCollRecord rec = MakeColl(kComm, r, 4, 7, gpu_start, 40 * kMs);
    agg_->OnRecords(Client(r), &rec, 1);
  }
  SentinelWireKernelAttribution a{};
  a.start_ns = gpu_start - 30000;  // CUPTI saw it 30 us earlier than KernelCh
  a.end_ns = gpu_start + 40 * kMs - 30000;
  a.overlap_ns = 10 * kMs;
  a.stream_id = 13;
  a.pid = 2000;
  Control(Client(0), kSentinelWireKernelAttribution, a);
  const nlohmann::json g = RankJson(0)["gpu"];
  EXPECT_EQ(g["kernels_attributed"], 1);
  EXPECT_EQ(g["kernels_matched"], 1);
  EXPECT_EQ(g["kernelch_minus_cupti_ns"], 30000);
  nlohmann::json trace;
  trace = TraceJson(agg_->SnapshotTrace(clock_.MonoNs() - 10 * kSec, ApiViewer::Everything()),
                    10 * kSec, clock_.MonoNs());
  bool found = false;
  for (const auto& e : trace["traceEvents"]) {
    if (e["name"] != "NCCL kernel") continue;
    found = true;
    EXPECT_EQ(e["args"]["seq"], 7);
    EXPECT_DOUBLE_EQ(e["args"]["overlapped_fraction"].get<double>(), 0.25);
    EXPECT_DOUBLE_EQ(e["args"]["kernelch_minus_cupti_us"].get<double>(), 30.0);
  }
  EXPECT_TRUE(found);
}

TEST_F(GpuActivityTest, TraceHasAComputeTrackAndGapsForNotMeasured) {
  const int64_t t0 = clock_.MonoNs() - 3 * kSec;
  Control(Client(1), kSentinelWireGpuWindow, Window(t0, 500 * kMs, 200 * kMs, 100 * kMs));
  SentinelWireGpuWindow nm{};
  nm.start_ns = t0 + kSec;
  nm.end_ns = t0 + 2 * kSec;
  nm.status = kSentinelGpuWindowForeignClock;
  Control(Client(1), kSentinelWireGpuWindow, nm);
  nlohmann::json trace;
  trace = TraceJson(agg_->SnapshotTrace(clock_.MonoNs() - 10 * kSec, ApiViewer::Everything()),
                    10 * kSec, clock_.MonoNs());
  int counters = 0, gaps = 0, names = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["name"] == "GPU compute %") {
      ++counters;
      EXPECT_DOUBLE_EQ(e["args"]["compute"].get<double>(), 50.0);
      EXPECT_DOUBLE_EQ(e["args"]["nccl_overlap"].get<double>(), 50.0);
    }
    if (e["name"] == "GPU not measured") ++gaps;
    if (e["name"] == "thread_name" &&
        e["args"]["name"].get<std::string>().find("GPU compute (CUPTI)") != std::string::npos) {
      ++names;
    }
  }
  EXPECT_EQ(counters, 1);
  EXPECT_EQ(gaps, 1);
  EXPECT_EQ(names, 1);
}

TEST_F(GpuActivityTest, ExposedCommAccessorFlagsTheOutlierRank) {
  const int64_t t0 = clock_.MonoNs() - 2 * kSec;
  // Ranks 0-2 hide most communication; rank 3 exposes 350 ms of 400.
  for (int r = 0; r < 3; ++r) {
    Control(Client(r), kSentinelWireGpuWindow, Window(t0, 500 * kMs, 400 * kMs, 350 * kMs));
  }
  Control(Client(3), kSentinelWireGpuWindow, Window(t0, 500 * kMs, 400 * kMs, 50 * kMs));
  nlohmann::json ev3, ev0;
  agg_->Read([&](const State& s) {
    EXPECT_EQ(ExposedCommRatios(s, t0).size(), 4u);
    ev3 = ExposedCommEvidence(s, 2003, t0);
    ev0 = ExposedCommEvidence(s, 2000, t0);
  });
  EXPECT_EQ(ev3["far_above"], true);
  EXPECT_DOUBLE_EQ(ev3["exposed_comm_ratio"].get<double>(), 0.35);
  EXPECT_DOUBLE_EQ(ev3["peer_median"].get<double>(), 0.05);
  EXPECT_EQ(ev0["far_above"], false);
}

TEST(ExposedCommTest, FarAboveItsPeers) {
  const std::vector<std::pair<uint32_t, double>> ratios = {
      {1, 0.05}, {2, 0.06}, {3, 0.05}, {4, 0.40}};
  const ExposedCommOutlier o = EvaluateExposedComm(4, ratios);
  EXPECT_TRUE(o.far_above);
  EXPECT_DOUBLE_EQ(o.ratio, 0.40);
  EXPECT_DOUBLE_EQ(o.peer_median, 0.05);
  EXPECT_FALSE(EvaluateExposedComm(2, ratios).far_above);
  // Small absolute differences never count, even at 2x.
  EXPECT_FALSE(EvaluateExposedComm(1, {{1, 0.02}, {2, 0.01}, {3, 0.01}}).far_above);
  // Fewer than two measured peers: no judgement.
  EXPECT_FALSE(EvaluateExposedComm(1, {{1, 0.9}, {2, 0.01}}).far_above);
  const nlohmann::json ev = ExposedCommEvidenceJson(4, ratios);
  EXPECT_EQ(ev["far_above"], true);
  EXPECT_TRUE(ExposedCommEvidenceJson(9, ratios).is_null());
}

}  // namespace
}  // namespace sentinel::collector
