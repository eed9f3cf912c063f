// Hot-path cost of the BUILT plugin through its real v5 entry points: one start+stop pair for
// Coll, ProxyOp, ProxyStep and KernelCh events, against the floor (a CLOCK_MONOTONIC read plus
// one 64-byte store). Heap allocations during the timed loops are counted by interposing
// malloc/calloc/realloc and operator new in this binary, and reported per event.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "plugin/abi/nccl_profiler_abi.h"

namespace {
std::atomic<uint64_t> g_allocs{0};
}  // namespace

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void __libc_free(void*);
void* malloc(size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }
}
void* operator new(size_t n) {
  void* p = malloc(n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { free(p); }
void operator delete[](void* p) noexcept { free(p); }
void operator delete(void* p, size_t) noexcept { free(p); }
void operator delete[](void* p, size_t) noexcept { free(p); }

namespace {

struct Plugin {
  Plugin() {
    // minimal: Coll completes at its stop, so the Coll pair includes building and queueing its
    // record (ring full -> counted drop once the drainer falls behind).
    setenv("SENTINEL_EVENTS", "minimal", 1);
    void* h = dlopen(SENTINEL_PLUGIN_SO, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) abort();
    t = static_cast<const SentinelProfilerV5*>(dlsym(h, "ncclProfiler_v5"));
    t->init(&ctx, 0xBE4C4ull, &mask, "bench", 1, 2, 0, nullptr);
    // A long-lived parent Coll and ProxyOp for the child events.
    coll = Start(Descr(kSentinelProfileColl, nullptr));
    SentinelEventDescrV5 op = Descr(kSentinelProfileProxyOp, coll);
    op.proxy_op.pid = getpid();
    proxy_op = Start(op);
  }
  static SentinelEventDescrV5 Descr(uint64_t type, void* parent) {
    SentinelEventDescrV5 d;
    memset(&d, 0, sizeof(d));
    d.type = type;
    d.parent_obj = parent;
    if (type == kSentinelProfileColl) {
      d.coll.func = "AllReduce";
      d.coll.datatype = "ncclFloat32";
      d.coll.algo = "RING";
      d.coll.proto = "SIMPLE";
      d.coll.count = 1 << 20;
      d.coll.n_channels = 1;
    }
    return d;
  }
  void* Start(SentinelEventDescrV5 d) {
    void* h = nullptr;
    t->start_event(ctx, &h, &d);
    return h;
  }
  const SentinelProfilerV5* t = nullptr;
  void* ctx = nullptr;
  int mask = 0;
  void* coll = nullptr;
  void* proxy_op = nullptr;
};

Plugin& P() {
  static Plugin* p = new Plugin();
  return *p;
}

void Pair(benchmark::State& state, SentinelEventDescrV5 d) {
  Plugin& p = P();
  for (int i = 0; i < 1000; ++i) p.t->stop_event(p.Start(d));  // warm-up (TLS state, pages)
  uint64_t a0 = g_allocs.load();
  for (auto _ : state) {
    void* h = nullptr;
    p.t->start_event(p.ctx, &h, &d);
    p.t->stop_event(h);
  }
  state.counters["allocs_per_pair"] = benchmark::Counter(
      static_cast<double>(g_allocs.load() - a0) / static_cast<double>(state.iterations()));
}

void BM_Floor(benchmark::State& state) {
  struct alignas(64) Line {
    int64_t v[8];
  };
  static Line line;
  for (auto _ : state) {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = ts.tv_sec * 1000000000LL + ts.tv_nsec;
    for (int i = 0; i < 8; ++i) line.v[i] = now + i;
    benchmark::DoNotOptimize(&line);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Floor);

void BM_CollPair(benchmark::State& state) { Pair(state, Plugin::Descr(kSentinelProfileColl, nullptr)); }
BENCHMARK(BM_CollPair);

void BM_ProxyOpPair(benchmark::State& state) {
  SentinelEventDescrV5 d = Plugin::Descr(kSentinelProfileProxyOp, P().coll);
  d.proxy_op.pid = getpid();
  Pair(state, d);
}
BENCHMARK(BM_ProxyOpPair);

void BM_ProxyStepPair(benchmark::State& state) {
  Pair(state, Plugin::Descr(kSentinelProfileProxyStep, P().proxy_op));
}
BENCHMARK(BM_ProxyStepPair);

void BM_KernelChPair(benchmark::State& state) {
  SentinelEventDescrV5 d = Plugin::Descr(kSentinelProfileKernelCh, P().coll);
  d.kernel_ch.p_timer = 123456789;
  Pair(state, d);
}
BENCHMARK(BM_KernelChPair);

}  // namespace

BENCHMARK_MAIN();
