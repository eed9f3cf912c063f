// What measuring the plugin's own overhead costs (issue 10 §3: <= 5 ns per collective): one
// collective at Inspector's mask is 2 + 3N callbacks (Coll start/stop; per channel KernelCh
// start, state, stop), each inside a CallbackMeter. BM_Metered - BM_Unmetered = the meter's cost
// per collective (its clock reads included, 1 callback in 256).
#include <benchmark/benchmark.h>

#include "plugin/core/callback_meter.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin {
namespace {

ThreadState g_ts;  // an owned (not shared) thread state, as NCCL's threads get

void BM_Unmetered(benchmark::State& state) {
  const int callbacks = 2 + 3 * static_cast<int>(state.range(0));
  for (auto _ : state) {
    for (int i = 0; i < callbacks; ++i) {
      benchmark::ClobberMemory();  // the callback's body
    }
  }
  state.counters["callbacks"] = callbacks;
}
BENCHMARK(BM_Unmetered)->Arg(1)->Arg(2)->Arg(4);

void BM_Metered(benchmark::State& state) {
  const int callbacks = 2 + 3 * static_cast<int>(state.range(0));
  const uint64_t ns0 = g_ts.counters[kCtrCallbackNs].load();
  for (auto _ : state) {
    for (int i = 0; i < callbacks; ++i) {
      CallbackMeter meter(&g_ts);
      benchmark::ClobberMemory();
    }
  }
  state.counters["callbacks"] = callbacks;
  // What the meter estimates it cost, per collective (the sampled time of the empty bodies).
  state.counters["estimated_ns"] = static_cast<double>(g_ts.counters[kCtrCallbackNs].load() - ns0) /
                                   static_cast<double>(state.iterations());
}
BENCHMARK(BM_Metered)->Arg(1)->Arg(2)->Arg(4);

}  // namespace
}  // namespace sentinel::plugin

BENCHMARK_MAIN();
