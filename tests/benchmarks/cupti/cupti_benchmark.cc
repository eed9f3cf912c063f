// CUPTI tracer cost (targets):
//  - BM_ProcessRecords: CPU per activity record through the tracer's real path (GetNextRecord
//    walk, prefix parse, cached kernel classification, clock mapping, accounting, and the window
//    close amortised), at the 100k kernels/s shape (half compute, half NCCL, 2 streams);
//    target <= 50 ns/record.
//  - BM_FlushThreadAt100kKernelsPerSecond: the tracer's Tick loop in real time for
//    SENTINEL_DEV_BENCH_SECONDS (default 10; 600 for the soak) against the fake libcupti generating
//    100k kernels/s. Reports the tracer thread's share of one CPU (ours, without the fake's own
//    record generation) and RSS at start/end; target <= 2 %, memory flat.
#include <benchmark/benchmark.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "plugin/cupti/cupti_tracer.h"
#include "tests/fakes/fake_cupti/fake_cupti.h"
#include "tests/fakes/fake_cupti/fake_cupti_api.h"

// Every operator new of the process is counted, so the record path's steady-state allocations
// are measured rather than assumed.
std::atomic<uint64_t> g_allocations{0};

namespace sentinel::plugin::cupti {
namespace {

constexpr int64_t kMs = 1000000;
const char kGemm[] = "_Z11gemm_kernelPKfS0_Pfiii";
const char kNccl[] =
    "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

int64_t MonoNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

long RssKib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// One buffer of n kernel records as CUPTI lays them out (Kernel10, 216 bytes).
std::vector<uint8_t> MakeBuffer(int n, int64_t t0, int64_t offset) {
  std::vector<uint8_t> buf(static_cast<size_t>(n) * 216, 0);
  for (int i = 0; i < n; ++i) {
    uint8_t* p = buf.data() + static_cast<size_t>(i) * 216;
    uint32_t kind = kKindConcurrentKernel;
    // 100k kernels/s: one kernel every 10 us, 8 us long, alternating compute and NCCL.
    uint64_t start = static_cast<uint64_t>(t0 + offset + i * 10000LL);
    uint64_t end = start + 8000;
    uint32_t stream = (i & 1) != 0 ? 13 : 7;
    const char* name = (i & 1) != 0 ? kNccl : kGemm;
    memcpy(p + kernel::kKind, &kind, 4);
    memcpy(p + kernel::kStart, &start, 8);
    memcpy(p + kernel::kEnd, &end, 8);
    memcpy(p + kernel::kStreamId, &stream, 4);
    memcpy(p + kernel::kName, &name, sizeof(name));
  }
  return buf;
}

void BM_ProcessRecords(benchmark::State& state) {
  fake_cupti_reset();
  const int64_t offset = 1790000000LL * 1000 * kMs;
  int64_t now = 1000LL * 1000 * kMs;
  fake_cupti_set_fixed_time(now + offset);
  CuptiApi api = testing::FakeCuptiApi();
  CuptiConfig config;
  config.attributions_per_window = 256;
  uint64_t windows = 0;
  CuptiTracer::Env env;
  env.mono_now = [&] { return now; };
  env.realtime_now = [&] { return now + offset; };
  env.emit_window = [&](const SentinelWireGpuWindow&) { ++windows; };
  CuptiTracer tracer(&api, config, std::move(env));
  const Status armed = tracer.Arm();
  if (!armed.ok()) {
    state.SkipWithError(armed.message());
    return;
  }
  constexpr int kPerBuffer = 10000;  // 100 ms of activity at 100k kernels/s
  int64_t t = tracer.accounting().closed_until();
  std::vector<uint8_t> buf;
  int64_t records = 0;
  int64_t iteration = 0;
  uint64_t steady_allocations = 0;  // in the timed part, after the first 5 s of activity
  for (auto _ : state) {
    state.PauseTiming();
    buf = MakeBuffer(kPerBuffer, t, offset);
    const uint64_t allocations_before = g_allocations.load(std::memory_order_relaxed);
    state.ResumeTiming();
    tracer.ParseBufferForTest(buf.data(), buf.size());
    t += kPerBuffer * 10000LL;
    now = t;
    fake_cupti_set_fixed_time(now + offset);
    tracer.Tick();  // closes windows (unions measured + attribution), amortised over the records
    records += kPerBuffer;
    state.PauseTiming();
    if (++iteration > 50) {
      steady_allocations += g_allocations.load(std::memory_order_relaxed) - allocations_before;
    }
    state.ResumeTiming();
  }
  state.SetItemsProcessed(records);
  state.counters["ns_per_record"] = benchmark::Counter(
      static_cast<double>(records), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["windows"] = static_cast<double>(windows);
  state.counters["pending"] = static_cast<double>(tracer.accounting().pending());
  state.counters["steady_allocations"] = static_cast<double>(steady_allocations);
}
BENCHMARK(BM_ProcessRecords)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_FlushThreadAt100kKernelsPerSecond(benchmark::State& state) {
  const char* s = getenv("SENTINEL_DEV_BENCH_SECONDS");
  const double seconds = s != nullptr ? atof(s) : 10.0;
  for (auto _ : state) {
    fake_cupti_reset();
    setenv("FAKE_CUPTI_GEN", "1", 1);
    setenv("FAKE_CUPTI_PERIOD_US", "20", 1);  // 2 kernels per 20 us = 100k kernels/s
    CuptiApi api = testing::FakeCuptiApi();
    // The fake's record generation happens inside FlushAll: time it to subtract it.
    static int64_t fake_ns;
    fake_ns = 0;
    static int (*real_flush)(uint32_t) = &cuptiActivityFlushAll;
    api.activity_flush_all = [](uint32_t flag) {
      int64_t t0 = ThreadCpuNs();
      int rc = real_flush(flag);
      fake_ns += ThreadCpuNs() - t0;
      return rc;
    };
    CuptiConfig config;  // production defaults: 1 s windows, 100 ms flush, 8 x 1 MiB buffers
    uint64_t windows = 0, kernels = 0, dropped = 0;
    CuptiTracer::Env env;
    env.emit_window = [&](const SentinelWireGpuWindow& w) {
      ++windows;
      kernels += w.kernels;
      dropped += w.records_dropped;
    };
    CuptiTracer tracer(&api, config, std::move(env));
    const Status armed = tracer.Arm();
    if (!armed.ok()) {
      state.SkipWithError(armed.message());
      return;
    }
    const long rss_start = RssKib();
    long rss_after_warmup = -1;
    const int64_t wall0 = MonoNow();
    const int64_t cpu0 = ThreadCpuNs();
    const int64_t end = wall0 + static_cast<int64_t>(seconds * 1e9);
    size_t max_pending = 0;
    int64_t max_tick_gap = 0;  // the longest time between two Ticks (a starved thread drops)
    int64_t last_tick = wall0;
    int64_t next_report = wall0 + 60 * 1000 * kMs;
    while (MonoNow() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(config.flush_ms));
      const int64_t tick = MonoNow();
      max_tick_gap = std::max(max_tick_gap, tick - last_tick);
      last_tick = tick;
      tracer.Tick();
      max_pending = std::max(max_pending, tracer.accounting().pending());
      if (rss_after_warmup < 0 && MonoNow() - wall0 > 3 * 1000 * kMs) rss_after_warmup = RssKib();
      if (tick >= next_report) {
        // One line a minute for the soak: memory and drops over time, not only at the ends.
        next_report += 60 * 1000 * kMs;
        const double secs = static_cast<double>(tick - wall0) / 1e9;
        fprintf(stderr,
                "soak t=%.0fs rss=%ld KiB accounting=%zu KiB ours_cpu=%.2f%% kernels=%llu "
                "dropped=%llu max_tick_gap=%.0f ms\n",
                secs, RssKib(), tracer.accounting().memory_bytes() / 1024,
                100.0 * static_cast<double>(ThreadCpuNs() - cpu0 - fake_ns) /
                    static_cast<double>(tick - wall0),
                static_cast<unsigned long long>(kernels), static_cast<unsigned long long>(dropped),
                static_cast<double>(max_tick_gap) / 1e6);
      }
    }
    const int64_t cpu = ThreadCpuNs() - cpu0;
    const int64_t wall = MonoNow() - wall0;
    state.counters["cpu_share_total_pct"] =
        100.0 * static_cast<double>(cpu) / static_cast<double>(wall);
    state.counters["cpu_share_ours_pct"] =
        100.0 * static_cast<double>(cpu - fake_ns) / static_cast<double>(wall);
    state.counters["kernels_per_s"] =
        static_cast<double>(kernels) * 1e9 / static_cast<double>(wall);
    state.counters["windows"] = static_cast<double>(windows);
    state.counters["dropped"] = static_cast<double>(dropped);
    state.counters["rss_start_kib"] = static_cast<double>(rss_start);
    state.counters["rss_after_3s_kib"] = static_cast<double>(rss_after_warmup);
    state.counters["rss_end_kib"] = static_cast<double>(RssKib());
    state.counters["max_pending"] = static_cast<double>(max_pending);
    state.counters["max_tick_gap_ms"] = static_cast<double>(max_tick_gap) / 1e6;
    state.counters["accounting_kib"] =
        static_cast<double>(tracer.accounting().memory_bytes()) / 1024.0;
    state.counters["seconds"] = static_cast<double>(wall) / 1e9;
  }
}
BENCHMARK(BM_FlushThreadAt100kKernelsPerSecond)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
}  // namespace sentinel::plugin::cupti

// GCC pairs the inlined free() with the counted new as a mismatch; both use malloc/free here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  void* p = malloc(n != 0 ? n : 1);
  if (p == nullptr) abort();  // the benchmark has no use for std::bad_alloc
  return p;
}
void operator delete(void* p) noexcept { free(p); }
void operator delete(void* p, size_t) noexcept { free(p); }

BENCHMARK_MAIN();
