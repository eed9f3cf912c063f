// What the guard adds to one communicator init with a warm (cached) host probe: the full
// OnCreateEnd path of the interposer, and parsing + judging a realistic 16-rank init log.
#include <stdlib.h>

#include <string>

#include "benchmark/benchmark.h"

#include "plugin/guard/guard_runtime.h"
#include "plugin/guard/host_probe.h"
#include "plugin/guard/nccl_log_parser.h"
#include "plugin/guard/verdict.h"
#include "tests/unit/guard/fake_sysfs.h"

namespace {

using sentinel::guard::Evaluate;
using sentinel::guard::Evidence;
using sentinel::guard::Expectation;
using sentinel::guard::LogEvidence;

constexpr char kExpect[] = "net=ib gdr=on intra=p2p ranks_per_node>=8 link_gbps>=400 nics>=8";

sentinel::testing::FakeSysfs& Tree() {
  static auto* fs = [] {
    auto* t = new sentinel::testing::FakeSysfs();
    for (int i = 0; i < 8; ++i) t->AddActiveIb("mlx5_" + std::to_string(i));
    t->AddUverbs(8);
    t->AddPeermem();
    return t;
  }();
  return *fs;
}

std::string InitLog() {
  std::string log =
      "node1:1:1 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n"
      "node1:1:1 [0] NCCL INFO NET/IB : Using";
  for (int i = 0; i < 8; ++i)
    log += " [" + std::to_string(i) + "]mlx5_" + std::to_string(i) + ":1/IB";
  log +=
      "; OOB eth0:10.0.0.1<0>\nnode1:1:1 [0] NCCL INFO Using network IB\n"
      "node1:1:1 [0] NCCL INFO ncclCommInitRank comm 0x10 rank 0 nranks 16 cudaDev 0 nvmlDev 0 "
      "busId 18000 commId 0x1234 - Init START\n"
      "node1:1:1 [0] NCCL INFO comm 0x10 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL "
      "0\n";
  for (int c = 0; c < 32; ++c) {
    log += "node1:1:2 [0] NCCL INFO Channel " + std::to_string(c) +
           "/0 : 0[0] -> 1[1] via P2P/CUMEM\n";
    log += "node1:1:2 [0] NCCL INFO Channel " + std::to_string(c) +
           "/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA\n";
  }
  return log;
}

void BM_ParseAndEvaluateInitLog(benchmark::State& state) {
  Expectation x;
  if (!sentinel::guard::ParseExpectation(kExpect, &x).ok()) state.SkipWithError("parse");
  sentinel::guard::ProbeOptions o;
  o.sysfs_root = Tree().sys();
  o.dev_root = Tree().dev();
  sentinel::guard::HostFacts host = sentinel::guard::ProbeHost(o);  // warm: probed once
  std::string log = InitLog();
  for (auto _ : state) {
    LogEvidence ev;
    sentinel::guard::ParseNcclLog(log, &ev);
    Evidence e;
    e.log = &ev;
    e.host = &host;
    e.env = sentinel::guard::ReadNcclEnv();
    auto v = Evaluate(x, e, sentinel::guard::Stage::kFirstCollective);
    if (!v.Passed()) state.SkipWithError("unexpected mismatch");
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_ParseAndEvaluateInitLog)->Unit(benchmark::kMicrosecond);

void BM_OnCreateEndWarmProbe(benchmark::State& state) {
  setenv("SENTINEL_EXPECT", kExpect, 1);
  setenv("SENTINEL_SYSFS_ROOT", Tree().sys().c_str(), 1);
  setenv("SENTINEL_DEVFS_ROOT", Tree().dev().c_str(), 1);
  setenv("SENTINEL_ON_MISMATCH", "warn", 1);
  setenv("SENTINEL_VERBS", "0", 1);
  sentinel::guard::ResetForTest();
  (void)sentinel::guard::CachedHostFacts(true);  // warm the probe
  void* comm = reinterpret_cast<void*>(0x10);
  for (auto _ : state) {
    sentinel::guard::OnCreateBegin();
    int r = sentinel::guard::OnCreateEnd("ncclCommInitRank", 0, &comm, 1, nullptr);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_OnCreateEndWarmProbe)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
