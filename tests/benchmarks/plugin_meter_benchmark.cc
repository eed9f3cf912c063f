// What measuring the plugin's own overhead costs (target: <= 5 ns per collective): one
// collective at Inspector's mask is 2 + 3N callbacks (Coll start/stop; per channel KernelCh
// start, state, stop). Coll start/stop each run inside a CallbackMeter, the start also meters its
// N channels (MeterCollective) and each KernelCh callback runs inside a KernelChMeter that tests
// its collective's timing weight. BM_Metered - BM_Unmetered = the meter's cost per collective (its
// clock reads included: 1 Coll callback in 256, 1 KernelCh callback in 65536).
#include <benchmark/benchmark.h>

#include "plugin/core/callback_meter.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin {
namespace {

ThreadState g_ts;  // an owned (not shared) thread state, as NCCL's threads get

// Stands in for the collective's slot: the KernelCh callbacks read its timing weight from memory.
struct FakeColl {
  uint32_t kch_weight = 0;
};
FakeColl g_coll;

void BM_Unmetered(benchmark::State& state) {
  const int channels = static_cast<int>(state.range(0));
  for (auto _ : state) {
    for (int i = 0; i < 2 + 3 * channels; ++i) {
      benchmark::ClobberMemory();  // the callback's body
    }
  }
  state.counters["callbacks"] = 2 + 3 * channels;
}
BENCHMARK(BM_Unmetered)->Arg(1)->Arg(2)->Arg(4)->Arg(8);

void BM_Metered(benchmark::State& state) {
  CalibrateMeterClock();  // as the plugin's init does
  const int channels = static_cast<int>(state.range(0));
  const uint64_t ns0 = g_ts.counters[kCtrCallbackNs].load();
  for (auto _ : state) {
    {
      CallbackMeter meter(&g_ts);  // Coll start
      g_coll.kch_weight = MeterCollective(&g_ts, static_cast<uint32_t>(channels));
      benchmark::ClobberMemory();
    }
    {
      CallbackMeter meter(&g_ts);  // Coll stop
      benchmark::ClobberMemory();
    }
    for (int i = 0; i < 3 * channels; ++i) {
      KernelChMeter meter(&g_ts);
      if (g_coll.kch_weight != 0) meter.Time(g_coll.kch_weight);
      benchmark::ClobberMemory();
    }
  }
  state.counters["callbacks"] = 2 + 3 * channels;
  // What the meter estimates it cost, per collective (the sampled time of the empty bodies).
  state.counters["estimated_ns"] = static_cast<double>(g_ts.counters[kCtrCallbackNs].load() - ns0) /
                                   static_cast<double>(state.iterations());
}
BENCHMARK(BM_Metered)->Arg(1)->Arg(2)->Arg(4)->Arg(8);

}  // namespace
}  // namespace sentinel::plugin

BENCHMARK_MAIN();
