// A minimal NCCL stand-in for the end-to-end tests: dlopens the built plugin, drives one rank's
// collectives through ncclProfiler_v6 in NCCL's call order (docs/nccl-facts.md "5.3 Call sequences"
// A), and times every callback, so that a test can show no callback blocked while sentineld was
// killed. Usage: callback_timing_host PLUGIN_SO SECONDS RANK NRANKS COMM_HASH PERIOD_US Prints one
// line: calls=N max_ns=M over_1ms=K colls=C blocked_calls=B blocked_max_ns=X blocked_over_1ms=Y
// faulted_over_1ms=F init_finalize_max_ns=Z (event callbacks; init/finalize apart).
#include <dlfcn.h>
#include <sys/resource.h>
#include <time.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "plugin/abi/nccl_profiler_abi.h"

namespace {

int64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Voluntary context switches of this thread: the thread slept inside the call (a lock, a
// blocking syscall, or a page fault that waited: reading code from disk, reclaiming memory).
// Involuntary ones are the scheduler preempting a busy machine, which wall time alone cannot tell
// apart from blocking. Page faults are counted too, to tell the kernel's paging from a wait of the
// plugin's own.
struct ThreadUsage {
  long voluntary_switches = 0;
  long page_faults = 0;
};
ThreadUsage Usage() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return {ru.ru_nvcsw, ru.ru_minflt + ru.ru_majflt};
}

struct Timing {
  uint64_t calls = 0;
  int64_t max_ns = 0;
  uint64_t over_1ms = 0;
  uint64_t blocked_calls = 0;     // calls during which the thread blocked at all
  int64_t blocked_max_ns = 0;     // the longest of those
  uint64_t blocked_over_1ms = 0;  // blocked, no page fault, longer than 1 ms: the test forbids it
  uint64_t faulted_over_1ms = 0;  // blocked during a page fault, longer than 1 ms: the kernel's
  template <typename Fn>
  void Time(Fn&& fn) {
    ThreadUsage u0 = Usage();
    int64_t t0 = NowNs();
    fn();
    int64_t dt = NowNs() - t0;
    ThreadUsage u1 = Usage();
    ++calls;
    if (dt > max_ns) max_ns = dt;
    if (dt > 1'000'000) ++over_1ms;
    if (u1.voluntary_switches != u0.voluntary_switches) {
      ++blocked_calls;
      if (dt > blocked_max_ns) blocked_max_ns = dt;
      if (dt > 1'000'000) {
        if (u1.page_faults != u0.page_faults) {
          ++faulted_over_1ms;
        } else {
          ++blocked_over_1ms;
        }
      }
    }
  }
};

void SleepNs(int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  nanosleep(&ts, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s PLUGIN_SO SECONDS RANK NRANKS COMM_HASH PERIOD_US\n", argv[0]);
    return 2;
  }
  void* so = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (so == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  auto* prof = static_cast<SentinelProfilerV6*>(dlsym(so, "ncclProfiler_v6"));
  if (prof == nullptr) return 2;
  const double seconds = std::atof(argv[2]);
  const int rank = std::atoi(argv[3]);
  const int nranks = std::atoi(argv[4]);
  const uint64_t comm = std::strtoull(argv[5], nullptr, 0);
  const int64_t period_ns = std::atoll(argv[6]) * 1000;

  Timing t;
  void* ctx = nullptr;
  int mask = 0;
  // init and finalize are slow paths (finalize drains and flushes, bounded): timed apart.
  Timing slow;
  slow.Time([&] { prof->init(&ctx, comm, &mask, "timing-host", 1, nranks, rank, nullptr); });
  const int64_t end = NowNs() + static_cast<int64_t>(seconds * 1e9);
  uint64_t seq = 0;
  while (NowNs() < end) {
    void* group_api = nullptr;
    void* coll_api = nullptr;
    void* coll = nullptr;
    SentinelEventDescrV6 d;
    if (mask & kSentinelProfileGroupApi) {
      std::memset(&d, 0, sizeof(d));
      d.type = kSentinelProfileGroupApi;
      d.rank = rank;
      d.group_api.group_depth = 1;
      t.Time([&] { prof->start_event(ctx, &group_api, &d); });
      t.Time(
          [&] { prof->record_event_state(group_api, kSentinelStateGroupStartApiStop, nullptr); });
    }
    if (mask & kSentinelProfileCollApi) {
      std::memset(&d, 0, sizeof(d));
      d.type = kSentinelProfileCollApi;
      d.parent_obj = group_api;
      d.rank = rank;
      d.coll_api.func = "AllReduce";
      d.coll_api.count = 1024;
      d.coll_api.datatype = "ncclFloat32";
      d.coll_api.root = -1;
      t.Time([&] { prof->start_event(ctx, &coll_api, &d); });
      t.Time([&] { prof->stop_event(coll_api); });
    }
    if (group_api != nullptr) {
      t.Time([&] { prof->record_event_state(group_api, kSentinelStateGroupEndApiStart, nullptr); });
    }
    std::memset(&d, 0, sizeof(d));
    d.type = kSentinelProfileColl;
    d.parent_obj = coll_api;
    d.rank = rank;
    d.coll.seq_number = seq++;
    d.coll.func = "AllReduce";
    d.coll.count = 1024;
    d.coll.root = -1;
    d.coll.datatype = "ncclFloat32";
    d.coll.n_channels = 1;
    d.coll.algo = "Ring";
    d.coll.proto = "Simple";
    t.Time([&] { prof->start_event(ctx, &coll, &d); });
    t.Time([&] { prof->stop_event(coll); });
    if (group_api != nullptr) t.Time([&] { prof->stop_event(group_api); });
    SleepNs(period_ns);
  }
  slow.Time([&] { prof->finalize(ctx); });
  std::printf("calls=%" PRIu64 " max_ns=%" PRId64 " over_1ms=%" PRIu64 " colls=%" PRIu64
              " blocked_calls=%" PRIu64 " blocked_max_ns=%" PRId64 " blocked_over_1ms=%" PRIu64
              " faulted_over_1ms=%" PRIu64 " init_finalize_max_ns=%" PRId64 "\n",
              t.calls, t.max_ns, t.over_1ms, seq, t.blocked_calls, t.blocked_max_ns,
              t.blocked_over_1ms, t.faulted_over_1ms, slow.max_ns);
  return 0;
}
