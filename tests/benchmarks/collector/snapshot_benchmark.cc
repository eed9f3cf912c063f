// What a reader of the aggregator costs the ingest thread on a 1,024-rank node (export
// reads a snapshot): the time spent under the aggregator's lock to copy a TraceSnapshot
// (snapshot.h) versus rendering under the lock, and a MetricsSnapshot (metrics_snapshot.h) for
// /metrics versus rendering it (after the lock; under it before: 19.3 ms on 1,024 ranks at
// commit db56a7f, BM_PrometheusUnderLock), and the /v1/ranks and /v1/telemetry snapshots
// (api_snapshot.h) versus rendering them. One communicator of `ranks` ranks, one per client, each
// with `samples` joined 1 MiB all-reduces kept. A figure, not a test.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/api_snapshot.h"
#include "collector/aggregate/metrics_snapshot.h"
#include "collector/aggregate/snapshot.h"
#include "collector/export/api_json.h"
#include "collector/export/prometheus_text.h"
#include "collector/export/trace_json.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

constexpr int64_t kWindowNs = 3600LL * 1000000000;

std::unique_ptr<Aggregator> Node(int ranks, int samples) {
  Config config;
  config.max_clients = ranks;
  auto agg = std::make_unique<Aggregator>(config, RealClock());
  for (int r = 0; r < ranks; ++r) {
    agg->NoteAccepted(r + 1, static_cast<uint32_t>(1000 + r), 0);
    agg->OnHello(r + 1, testing::MakeHello(static_cast<uint32_t>(1000 + r)));
  }
  const int64_t base = RealClock()->MonoNs() - int64_t{samples} * 1000000;
  std::vector<SentinelWireCollRecord> batch;
  for (int r = 0; r < ranks; ++r) {
    batch.clear();
    for (int i = 0; i < samples; ++i) {
      batch.push_back(testing::MakeColl(0xC0FFEE, r, ranks, static_cast<uint64_t>(i),
                                        base + int64_t{i} * 1000000 + int64_t{r} * 100, 500000));
    }
    agg->OnRecords(r + 1, batch.data(), batch.size());
  }
  return agg;
}

// Copy under the lock (what /v1/trace now holds the lock for).
void BM_TakeTraceSnapshot(benchmark::State& st) {
  auto agg = Node(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)));
  const int64_t since = RealClock()->MonoNs() - kWindowNs;
  size_t samples = 0;
  for (auto _ : st) {
    TraceSnapshot snap;
    agg->Read([&](const State& s) { snap = TakeTraceSnapshot(s, since); });
    samples = 0;
    for (const auto& r : snap.ranks) samples += r.samples.size();
    benchmark::DoNotOptimize(snap);
  }
  st.counters["samples"] = static_cast<double>(samples);
}

// Rendering from the snapshot (after the lock is released).
void BM_TraceJsonFromSnapshot(benchmark::State& st) {
  auto agg = Node(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)));
  const int64_t now = RealClock()->MonoNs();
  TraceSnapshot snap;
  agg->Read([&](const State& s) { snap = TakeTraceSnapshot(s, now - kWindowNs); });
  for (auto _ : st) benchmark::DoNotOptimize(TraceJson(snap, kWindowNs, now).dump());
}

// Before: the whole trace rendered under the lock.
void BM_TraceJsonUnderLock(benchmark::State& st) {
  auto agg = Node(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)));
  const int64_t now = RealClock()->MonoNs();
  for (auto _ : st) {
    nlohmann::json body;
    agg->Read([&](const State& s) {
      body = TraceJson(TakeTraceSnapshot(s, now - kWindowNs), kWindowNs, now);
    });
    benchmark::DoNotOptimize(body);
  }
}

// /metrics now: the copy under the lock (TakeMetricsSnapshot), what a scrape holds ingest for.
void BM_TakeMetricsSnapshot(benchmark::State& st) {
  auto agg = Node(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)));
  for (auto _ : st) {
    MetricsSnapshot snap;
    agg->Read([&](const State& s) { snap = TakeMetricsSnapshot(s); });
    benchmark::DoNotOptimize(snap);
  }
}

// /metrics rendering from the snapshot (series budget and text), after the lock is released.
void BM_PrometheusFromSnapshot(benchmark::State& st) {
  auto agg = Node(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)));
  MetricsSnapshot snap;
  agg->Read([&](const State& s) { snap = TakeMetricsSnapshot(s); });
  size_t bytes = 0;
  for (auto _ : st) {
    const std::string out = RenderPrometheus(snap);
    bytes = out.size();
    benchmark::DoNotOptimize(out);
  }
  st.counters["bytes"] = static_cast<double>(bytes);
}

// /v1/ranks and /v1/telemetry now: the copy under the lock (api_snapshot.h). Before, the whole
// JSON was rendered under it (BM_RanksJsonUnderLock, BM_TelemetryJsonUnderLock at commit
// ac8621e): /v1/ranks 21.9 ms (16 samples a rank) and 27.2 ms (256), /v1/telemetry 0.029 ms.
void BM_TakeRanksSnapshot(benchmark::State& st) {
  auto agg = Node(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)));
  for (auto _ : st) {
    RanksSnapshot snap;
    agg->Read([&](const State& s) { snap = TakeRanksSnapshot(s); });
    benchmark::DoNotOptimize(snap);
  }
}
void BM_TakeTelemetrySnapshot(benchmark::State& st) {
  auto agg = Node(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)));
  const int64_t now = RealClock()->MonoNs();
  for (auto _ : st) {
    TelemetrySnapshot snap;
    agg->Read([&](const State& s) { snap = TakeTelemetrySnapshot(s, kWindowNs, now); });
    benchmark::DoNotOptimize(snap);
  }
}

// Their rendering from the snapshots (percentiles, sorting, JSON), after the lock is released.
void BM_RanksJsonFromSnapshot(benchmark::State& st) {
  auto agg = Node(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)));
  RanksSnapshot snap;
  agg->Read([&](const State& s) { snap = TakeRanksSnapshot(s); });
  for (auto _ : st) benchmark::DoNotOptimize(RanksJson(snap).dump());
}
void BM_TelemetryJsonFromSnapshot(benchmark::State& st) {
  auto agg = Node(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)));
  const int64_t now = RealClock()->MonoNs();
  TelemetrySnapshot snap;
  agg->Read([&](const State& s) { snap = TakeTelemetrySnapshot(s, kWindowNs, now); });
  for (auto _ : st) benchmark::DoNotOptimize(TelemetryJson(snap).dump());
}

BENCHMARK(BM_TakeTraceSnapshot)
    ->Args({1024, 16})
    ->Args({1024, 256})
    ->Args({1024, 1024})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TraceJsonFromSnapshot)->Args({1024, 16})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TraceJsonUnderLock)->Args({1024, 16})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TakeMetricsSnapshot)->Args({1024, 16})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PrometheusFromSnapshot)->Args({1024, 16})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TakeRanksSnapshot)->Args({1024, 16})->Args({1024, 256})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TakeTelemetrySnapshot)
    ->Args({1024, 16})
    ->Args({1024, 256})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RanksJsonFromSnapshot)->Args({1024, 16})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TelemetryJsonFromSnapshot)->Args({1024, 16})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sentinel::collector

BENCHMARK_MAIN();
