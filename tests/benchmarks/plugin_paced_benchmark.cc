// The whole pipeline at a job's rate: the built plugin, driven through its real ncclProfiler_v5
// entry points with the calls NCCL 2.28.9 makes for one inter-node AllReduce
// (tests/fakes/fake_nccl/nccl_call_sequence.h) at a paced rate, as a rank does that issues a batch
// of collectives and then sleeps while its GPU works, streaming binary frames over the real UNIX
// socket to a real sentineld child process on a private socket (the production path).
//
// Per rate it reports what was issued, what sentineld received, what the plugin says it dropped
// and why (its heartbeat's counters, as sentineld exports them), what was lost without being
// counted (should be 0), and the CPU per collective of each thread involved, read from the
// scheduler's own per-thread run time (/proc/<pid>/task/<tid>/schedstat): the calling thread, the
// plugin's drainer thread ("sentinel-drain"), the plugin's other threads, and sentineld (every
// thread but its HTTP ones; these, serving the benchmark's own /metrics reads, are shown apart).
// The load average is printed with each row: on a shared machine every figure depends on it.
//
// Usage: sentinel_paced_benchmark [--rates=20000,50000,100000,200000,0] [--seconds=2]
//          [--batch_us=1000] [--events=default|Coll,KernelCh|...] [--sentineld=PATH]
//          [--expect_no_loss_up_to=RATE]
// A rate of 0 runs flat out. --expect_no_loss_up_to makes the exit status 1 when a paced rate at
// or below RATE lost a record; the ctest smoke run uses it at a low rate only (the figure at
// 200,000 a second is a benchmark result, not a timed test). Exit status 2: no sentineld.
#include <dirent.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "plugin/abi/nccl_profiler_abi.h"
#include "tests/benchmarks/bench_plugin.h"
#include "tests/fakes/fake_nccl/nccl_call_sequence.h"

namespace {

namespace seq = sentinel::testing::nccl_seq;

struct Options {
  std::vector<int64_t> rates = {20000, 50000, 100000, 200000, 0};
  double seconds = 2.0;
  int64_t batch_us = 1000;
  std::string events = "default";
  std::string sentineld = SENTINELD_BIN;
  int64_t expect_no_loss_up_to = -1;
};

bool Flag(const char* arg, const char* name, const char** value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const char* v = nullptr;
    if (Flag(argv[i], "--rates", &v)) {
      o->rates.clear();
      for (const char* p = v; *p != '\0';) {
        char* end = nullptr;
        o->rates.push_back(std::strtoll(p, &end, 10));
        if (end == p) return false;
        p = *end == ',' ? end + 1 : end;
      }
    } else if (Flag(argv[i], "--seconds", &v)) {
      o->seconds = std::atof(v);
    } else if (Flag(argv[i], "--batch_us", &v)) {
      o->batch_us = std::max<int64_t>(1, std::atoll(v));
    } else if (Flag(argv[i], "--events", &v)) {
      o->events = v;
    } else if (Flag(argv[i], "--sentineld", &v)) {
      o->sentineld = v;
    } else if (Flag(argv[i], "--expect_no_loss_up_to", &v)) {
      o->expect_no_loss_up_to = std::atoll(v);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return false;
    }
  }
  return !o->rates.empty() && o->seconds > 0;
}

std::string ReadSmallFile(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return "";
  char buf[512];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  return std::string(buf, n);
}

// One thread's run time so far (ns), by name.
struct ThreadCpu {
  int tid = 0;
  std::string name;
  int64_t ns = 0;
};

// Every thread of `pid` (0: this process) with its scheduler run time.
std::vector<ThreadCpu> Threads(int pid) {
  const std::string dir =
      pid == 0 ? std::string("/proc/self/task") : "/proc/" + std::to_string(pid) + "/task";
  std::vector<ThreadCpu> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    ThreadCpu t;
    t.tid = std::atoi(e->d_name);
    t.name = ReadSmallFile(dir + "/" + e->d_name + "/comm");
    while (!t.name.empty() && t.name.back() == '\n') t.name.pop_back();
    t.ns = std::strtoll(ReadSmallFile(dir + "/" + e->d_name + "/schedstat").c_str(), nullptr, 10);
    out.push_back(t);
  }
  closedir(d);
  return out;
}

int64_t ThreadNs(const std::vector<ThreadCpu>& threads, int tid) {
  for (const ThreadCpu& t : threads)
    if (t.tid == tid) return t.ns;
  return 0;
}

// sentineld's HTTP threads: they serve this benchmark's own /metrics reads (a cost per scrape,
// not per record), so they are left out of sentineld's figure and reported apart.
bool IsHttpThread(const std::string& name) {
  return name.rfind("MHD", 0) == 0 || name == "sentineld-front" || name == "sentineld-http" ||
         name == "sentineld-api";
}

enum class Pick { kAll, kNamed, kNotHttp, kHttp };

// CPU of the threads in `after` since `before` (threads born in between count from 0).
int64_t DeltaNs(const std::vector<ThreadCpu>& before, const std::vector<ThreadCpu>& after,
                Pick pick, const std::string& name, int exclude_tid) {
  int64_t sum = 0;
  for (const ThreadCpu& t : after) {
    if (t.tid == exclude_tid) continue;
    if (pick == Pick::kNamed && t.name != name) continue;
    if (pick == Pick::kNotHttp && IsHttpThread(t.name)) continue;
    if (pick == Pick::kHttp && !IsHttpThread(t.name)) continue;
    sum += t.ns - ThreadNs(before, t.tid);
  }
  return sum;
}

int64_t MetricSum(const std::string& lines) {
  int64_t sum = 0;
  for (size_t at = 0; at < lines.size();) {
    size_t end = lines.find('\n', at);
    if (end == std::string::npos) end = lines.size();
    const size_t space = lines.rfind(' ', end);
    if (space != std::string::npos && space > at)
      sum += std::strtoll(lines.c_str() + space + 1, nullptr, 10);
    at = end + 1;
  }
  return sum;
}

struct Counts {
  int64_t received = 0;
  int64_t ring = 0, sink = 0, pool = 0, threads = 0;
};

Counts ReadCounts(const sentinel::bench::Sentineld& d) {
  Counts c;
  c.received = MetricSum(d.MetricLines("sentinel_records_received_total "));
  const std::string dropped = d.MetricLines("sentinel_plugin_dropped_total{");
  auto reason = [&](const char* r) {
    std::string lines;
    const std::string key = std::string("reason=\"") + r + "\"";
    for (size_t at = 0; at < dropped.size();) {
      size_t end = dropped.find('\n', at);
      if (end == std::string::npos) end = dropped.size();
      const std::string line = dropped.substr(at, end - at + 1);
      if (line.find(key) != std::string::npos) lines += line;
      at = end + 1;
    }
    return MetricSum(lines);
  };
  c.ring = reason("ring");
  c.sink = reason("sink");
  c.pool = reason("pool");
  c.threads = reason("threads");
  return c;
}

void QuietLogger(SentinelNcclLogLevel, unsigned long, const char*, int, const char*, ...) {}

void SleepUntil(int64_t mono_ns) {
  timespec ts{static_cast<time_t>(mono_ns / 1000000000), static_cast<long>(mono_ns % 1000000000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
  }
}

int64_t SelfThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct Row {
  int64_t rate = 0;
  int64_t issued = 0;
  double achieved = 0;
  Counts delta;
  int64_t caller_ns = 0, drainer_ns = 0, other_ns = 0, daemon_ns = 0, daemon_http_ns = 0;
  // How far behind its schedule the caller fell (descheduled), catching up in a burst after.
  int64_t max_late_ns = 0;
  std::string load;
};

}  // namespace

constexpr char kUsage[] =
    "usage: sentinel_paced_benchmark [--rates=20000,50000,100000,200000,0] [--seconds=2]\n"
    "         [--batch_us=1000] [--events=default|Coll,KernelCh|...] [--sentineld=PATH]\n"
    "         [--expect_no_loss_up_to=RATE]\n"
    "The built plugin at each paced rate (collectives a second per rank; 0: flat out), streaming\n"
    "to a real sentineld child: what was issued, received and dropped (and why), and the CPU per\n"
    "collective of every thread involved. --expect_no_loss_up_to: exit 1 when a rate at or below\n"
    "RATE lost a record. Exit 2: bad arguments or no sentineld.\n";

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  if (!ParseArgs(argc, argv, &o)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  setenv("SENTINEL_EVENTS", o.events.c_str(), 1);
  // A driver that does nothing but call the plugin would trip the overhead budget (sampling):
  // every record must be a real one here.
  setenv("SENTINEL_BUDGET", "0", 0);
  unsetenv("SENTINEL_DUMP");
  if (access(o.sentineld.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "no sentineld at %s (--sentineld=PATH)\n", o.sentineld.c_str());
    return 2;
  }
  sentinel::bench::Sentineld daemon;
  if (!daemon.Start(o.sentineld.c_str())) return 2;
  const SentinelProfilerV5* t = sentinel::bench::LoadPluginV5();
  const int self_tid = static_cast<int>(gettid());

  std::printf(
      "# mask %s, batches every %lld us, %.1f s per rate, sentineld pid %d on the same cores\n"
      "# ns/coll: CPU per issued collective (scheduler run time per thread); lost = issued - "
      "received; uncounted = lost - (ring + sink + pool + threads); http_ns: sentineld's HTTP "
      "threads serving this benchmark's /metrics reads; late_ms: the most the caller fell behind "
      "its schedule (descheduled), issuing that backlog in a burst after\n",
      o.events.c_str(), static_cast<long long>(o.batch_us), o.seconds, daemon.pid);
  std::printf("%9s %9s %10s %9s %9s %8s %8s %6s %6s %9s %9s %9s %9s %9s %8s %7s  %s\n", "rate/s",
              "achieved", "issued", "received", "lost", "ring", "sink", "pool", "thrd", "uncounted",
              "caller_ns", "drain_ns", "other_ns", "sentd_ns", "http_ns", "late_ms",
              "load (1 5 15)");
  std::vector<Row> rows;
  int status = 0;
  uint64_t comm_hash = 0xC011EC700ull;
  for (int64_t rate : o.rates) {
    void* ctx = nullptr;
    int mask = 0;
    t->init(&ctx, ++comm_hash, &mask, "paced", 2, 8, 0, &QuietLogger);
    if (ctx == nullptr) {
      std::fprintf(stderr, "the plugin did not create a context\n");
      return 2;
    }
    auto* r = new seq::Replayer(mask, 1, 1);
    const Counts before_warm_up = ReadCounts(daemon);
    constexpr int kWarmUp = 200;
    for (int i = 0; i < kWarmUp; ++i) r->Run(t, ctx);  // TLS state, ring pages
    // The warm-up's records reach sentineld before the measured window opens (10 s at most).
    Counts c0 = before_warm_up;
    for (int i = 0;
         i < 200 &&
         c0.received - before_warm_up.received + (c0.ring - before_warm_up.ring) < kWarmUp;
         ++i) {
      usleep(50000);
      c0 = ReadCounts(daemon);
    }
    const std::vector<ThreadCpu> self0 = Threads(0);
    const std::vector<ThreadCpu> daemon0 = Threads(daemon.pid);
    const int64_t caller0 = SelfThreadCpuNs();

    Row row;
    row.rate = rate;
    const int64_t start = sentinel::bench::MonoNowNs();
    const int64_t end = start + static_cast<int64_t>(o.seconds * 1e9);
    if (rate <= 0) {
      while (sentinel::bench::MonoNowNs() < end) {
        for (int i = 0; i < 256; ++i) r->Run(t, ctx);
        row.issued += 256;
      }
    } else {
      const double per_batch = static_cast<double>(rate) * static_cast<double>(o.batch_us) / 1e6;
      double owed = 0;
      for (int64_t k = 1;; ++k) {
        owed += per_batch;
        const auto n = static_cast<int64_t>(owed);
        owed -= static_cast<double>(n);
        for (int64_t i = 0; i < n; ++i) r->Run(t, ctx);
        row.issued += n;
        const int64_t next = start + k * o.batch_us * 1000;
        if (next >= end) break;
        const int64_t now = sentinel::bench::MonoNowNs();
        if (now < next) {
          SleepUntil(next);
        } else {
          row.max_late_ns = std::max(row.max_late_ns, now - next);
        }
      }
    }
    const int64_t elapsed = sentinel::bench::MonoNowNs() - start;
    row.caller_ns = SelfThreadCpuNs() - caller0;
    // Two drain periods (25 ms each by default) for the drainer to take the last records on its
    // own thread, so that its figure carries them.
    usleep(60000);
    const std::vector<ThreadCpu> self1 = Threads(0);
    row.drainer_ns = DeltaNs(self0, self1, Pick::kNamed, "sentinel-drain", 0);
    row.other_ns =
        DeltaNs(self0, self1, Pick::kAll, "", self_tid) - row.drainer_ns;  // every other thread
    // Finalize: the last drain, a heartbeat with the drop counters, and the flush.
    t->finalize(ctx);
    delete r;
    // Until sentineld has taken every frame off the socket and the finalize's heartbeat
    // (received and counted drops account for every collective), or 10 s on a starved machine:
    // what is still missing then is reported as uncounted.
    Counts c1 = ReadCounts(daemon);
    for (int i = 0; i < 200; ++i) {
      const int64_t accounted = c1.received - c0.received + (c1.ring - c0.ring) +
                                (c1.sink - c0.sink) + (c1.pool - c0.pool) +
                                (c1.threads - c0.threads);
      if (accounted >= row.issued) break;
      usleep(50000);
      c1 = ReadCounts(daemon);
    }
    const std::vector<ThreadCpu> daemon1 = Threads(daemon.pid);
    row.daemon_ns = DeltaNs(daemon0, daemon1, Pick::kNotHttp, "", 0);
    row.daemon_http_ns = DeltaNs(daemon0, daemon1, Pick::kHttp, "", 0);
    if (getenv("PACED_VERBOSE") != nullptr) {
      for (const ThreadCpu& th : daemon1)
        std::fprintf(stderr, "  sentineld %-16s %lld ns\n", th.name.c_str(),
                     static_cast<long long>(th.ns - ThreadNs(daemon0, th.tid)));
    }
    row.achieved = static_cast<double>(row.issued) * 1e9 / static_cast<double>(elapsed);
    row.delta.received = c1.received - c0.received;
    row.delta.ring = c1.ring - c0.ring;
    row.delta.sink = c1.sink - c0.sink;
    row.delta.pool = c1.pool - c0.pool;
    row.delta.threads = c1.threads - c0.threads;
    row.load = ReadSmallFile("/proc/loadavg").substr(0, 14);
    const int64_t lost = row.issued - row.delta.received;
    const int64_t counted = row.delta.ring + row.delta.sink + row.delta.pool + row.delta.threads;
    const double n = static_cast<double>(std::max<int64_t>(row.issued, 1));
    std::printf(
        "%9lld %9.0f %10lld %9lld %9lld %8lld %8lld %6lld %6lld %9lld %9.0f %9.0f %9.0f %9.0f "
        "%8.0f %7.1f  %s\n",
        static_cast<long long>(rate), row.achieved, static_cast<long long>(row.issued),
        static_cast<long long>(row.delta.received), static_cast<long long>(lost),
        static_cast<long long>(row.delta.ring), static_cast<long long>(row.delta.sink),
        static_cast<long long>(row.delta.pool), static_cast<long long>(row.delta.threads),
        static_cast<long long>(lost - counted), static_cast<double>(row.caller_ns) / n,
        static_cast<double>(row.drainer_ns) / n, static_cast<double>(row.other_ns) / n,
        static_cast<double>(row.daemon_ns) / n, static_cast<double>(row.daemon_http_ns) / n,
        static_cast<double>(row.max_late_ns) / 1e6, row.load.c_str());
    std::fflush(stdout);
    if (rate > 0 && rate <= o.expect_no_loss_up_to && lost != 0) {
      std::fprintf(stderr, "FAIL: %lld records lost at %lld a second\n",
                   static_cast<long long>(lost), static_cast<long long>(rate));
      status = 1;
    }
    if (lost - counted != 0) {  // a record lost without a count is always a failure
      std::fprintf(stderr, "FAIL: %lld records lost without a count at %lld a second\n",
                   static_cast<long long>(lost - counted), static_cast<long long>(rate));
      status = 1;
    }
    rows.push_back(row);
  }
  daemon.Stop();
  return status;
}
