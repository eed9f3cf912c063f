// Hot-path cost of the BUILT plugin through its real v5 entry points: one start+stop pair for
// Coll, ProxyOp, ProxyStep and KernelCh events, the API events of one collective, against the floor
// (a CLOCK_MONOTONIC read plus one 64-byte store). Heap allocations made by the timed thread inside
// the timed loops are counted by interposing malloc/calloc/realloc and operator new in this binary,
// and reported per pair. The Coll pair queues one record per pair; to measure the steady state (not
// a full ring that drops), the loop drains the rings through the real finalize path every
// g_drain_every pairs with the timer paused, and reports the plugin's own ring-drop counter (from
// SENTINEL_DUMP's heartbeat) as `ring_drops`.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "plugin/abi/nccl_profiler_abi.h"
#include "tests/benchmarks/bench_plugin.h"

namespace {
// Per thread: only the timed thread's allocations matter (the drainer's are not the hot path).
__thread uint64_t t_allocs = 0;
}  // namespace

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void __libc_free(void*);
void* malloc(size_t n) {
  ++t_allocs;
  return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
  ++t_allocs;
  return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
  ++t_allocs;
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

// Records per ring: SENTINEL_RING_RECORDS (a documented knob) unless the caller set it. Large, so
// the synthetic drain (JSON formatting with the timer paused, which flushes the caches) comes
// rarely enough not to dominate what is measured; run with SENTINEL_RING_RECORDS=8192 to see the
// default ring drained every 2032 pairs.
constexpr const char* kBenchRingRecords = "65536";
// Pairs between two drains of the Coll benchmark: just under a quarter of the ring, the high
// water at which a ring wakes the drainer early (record_ring.h): the drainer thread would then
// format JSON on the other core while the timer runs, which is not the hot path's cost.
int g_drain_every = 1008;

struct Plugin {
  Plugin() {
    // minimal: Coll completes at its stop, so the Coll pair includes building and queueing its
    // record.
    setenv("SENTINEL_EVENTS", "minimal", 1);
    // A driver that does nothing but call the plugin spends most of its time in it, so the
    // default SENTINEL_BUDGET would degrade the plugin within seconds: measure it undegraded.
    setenv("SENTINEL_BUDGET", "0", 0);
    setenv("SENTINEL_RING_RECORDS", kBenchRingRecords, 0);
    g_drain_every = atoi(getenv("SENTINEL_RING_RECORDS")) / 4 - 16;
    if (g_drain_every < 1) g_drain_every = 1;
    dump = sentinel::bench::MakeDumpFile("sentinel-bench");
    t = sentinel::bench::LoadPluginV5();
    Init();
  }
  void Init() {
    t->init(&ctx, 0xBE4C4ull, &mask, "bench", 1, 2, 0, nullptr);
    // A long-lived parent Coll and ProxyOp for the child events.
    coll = Start(Descr(kSentinelProfileColl, nullptr));
    SentinelEventDescrV5 op = Descr(kSentinelProfileProxyOp, coll);
    op.proxy_op.pid = getpid();
    proxy_op = Start(op);
  }
  // Finalizing the only communicator drains every ring into the sinks and writes a heartbeat
  // (the real final-drain path); then a new communicator starts. Returns the plugin's cumulative
  // ring-drop counter from that heartbeat, and empties the dump so it stays small.
  uint64_t DrainAndReinit() {
    t->stop_event(proxy_op);
    t->stop_event(coll);
    t->finalize(ctx);
    uint64_t drops = ReadRingDrops();
    if (truncate(dump.c_str(), 0) != 0) abort();
    Init();
    return drops;
  }
  uint64_t ReadRingDrops() const {
    return sentinel::bench::ReadHeartbeatCounter(dump, "records_dropped_ring");
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
  std::string dump;
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
  uint64_t a0 = t_allocs;
  for (auto _ : state) {
    void* h = nullptr;
    p.t->start_event(p.ctx, &h, &d);
    p.t->stop_event(h);
  }
  state.counters["allocs_per_pair"] = benchmark::Counter(static_cast<double>(t_allocs - a0) /
                                                         static_cast<double>(state.iterations()));
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

void BM_CollPair(benchmark::State& state) {
  Plugin& p = P();
  SentinelEventDescrV5 d = Plugin::Descr(kSentinelProfileColl, nullptr);
  for (int i = 0; i < 1000; ++i) p.t->stop_event(p.Start(d));  // warm-up (TLS state, pages)
  uint64_t drops0 = p.DrainAndReinit();
  uint64_t allocs = 0;
  uint64_t a0 = t_allocs;
  int n = 0;
  for (auto _ : state) {
    void* h = nullptr;
    p.t->start_event(p.ctx, &h, &d);
    p.t->stop_event(h);
    if (++n == g_drain_every) {
      state.PauseTiming();
      allocs += t_allocs - a0;
      p.DrainAndReinit();
      n = 0;
      a0 = t_allocs;
      state.ResumeTiming();
    }
  }
  allocs += t_allocs - a0;
  uint64_t drops = p.DrainAndReinit() - drops0;
  state.counters["allocs_per_pair"] =
      benchmark::Counter(static_cast<double>(allocs) / static_cast<double>(state.iterations()));
  state.counters["ring_drops"] = benchmark::Counter(static_cast<double>(drops));
}
// Bounded: every record is formatted into the JSONL dump while the timer is paused.
BENCHMARK(BM_CollPair)->MinTime(0.2);

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

// The API events around one standalone collective, which the default mask adds to Inspector's
// (docs/nccl-facts.md "5.3 Call sequences" A, steps 1-5 and 15): GroupApi start, state 23,
// CollApi start and stop, state 24, GroupApi stop. No record: what the calling thread pays for
// the API time (api_ns) and for the group the function recovery needs.
void BM_ApiAncestors(benchmark::State& state) {
  Plugin& p = P();
  SentinelEventDescrV5 group = Plugin::Descr(kSentinelProfileGroupApi, nullptr);
  group.group_api.group_depth = 1;
  SentinelEventDescrV5 api = Plugin::Descr(kSentinelProfileCollApi, nullptr);
  api.coll_api.func = "AllReduce";
  api.coll_api.datatype = "ncclFloat32";
  api.coll_api.count = 1 << 20;
  // At `minimal` (P2pApi without GroupApi) a thread's GroupApis are kept once it has started a
  // P2pApi (ancestor_skip.h): make this one such a thread, so that all six calls are made.
  SentinelEventDescrV5 piece = Plugin::Descr(kSentinelProfileP2pApi, nullptr);
  piece.p2p_api.func = "Send";
  piece.p2p_api.datatype = "ncclInt8";
  void* piece_handle = nullptr;
  p.t->start_event(p.ctx, &piece_handle, &piece);
  if (piece_handle != nullptr) p.t->stop_event(piece_handle);
  auto one = [&] {  // returns the calls made, skipping those on NULL handles as NCCL does
    void* g = nullptr;
    p.t->start_event(p.ctx, &g, &group);
    if (g != nullptr) p.t->record_event_state(g, kSentinelStateGroupStartApiStop, nullptr);
    api.parent_obj = g;
    void* a = nullptr;
    p.t->start_event(p.ctx, &a, &api);
    if (a != nullptr) p.t->stop_event(a);
    if (g != nullptr) p.t->record_event_state(g, kSentinelStateGroupEndApiStart, nullptr);
    if (g != nullptr) p.t->stop_event(g);
    return 2 + (g != nullptr ? 3 : 0) + (a != nullptr ? 1 : 0);
  };
  for (int i = 0; i < 1000; ++i) one();  // warm-up (TLS state, pages)
  uint64_t a0 = t_allocs;
  int calls = 0;
  for (auto _ : state) calls = one();
  state.counters["allocs_per_group"] = benchmark::Counter(static_cast<double>(t_allocs - a0) /
                                                          static_cast<double>(state.iterations()));
  state.counters["calls"] = calls;
}
BENCHMARK(BM_ApiAncestors);

}  // namespace

BENCHMARK_MAIN();
