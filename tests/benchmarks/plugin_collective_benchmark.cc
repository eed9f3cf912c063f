// CPU cost of one whole collective as NCCL 2.28.9 calls the profiler for it: the calls of
// tests/fakes/fake_nccl/nccl_call_sequence.h (one standalone inter-node AllReduce: GroupApi with
// its two states, CollApi, KernelLaunch, Group, Coll, ProxyOp/ProxyStep and KernelCh, each where
// the activation mask makes NCCL emit it, docs/nccl-facts.md "4.5 The activation mask"), replayed
// through the built plugin's real ncclProfiler_v5 entry points at the mask the plugin itself wrote
// at init (SENTINEL_EVENTS, default here "Coll,KernelCh", NCCL Inspector's mask). A call on a
// handle the plugin answered with NULL is skipped where NCCL skips it, so each plugin is charged
// exactly what NCCL would call. Streaming is on: with SENTINEL_DEV_BENCH_SENTINELD=<sentineld
// binary> to a real sentineld on a private socket (the production path: binary frames, batched);
// otherwise the drainer formats every record as JSONL into a dump on tmpfs (SENTINEL_DUMP, a
// debugging path that costs far more per record). The drain's cost is reported beside the hot path
// (cpu_ns: process CPU per collective, drainer thread and synchronous drains included;
// sentineld_ns: the collector's CPU).
//
// scripts/bench_vs_inspector.sh runs this benchmark side by side with NCCL Inspector's .so
// (SENTINEL_DEV_BENCH_PLUGIN). BM_FloorCollective replays the same sequence against a floor plugin
// compiled in here: one clock read and one 64-byte store per call, nothing else.
//
// BM_InspectorLikeCollective is our own model of the per-event work Inspector does
// (docs/nccl-facts.md "6.2 Inspector plugin": per-channel start/stop times, exec time as the max
// over channels, message size and bus bandwidth, one "last completed" slot per communicator behind
// a dirty flag): a same-machine reference, not Inspector's code.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>

#include "plugin/abi/nccl_profiler_abi.h"
#include "tests/benchmarks/bench_plugin.h"
#include "tests/fakes/fake_nccl/nccl_call_sequence.h"

namespace {

namespace seq = sentinel::testing::nccl_seq;

struct Plugin {
  Plugin() {
    // The caller's SENTINEL_EVENTS wins (bench_vs_inspector.sh runs each mask).
    setenv("SENTINEL_EVENTS", "Coll,KernelCh", 0);
    // A driver that does nothing but call the plugin spends most of its time in it, so the
    // default SENTINEL_BUDGET would degrade the plugin within seconds: measure it undegraded.
    setenv("SENTINEL_BUDGET", "0", 0);
    // Every record must reach the sink: a record dropped at a full ring costs less than a queued
    // one and would flatter the figure. On a loaded machine the drainer thread cannot keep up with
    // a driver that does nothing but call the plugin, so the benchmark also drains
    // synchronously (finalize, with the timer paused, its CPU counted in cpu_ns) before the ring
    // can fill; the heartbeat's records_dropped_ring is printed at the end and should be 0.
    setenv("SENTINEL_RING_RECORDS", "65536", 0);
    // SENTINEL_DEV_BENCH_SENTINELD=<sentineld binary>: the production path. The drainer streams
    // binary frames to a real sentineld this benchmark starts on a private socket, and no JSONL
    // dump is written. Otherwise the drainer formats every record as JSONL into a dump on tmpfs
    // (SENTINEL_DUMP, a debugging path) and the collector sink finds no collector.
    const char* sentineld = getenv("SENTINEL_DEV_BENCH_SENTINELD");
    if (sentineld != nullptr && *sentineld != '\0') {
      unsetenv("SENTINEL_DUMP");
      if (!collector.Start(sentineld)) abort();
      streams = true;
    } else {
      dump = sentinel::bench::MakeDumpFile("sentinel-cbench");
    }
    t = sentinel::bench::LoadPluginV5();
    Init();
  }
  // NCCL always passes its logger (a plugin may call it at init); this one prints nothing.
  void Init() { t->init(&ctx, 0xC011EC7ull, &mask, "cbench", 2, 8, 0, &QuietLogger); }
  static void QuietLogger(SentinelNcclLogLevel, unsigned long, const char*, int, const char*, ...) {
  }
  // Finalizing the only communicator drains every ring into the sink (the real final-drain path);
  // then a new communicator starts. Keeps the dump small.
  void DrainAndReinit(bool read_counters = false) {
    t->finalize(ctx);
    if (read_counters) {  // cumulative per process, in the heartbeat finalize just wrote
      records = ReadCounter("records_completed");
      ring_drops = ReadCounter("records_dropped_ring");
      stale = ReadCounter("stale_handles");
      pool_drops = ReadCounter("events_dropped_pool");
    }
    // Another plugin measured side by side (SENTINEL_DEV_BENCH_PLUGIN, e.g. NCCL Inspector) writes
    // no dump and has no rings of ours to drain: the loop then never re-creates its communicator,
    // as NCCL would not.
    writes_dump = streams || access(dump.c_str(), F_OK) == 0;
    if (!streams && writes_dump && truncate(dump.c_str(), 0) != 0) abort();
    Init();
  }
  uint64_t ReadCounter(const char* key) const {
    return sentinel::bench::ReadHeartbeatCounter(dump, key);
  }
  const SentinelProfilerV5* t = nullptr;
  std::string dump;
  void* ctx = nullptr;
  int mask = 0;
  bool writes_dump = true;  // the plugin under test is ours: its rings need draining
  bool streams = false;     // to `collector`, not to a dump
  sentinel::bench::Sentineld collector;
  uint64_t collectives = 0;  // replayed, warm-ups included (records per collective at the end)
  uint64_t records = 0;
  uint64_t ring_drops = 0;
  uint64_t stale = 0;
  uint64_t pool_drops = 0;
};

Plugin& P() {
  static Plugin* p = new Plugin();
  return *p;
}

// ---- the floor: one clock read and one 64-byte store per call ---------------------------------
struct alignas(64) FloorEntry {
  int64_t ns;
  uint64_t what;
  void* handle;
  const void* arg;
  uint64_t pad[4];
};
static_assert(sizeof(FloorEntry) == 64, "one cache line per call");
constexpr uint32_t kFloorRing = 4096;
thread_local FloorEntry t_floor[kFloorRing];
thread_local uint32_t t_floor_next = 0;

inline FloorEntry* FloorWrite(uint64_t what, void* handle, const void* arg) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  FloorEntry* e = &t_floor[t_floor_next++ & (kFloorRing - 1)];
  FloorEntry v{ts.tv_sec * 1000000000LL + ts.tv_nsec, what, handle, arg, {0, 0, 0, 0}};
  *e = v;
  return e;
}
SentinelNcclResult FloorStart(void*, void** handle, SentinelEventDescrV5* d) {
  *handle = FloorWrite(d->type, d->parent_obj, d);
  return kSentinelNcclSuccess;
}
SentinelNcclResult FloorStop(void* handle) {
  FloorWrite(1u << 20, handle, nullptr);
  return kSentinelNcclSuccess;
}
SentinelNcclResult FloorRecord(void* handle, SentinelNcclEventState state,
                               SentinelEventStateArgs* args) {
  FloorWrite(static_cast<uint64_t>(state) << 21, handle, args);
  return kSentinelNcclSuccess;
}
const SentinelProfilerV5 kFloor = {"floor", nullptr, FloorStart, FloorStop, FloorRecord, nullptr};

int64_t ProcessCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// Network steps per send/receive in the replayed collective (1: a message of at most one chunk
// per channel; SENTINEL_DEV_BENCH_STEPS for more).
int Steps() {
  const char* v = getenv("SENTINEL_DEV_BENCH_STEPS");
  int n = v != nullptr ? atoi(v) : 1;
  return n < 1 ? 1 : (n > 4 ? 4 : n);
}

// The replayer of one benchmark run, built for its channel count at the plugin's mask (large: kept
// off the stack, and freed when the next run builds its own).
seq::Replayer* FreshReplayer(const Plugin& p, int n_channels) {
  static std::unique_ptr<seq::Replayer> r;
  r = std::make_unique<seq::Replayer>(p.mask, n_channels, Steps());
  return r.get();
}

// Args: channels. The mask is the one the plugin under test wrote at init.
void BM_Collective(benchmark::State& state) {
  Plugin& p = P();
  const int n_channels = static_cast<int>(state.range(0));
  seq::Replayer* r = FreshReplayer(p, n_channels);
  int calls = 0;
  for (int i = 0; i < 2000; ++i) calls = r->Run(p.t, p.ctx);  // warm-up (TLS state, pages)
  p.DrainAndReinit();
  const int64_t daemon0 = p.collector.CpuNs();
  // A quarter of the ring between synchronous drains (the drainer thread also drains). Streaming
  // to sentineld: fewer than the collector sink's send buffer holds (about 14,500 records), since
  // on a loaded machine sentineld reads more slowly than this loop produces, and a record the
  // sink drops at a full socket costs less than one sent; finalize's flush waits for the socket.
  // cpu_ns then carries one communicator finalize + init per 2048 collectives (about 0.3 ms of
  // CPU each on the 2-core VM, i.e. ~150 ns per collective that a real job does not pay).
  const int drain_every = p.streams ? 2048 : 16384;
  int n = 0;
  int64_t drain_ns = 0;
  const int64_t cpu0 = ProcessCpuNs();
  for (auto _ : state) {
    r->Run(p.t, p.ctx);
    if (p.writes_dump && ++n == drain_every) {
      state.PauseTiming();
      const int64_t d0 = sentinel::bench::MonoNowNs();
      p.DrainAndReinit();
      drain_ns += sentinel::bench::MonoNowNs() - d0;
      n = 0;
      state.ResumeTiming();
    }
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["channels"] = n_channels;
  state.counters["mask"] = p.mask;
  state.counters["calls"] = calls;
  state.counters["cpu_ns"] = static_cast<double>(ProcessCpuNs() - cpu0) / iters;
  state.counters["sync_drain_ns"] = static_cast<double>(drain_ns) / iters;
  // The collector's CPU per collective (another process; shared by every rank of the node).
  if (p.streams)
    state.counters["sentineld_ns"] = static_cast<double>(p.collector.CpuNs() - daemon0) / iters;
  p.collectives += 2000 + static_cast<uint64_t>(state.iterations());
}
BENCHMARK(BM_Collective)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->MinTime(0.3);

// At a job's rate rather than flat out: SENTINEL_DEV_BENCH_RATE collectives a second (default
// 20,000), a batch every millisecond and a sleep until the next, as a rank waiting on its GPU
// does; 20,000 collectives per repetition. cpu_ns is the process's CPU per collective (calling
// thread, drainer and every other thread; sleeping costs nothing), measured until two drain
// periods after the last collective so that the drainer's last drain is in it; sentineld_ns the
// collector's, when streaming. No synchronous drain: the plugin's own drainer keeps up here.
void SleepUntilNs(int64_t mono_ns) {
  timespec ts{static_cast<time_t>(mono_ns / 1000000000), static_cast<long>(mono_ns % 1000000000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
  }
}

// The pacing both paced benchmarks share: SENTINEL_DEV_BENCH_RATE collectives a second in a batch
// every millisecond, `run` issuing one collective.
int PacedRate() {
  const char* rate_text = getenv("SENTINEL_DEV_BENCH_RATE");
  return rate_text != nullptr && atoi(rate_text) > 0 ? atoi(rate_text) : 20000;
}
template <typename Run>
void RunPaced(benchmark::State& state, int rate, Run run) {
  const int per_batch = rate / 1000 > 0 ? rate / 1000 : 1;
  const int64_t start = sentinel::bench::MonoNowNs();
  int64_t batches = 0;
  int in_batch = 0;
  for (auto _ : state) {
    run();
    if (++in_batch == per_batch) {
      in_batch = 0;
      SleepUntilNs(start + ++batches * 1000000);
    }
  }
}

void BM_PacedCollective(benchmark::State& state) {
  Plugin& p = P();
  const int n_channels = static_cast<int>(state.range(0));
  seq::Replayer* r = FreshReplayer(p, n_channels);
  const int rate = PacedRate();
  for (int i = 0; i < 2000; ++i) r->Run(p.t, p.ctx);
  if (p.writes_dump) p.DrainAndReinit();
  const int64_t daemon0 = p.collector.CpuNs();
  const int64_t cpu0 = ProcessCpuNs();
  RunPaced(state, rate, [&] { r->Run(p.t, p.ctx); });
  usleep(60000);  // two drain periods (25 ms each by default)
  const double iters = static_cast<double>(state.iterations());
  state.counters["channels"] = n_channels;
  state.counters["rate"] = rate;
  state.counters["cpu_ns"] = static_cast<double>(ProcessCpuNs() - cpu0) / iters;
  if (p.streams)
    state.counters["sentineld_ns"] = static_cast<double>(p.collector.CpuNs() - daemon0) / iters;
  p.collectives += 2000 + static_cast<uint64_t>(state.iterations());
}
BENCHMARK(BM_PacedCollective)->Arg(1)->Iterations(20000);

// The paced driver's own cost, in the same process: the same pacing and sequence against the floor
// plugin. Its cpu_ns, the calling thread's CPU (the driver runs nowhere else; the plugin under
// test, loaded but not called, keeps its idle threads out of it), is what any profiler's paced
// figure carries that no profiler causes: mostly the sleeps' system calls and wake-ups, a batch
// of 20 collectives per sleep at 20,000 a second. A profiler's own paced cost is its cpu_ns less
// this one.
void BM_PacedFloorCollective(benchmark::State& state) {
  Plugin& p = P();
  const int n_channels = static_cast<int>(state.range(0));
  seq::Replayer* r = FreshReplayer(p, n_channels);
  const int rate = PacedRate();
  for (int i = 0; i < 2000; ++i) r->Run(&kFloor, nullptr);
  const int64_t cpu0 = ThreadCpuNs();
  RunPaced(state, rate, [&] { r->Run(&kFloor, nullptr); });
  state.counters["channels"] = n_channels;
  state.counters["rate"] = rate;
  state.counters["cpu_ns"] =
      static_cast<double>(ThreadCpuNs() - cpu0) / static_cast<double>(state.iterations());
}

// The same sequence against the floor plugin (every start answered, so every call is made).
void BM_FloorCollective(benchmark::State& state) {
  Plugin& p = P();
  const int n_channels = static_cast<int>(state.range(0));
  seq::Replayer* r = FreshReplayer(p, n_channels);
  int calls = 0;
  for (int i = 0; i < 2000; ++i) calls = r->Run(&kFloor, nullptr);
  for (auto _ : state) r->Run(&kFloor, nullptr);
  state.counters["channels"] = n_channels;
  state.counters["mask"] = p.mask;
  state.counters["calls"] = calls;
}
BENCHMARK(BM_FloorCollective)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->MinTime(0.3);
BENCHMARK(BM_PacedFloorCollective)->Arg(1)->Iterations(20000);

// Our own model of Inspector's per-collective work (see the file comment).
struct InspectorLikeComm {
  std::mutex mu;
  struct Last {
    uint64_t sn = 0;
    uint64_t msg_bytes = 0;
    double exec_us = 0;
    double algbw = 0;
    double busbw = 0;
    int source = 0;
  } last;
  bool dirty = false;
  int nranks = 8;
};
struct InspectorLikeColl {
  uint64_t sn = 0;
  uint64_t msg_bytes = 0;
  int64_t coll_start_ns = 0;
  int n_channels = 0;
  std::atomic<int> stopped{0};
  uint64_t gpu_start[64] = {};
  uint64_t gpu_stop[64] = {};
  int64_t cpu_start[64] = {};
  int64_t cpu_stop[64] = {};
};
struct InspectorLikeCh {
  InspectorLikeColl* coll = nullptr;
  int ch = 0;
};

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void BM_InspectorLikeCollective(benchmark::State& state) {
  const int n_channels = static_cast<int>(state.range(0));
  InspectorLikeComm comm;
  static InspectorLikeColl colls[256];
  static InspectorLikeCh chans[256 * 8];
  uint64_t sn = 0;
  uint64_t gpu = 1000000;
  const char* dtype = "ncclFloat32";
  for (auto _ : state) {
    InspectorLikeColl* c = &colls[sn & 255];
    c->sn = sn++;
    c->msg_bytes = (strcmp(dtype, "ncclFloat32") == 0 ? 4u : 1u) * (1u << 20);
    c->coll_start_ns = NowNs();
    c->n_channels = n_channels;
    c->stopped.store(0, std::memory_order_relaxed);
    for (int ch = 0; ch < n_channels; ++ch) {
      InspectorLikeCh* k = &chans[(c->sn & 255) * 8 + static_cast<uint64_t>(ch)];
      k->coll = c;
      k->ch = ch;
      k->coll->gpu_start[ch] = gpu + static_cast<uint64_t>(ch);
      k->coll->cpu_start[ch] = NowNs();
      k->coll->gpu_stop[ch] = gpu + 5000 + static_cast<uint64_t>(ch);
      k->coll->cpu_stop[ch] = NowNs();
      if (k->coll->stopped.fetch_add(1, std::memory_order_acq_rel) + 1 == n_channels) {
        double exec_ns = 0;
        for (int i = 0; i < n_channels; ++i) {
          double e = static_cast<double>(c->gpu_stop[i] - c->gpu_start[i]);
          if (e > exec_ns) exec_ns = e;
        }
        double secs = exec_ns / 1e9;
        double algbw = static_cast<double>(c->msg_bytes) / 1e9 / secs;
        double busbw = algbw * 2.0 * (comm.nranks - 1) / comm.nranks;
        std::lock_guard<std::mutex> lock(comm.mu);
        comm.last.sn = c->sn;
        comm.last.msg_bytes = c->msg_bytes;
        comm.last.exec_us = exec_ns / 1000.0;
        comm.last.algbw = algbw;
        comm.last.busbw = busbw;
        comm.last.source = 0;
        comm.dirty = true;
      }
    }
    gpu += 10000;
    benchmark::DoNotOptimize(&comm);
  }
  state.counters["channels"] = n_channels;
}
BENCHMARK(BM_InspectorLikeCollective)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->MinTime(0.3);

}  // namespace

// Reports the plugin's own drop counters once all cases ran (finalize flushes a heartbeat).
int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  Plugin& p = P();
  p.DrainAndReinit(true);
  if (p.streams) {
    // The heartbeats went to sentineld: its own count of what arrived, and the plugin's drop
    // counters as the last heartbeat reported them (all should be 0 but "records received").
    p.t->finalize(p.ctx);
    usleep(500000);  // the daemon's ingest thread takes the last frames off the socket
    fprintf(stderr, "sentineld after %llu collectives of BM_Collective:\n%s%s",
            static_cast<unsigned long long>(p.collectives),
            p.collector.MetricLines("sentinel_records_received_total").c_str(),
            p.collector.MetricLines("sentinel_plugin_dropped_total").c_str());
    p.collector.Stop();
    return 0;
  }
  fprintf(stderr,
          "plugin heartbeats over the run: records_completed=%llu records_dropped_ring=%llu "
          "stale_handles=%llu events_dropped_pool=%llu\n",
          static_cast<unsigned long long>(p.records), static_cast<unsigned long long>(p.ring_drops),
          static_cast<unsigned long long>(p.stale), static_cast<unsigned long long>(p.pool_drops));
  return 0;
}
