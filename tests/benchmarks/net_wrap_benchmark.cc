// Cost libnccl-net-sentinel.so adds per isend / irecv / test (target: <= 30 ns per call),
// for a v11 plugin and for a v8 plugin (int sizes) driven through our v8 table.
// The fake net plugin runs with FAKE_NET_NULL_IO=1 (a static request, done at once, no socket), so
// the difference between the Direct and Wrapped benchmarks is the wrapper: comm lookup, request
// tagging, one TSC read at isend/irecv and one at the completing test, and the counters.
//   net_wrap_benchmark [--benchmark_repetitions=5]
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "plugin/net/net_abi.h"
#include "plugin/net/net_versions.h"

namespace {

using sentinel::net::NetApi;

template <int V>
struct Setup {
  typename NetApi<V>::Table* net = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

template <int V>
Setup<V> Make(void* dl) {
  if (dl == nullptr) abort();
  std::string sym = "ncclNetPlugin_v" + std::to_string(V);
  Setup<V> s;
  s.net = static_cast<typename NetApi<V>::Table*>(dlsym(dl, sym.c_str()));
  if (s.net == nullptr) abort();
  auto* net = s.net;
  void* ctx = nullptr;
  char handle[SENTINEL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  if constexpr (V == 11) {
    if (net->init(&ctx, 1, nullptr, nullptr, nullptr) != 0) abort();
    if (net->listen(ctx, 0, handle, &listen) != 0) abort();
  } else {
    if (net->init(nullptr) != 0) abort();
    if (net->listen(0, handle, &listen) != 0) abort();
  }
  for (int i = 0; i < 100000 && (s.send == nullptr || s.recv == nullptr); ++i) {
    if constexpr (V == 11) {
      if (s.send == nullptr) net->connect(ctx, 0, handle, &s.send, nullptr);
    } else {
      if (s.send == nullptr) net->connect(0, handle, &s.send, nullptr);
    }
    if (s.recv == nullptr) net->accept(listen, &s.recv, nullptr);
  }
  if (s.send == nullptr || s.recv == nullptr) abort();
  return s;
}

std::string g_wrapper_v8;  // a copy of the wrapper, so it loads a second time over the v8 fake

Setup<11>& Direct() {
  static Setup<11> s = Make<11>(dlopen(FAKE_NET_SO, RTLD_NOW | RTLD_LOCAL));
  return s;
}
Setup<11>& Wrapped() {
  static Setup<11> s = [] {
    setenv("SENTINEL_NET_WRAP", FAKE_NET_SO, 1);
    return Make<11>(dlopen(SENTINEL_NET_SO, RTLD_NOW | RTLD_LOCAL));
  }();
  return s;
}
Setup<8>& DirectV8() {
  static Setup<8> s = Make<8>(dlopen(FAKE_NET_V8_SO, RTLD_NOW | RTLD_LOCAL));
  return s;
}
Setup<8>& WrappedV8() {
  static Setup<8> s = [] {
    setenv("SENTINEL_NET_WRAP", FAKE_NET_V8_SO, 1);
    return Make<8>(dlopen(g_wrapper_v8.c_str(), RTLD_NOW | RTLD_LOCAL));
  }();
  return s;
}

// One isend + one irecv + the two tests that complete them: 4 calls per iteration.
template <int V>
void Round(const Setup<V>& s) {
  using Size = typename NetApi<V>::Size;
  static char buf[64];
  void* data[1] = {buf};
  Size sizes[1] = {sizeof(buf)};
  int tags[1] = {1};
  void* mh[1] = {nullptr};
  void* sreq = nullptr;
  void* rreq = nullptr;
  int done = 0;
  int size = 0;
  if constexpr (V == 11) {
    void* ph[1] = {nullptr};
    s.net->isend(s.send, buf, sizeof(buf), 1, nullptr, nullptr, &sreq);
    s.net->irecv(s.recv, 1, data, sizes, tags, mh, ph, &rreq);
  } else {
    s.net->isend(s.send, buf, sizeof(buf), 1, nullptr, &sreq);
    s.net->irecv(s.recv, 1, data, sizes, tags, mh, &rreq);
  }
  s.net->test(sreq, &done, &size);
  s.net->test(rreq, &done, &size);
  benchmark::DoNotOptimize(done);
}

template <int V>
void Run(benchmark::State& state, const Setup<V>& s) {
  for (auto _ : state) Round(s);
  state.counters["ns_per_call"] =
      benchmark::Counter(4.0 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_Direct(benchmark::State& state) { Run(state, Direct()); }
BENCHMARK(BM_Direct);
void BM_Wrapped(benchmark::State& state) { Run(state, Wrapped()); }
BENCHMARK(BM_Wrapped);
void BM_DirectV8(benchmark::State& state) { Run(state, DirectV8()); }
BENCHMARK(BM_DirectV8);
void BM_WrappedV8(benchmark::State& state) { Run(state, WrappedV8()); }
BENCHMARK(BM_WrappedV8);

}  // namespace

int main(int argc, char** argv) {
  setenv("FAKE_NET_NULL_IO", "1", 1);
  setenv("SENTINEL_NET_WRAP", FAKE_NET_SO, 1);
  // A second copy of the wrapper (a library loads once per path) wraps the v8 fake.
  g_wrapper_v8 = "/tmp/libnccl-net-sentinel-bench-v8." + std::to_string(getpid()) + ".so";
  {
    std::ifstream in(SENTINEL_NET_SO, std::ios::binary);
    std::ofstream out(g_wrapper_v8, std::ios::binary);
    out << in.rdbuf();
    if (!in || !out) {
      fprintf(stderr, "cannot copy %s to %s\n", SENTINEL_NET_SO, g_wrapper_v8.c_str());
      return 2;
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  unlink(g_wrapper_v8.c_str());
  return 0;
}
