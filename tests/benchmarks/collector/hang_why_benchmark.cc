// What naming a hang's why costs sentineld's tick: the wait-cycle search (wait_cycle.h) on
// 64 to 8,192 stuck processes (a world communicator half missing, each missing rank waiting for
// its partner in a pair communicator: one component holding everyone; and a ring of pair
// communicators: one cycle of n hops), and the mismatch comparison (hang_mismatch.h) of n ranks
// with `history` completed collectives each and the first divergence at the newest of them (every
// position is compared). A figure, not a test.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "collector/aggregate/hang_mismatch.h"
#include "collector/aggregate/wait_cycle.h"
#include "tests/unit/collector/op_signature_test_util.h"

namespace sentinel::collector {
namespace {

WaitMember BenchMember(int32_t rank, uint64_t process) {
  WaitMember m;
  m.rank = rank;
  m.process = process;
  return m;
}

void BM_WaitCyclesWorldHalfMissing(benchmark::State& state) {
  const auto n = static_cast<int32_t>(state.range(0));
  std::vector<CommWait> waits;
  CommWait world;
  world.comm_hash = 1;
  world.position = 100;
  for (int32_t r = 0; r < n; ++r) {
    const auto proc = static_cast<uint64_t>(r);
    if (r % 2 == 0) {
      world.waiting.push_back(BenchMember(r, proc));
      continue;
    }
    world.missing.push_back(BenchMember(r, proc));
    CommWait pair;
    pair.comm_hash = 0x1000 + proc;
    pair.position = 3;
    pair.waiting.push_back(BenchMember(1, proc));
    pair.missing.push_back(BenchMember(0, proc - 1));
    waits.push_back(pair);
  }
  waits.push_back(world);
  for (auto _ : state) {
    WaitCycles c = FindWaitCycles(waits);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_WaitCyclesWorldHalfMissing)
    ->Arg(64)
    ->Arg(1024)
    ->Arg(8192)
    ->Unit(benchmark::kMicrosecond);

void BM_WaitCyclesRing(benchmark::State& state) {
  const auto n = static_cast<int32_t>(state.range(0));
  std::vector<CommWait> waits;
  for (int32_t i = 0; i < n; ++i) {
    CommWait w;
    w.comm_hash = 0x2000 + static_cast<uint64_t>(i);
    w.position = 7;
    w.waiting.push_back(BenchMember(0, static_cast<uint64_t>(i)));
    w.missing.push_back(BenchMember(1, static_cast<uint64_t>((i + 1) % n)));
    waits.push_back(w);
  }
  for (auto _ : state) {
    WaitCycles c = FindWaitCycles(waits);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_WaitCyclesRing)->Arg(64)->Arg(1024)->Arg(8192)->Unit(benchmark::kMicrosecond);

void BM_MismatchWithHistory(benchmark::State& state) {
  const auto n = static_cast<int32_t>(state.range(0));
  const auto history = static_cast<uint64_t>(state.range(1));
  constexpr uint64_t kT = 100000;
  std::vector<RankOps> ranks;
  for (int32_t r = 0; r < n; ++r) {
    RankOps ro;
    ro.rank = r;
    ro.issued = true;
    ro.at_stuck = testing::SigOf(r == 3 ? kSentinelFuncAllGather : kSentinelFuncAllReduce,
                                 16 * testing::kMiB, testing::kBf16);
    for (uint64_t p = kT - history; p < kT; ++p) {
      const bool odd = r == 3 && p == kT - 1;
      ro.history.push_back({p, testing::SigOf(kSentinelFuncAllReduce,
                                              (odd ? 8 : 16) * testing::kMiB, testing::kBf16)});
    }
    ranks.push_back(ro);
  }
  for (auto _ : state) {
    MismatchVerdict v = CompareAtPosition(1, kT, ranks);
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_MismatchWithHistory)
    ->Args({8, 2000})
    ->Args({64, 2000})
    ->Args({1024, 256})
    ->Args({8192, 32})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace sentinel::collector

BENCHMARK_MAIN();
