// Cost libnccl-net-sentinel.so adds per isend / irecv / test (issue 10 target: <= 30 ns per call).
// The fake net plugin runs with FAKE_NET_NULL_IO=1 (a static request, done at once, no socket), so
// the difference between the Direct and Wrapped benchmarks is the wrapper: comm lookup, request
// tagging, one TSC read at isend/irecv and one at the completing test, and the counters.
//   net_wrap_benchmark [--benchmark_repetitions=5]
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>

#include "plugin/net/net_abi.h"

namespace {

struct Setup {
  SentinelNetV11* net = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

Setup Make(SentinelNetV11* net) {
  Setup s;
  s.net = net;
  void* ctx = nullptr;
  if (net->init(&ctx, 1, nullptr, nullptr, nullptr) != 0) abort();
  char handle[SENTINEL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  if (net->listen(ctx, 0, handle, &listen) != 0) abort();
  for (int i = 0; i < 100000 && (s.send == nullptr || s.recv == nullptr); ++i) {
    if (s.send == nullptr) net->connect(ctx, 0, handle, &s.send, nullptr);
    if (s.recv == nullptr) net->accept(listen, &s.recv, nullptr);
  }
  if (s.send == nullptr || s.recv == nullptr) abort();
  return s;
}

Setup& Direct() {
  static Setup s = [] {
    void* dl = dlopen(FAKE_NET_SO, RTLD_NOW | RTLD_LOCAL);
    if (dl == nullptr) abort();
    return Make(static_cast<SentinelNetV11*>(dlsym(dl, "ncclNetPlugin_v11")));
  }();
  return s;
}

Setup& Wrapped() {
  static Setup s = [] {
    void* dl = dlopen(SENTINEL_NET_SO, RTLD_NOW | RTLD_LOCAL);
    if (dl == nullptr) abort();
    return Make(static_cast<SentinelNetV11*>(dlsym(dl, "ncclNetPlugin_v11")));
  }();
  return s;
}

// One isend + one irecv + the two tests that complete them: 4 calls per iteration.
void Round(const Setup& s) {
  static char buf[64];
  void* data[1] = {buf};
  size_t sizes[1] = {sizeof(buf)};
  int tags[1] = {1};
  void* mh[1] = {nullptr};
  void* ph[1] = {nullptr};
  void* sreq = nullptr;
  void* rreq = nullptr;
  int done = 0;
  int size = 0;
  s.net->isend(s.send, buf, sizeof(buf), 1, nullptr, nullptr, &sreq);
  s.net->irecv(s.recv, 1, data, sizes, tags, mh, ph, &rreq);
  s.net->test(sreq, &done, &size);
  s.net->test(rreq, &done, &size);
  benchmark::DoNotOptimize(done);
}

void BM_Direct(benchmark::State& state) {
  const Setup& s = Direct();
  for (auto _ : state) Round(s);
  state.counters["ns_per_call"] =
      benchmark::Counter(4.0 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Direct);

void BM_Wrapped(benchmark::State& state) {
  const Setup& s = Wrapped();
  for (auto _ : state) Round(s);
  state.counters["ns_per_call"] =
      benchmark::Counter(4.0 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Wrapped);

}  // namespace

int main(int argc, char** argv) {
  setenv("FAKE_NET_NULL_IO", "1", 1);
  setenv("SENTINEL_NET_WRAP", FAKE_NET_SO, 1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
