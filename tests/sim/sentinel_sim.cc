// sentinel-sim: runs an N-rank training-like job as N processes on one machine, each linked
// against the fake NCCL (libnccl.so.2), with a real cross-process barrier per collective. Injects
// compute jitter, stragglers and hangs; prints progress and a per-rank summary. With --nodes the
// ranks stand for a job over several nodes on this one machine: each node's ranks in a block (as
// the fake NCCL places them), streaming to their own node's sentineld (--node-sockets).
// Usage: sentinel-sim --help.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "fake_nccl.h"

namespace sentinel::sim {
namespace {

constexpr const char kUsage[] =
    "usage: sentinel-sim [flags]\n"
    "Runs an N-rank job as N processes through the fake NCCL, with a real barrier per collective.\n"
    "  --ranks N              number of ranks (processes), 1..64 (default 8)\n"
    "  --steps S              training steps per rank (default 20)\n"
    "  --comms K              communicators per rank, 1..8 (default 1)\n"
    "  --compute-ms MS        compute time per step (default 10)\n"
    "  --jitter-ms MS         extra uniform random compute time in [0, MS) (default 0)\n"
    "  --jitter-pct P         the same as a share of --compute-ms: [0, P %) (wins over "
    "--jitter-ms)\n"
    "  --duration-s D         stop after about D s instead of --steps: every rank finishes the "
    "same\n"
    "                         step, a few steps after D s (--steps stays the upper bound)\n"
    "  --nodes K              the ranks stand for K nodes, in blocks of ceil(N/K) ranks (rank r "
    "on\n"
    "                         node r / ceil(N/K)), as the fake NCCL places them (FAKE_NCCL_NODES)\n"
    "  --node-sockets LIST    comma list of K sentineld sockets: node i's ranks stream to the "
    "i-th\n"
    "                         (SENTINEL_SOCKET), as each node's ranks reach their own sentineld\n"
    "  --slow-node node=I,pct=P,delay-ms=D,from=STEP,until=STEP,from-s=S\n"
    "                         every rank of node I is a --straggler with these keys (repeatable)\n"
    "  --hiccup rate=R,min-ms=A,max-ms=B\n"
    "                         noise: every rank, on its own, stalls A..B ms (uniform) at random\n"
    "                         moments, R times per second of its wall time on average (a page\n"
    "                         fault storm, a descheduled thread; default off)\n"
    "  --pause every-s=E,min-ms=A,max-ms=B\n"
    "                         noise: the whole job stops A..B ms (uniform) before the same step\n"
    "                         on every rank, once per E s of compute on average (a checkpoint, a\n"
    "                         data-loader stall; default off)\n"
    "  --bytes SIZE           message size per collective per rank: 4096, 64K, 1M, 1G (default "
    "1M)\n"
    "  --collectives LIST     comma list of allreduce,allgather,reducescatter,broadcast,reduce,\n"
    "                         alltoall,sendrecv, issued in order every step (default allreduce)\n"
    "  --straggler rank=R,delay-ms=D,pct=P,from=STEP,until=STEP\n"
    "                         rank R computes D ms longer and P % slower (of --compute-ms) from\n"
    "                         step `from` on, until step `until` (exclusive; default: the end);\n"
    "                         from-s=S: from the first step after S s of the job's wall time\n"
    "                         instead (repeatable)\n"
    "  --hang rank=R,at=STEP[,kind=K]   rank R hangs at step STEP; K = never-launched\n"
    "                         (default: its host thread stops before calling the collective) or\n"
    "                         kernel-stuck (it enqueues the collective but its stream is stuck\n"
    "                         behind earlier work: the kernel never starts) or killed (its "
    "process\n"
    "                         dies by SIGKILL before the collective). The other ranks stay\n"
    "                         inside the collective, as with NCCL, until --timeout-s kills the "
    "job\n"
    "  --plugin PATH          profiler plugin: sets NCCL_PROFILER_PLUGIN for every rank\n"
    "  --scenario FILE        fake NCCL scenario (tests/fakes/README.md): sets FAKE_NCCL_SCENARIO\n"
    "  --timeout-s T          kill the job when no rank made progress for T s (default 30)\n"
    "  --seed N               jitter seed (default 1)\n"
    "  --quiet                print only the summary\n"
    "Exit status: 0 all ranks finished; 1 a rank failed; 3 the job hung and was killed;\n"
    "2 bad flags.\n";

struct Straggler {
  int rank = -1;
  double delay_ms = 0;
  double pct = 0;  // relative slowdown of the compute, percent
  int from = 0;
  int until = -1;      // first step no longer slowed; -1 = never
  double from_s = -1;  // >= 0: slowed from this many seconds after the job's start on
};

// Noise that is not a straggler: short stalls of single ranks, pauses of the whole job.
struct Hiccups {
  double rate_per_s = 0;  // per rank, per second of its wall time
  double min_ms = 20;
  double max_ms = 100;
};
struct Pauses {
  double every_s = 0;  // mean compute seconds between whole-job pauses; 0 = none
  double min_ms = 1000;
  double max_ms = 3000;
};

struct Options {
  int ranks = 8;
  int steps = 20;
  int comms = 1;
  double compute_ms = 10;
  double jitter_ms = 0;
  Hiccups hiccups;
  Pauses pauses;
  size_t bytes = 1 << 20;
  std::vector<std::string> collectives = {"allreduce"};
  std::vector<Straggler> stragglers;
  double jitter_pct = -1;  // >= 0: --jitter-pct
  double duration_s = 0;   // > 0: --duration-s
  int nodes = 1;
  std::vector<std::string> node_sockets;
  int hang_rank = -1;
  int hang_at = 0;
  bool hang_kernel_stuck = false;  // --hang kind=kernel-stuck (else never-launched)
  bool hang_killed = false;        // --hang kind=killed: the rank's process dies (SIGKILL)
  std::string plugin;
  std::string scenario;
  double timeout_s = 30;
  unsigned seed = 1;
  bool quiet = false;
  int worker_rank = -1;  // internal: this process is rank N of a job
};

[[noreturn]] void Usage(const std::string& error) {
  fprintf(stderr, "sentinel-sim: %s\n\n%s", error.c_str(), kUsage);
  exit(2);
}

bool ParseSize(const std::string& s, size_t* out) {
  char* end = nullptr;
  double v = strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) return false;
  std::string suffix(end);
  double mult = 1;
  if (suffix == "K" || suffix == "k" || suffix == "KiB")
    mult = 1024;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB")
    mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB")
    mult = 1024.0 * 1024 * 1024;
  else if (!suffix.empty() && suffix != "B")
    return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

bool ParseNumber(const std::string& s, double lo, double hi, double* out) {
  char* end = nullptr;
  double v = strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

int ParseInt(const std::string& flag, const std::string& s, int lo, int hi) {
  double v = 0;
  if (!ParseNumber(s, lo, hi, &v) || v != static_cast<int>(v)) {
    Usage(flag + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
          "], got '" + s + "'");
  }
  return static_cast<int>(v);
}

// "k=v,k=v" -> pairs.
std::vector<std::pair<std::string, std::string>> ParseKv(const std::string& flag,
                                                         const std::string& s) {
  std::vector<std::pair<std::string, std::string>> kv;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    std::string item = s.substr(pos, comma - pos);
    size_t eq = item.find('=');
    if (eq == std::string::npos) Usage(flag + ": expected key=value items, got '" + item + "'");
    kv.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    pos = comma + 1;
  }
  return kv;
}

// "a,b,c" -> {"a", "b", "c"} (empty items kept).
std::vector<std::string> SplitList(const std::string& value) {
  std::vector<std::string> items;
  size_t pos = 0;
  while (pos <= value.size()) {
    size_t comma = value.find(',', pos);
    if (comma == std::string::npos) comma = value.size();
    items.push_back(value.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return items;
}

// --straggler (`who` = "rank") or --slow-node (`who` = "node": `rank` holds the node index).
Straggler ParseStraggler(const std::string& flag, const std::string& value, const char* who) {
  Straggler s;
  bool have_who = false;
  for (auto& [k, v] : ParseKv(flag, value)) {
    if (k == who) {
      s.rank = ParseInt(flag + " " + who, v, 0, FAKE_NCCL_MAX_RANKS - 1);
      have_who = true;
    } else if (k == "delay-ms") {
      if (!ParseNumber(v, 0, 3.6e6, &s.delay_ms)) Usage(flag + " delay-ms: expected ms >= 0");
    } else if (k == "from") {
      s.from = ParseInt(flag + " from", v, 0, 10000000);
    } else if (k == "until") {
      s.until = ParseInt(flag + " until", v, 0, 10000000);
    } else if (k == "from-s") {
      if (!ParseNumber(v, 0, 86400 * 7, &s.from_s)) Usage(flag + " from-s: expected seconds >= 0");
    } else if (k == "pct") {
      if (!ParseNumber(v, 0, 10000, &s.pct)) Usage(flag + " pct: expected percent >= 0");
    } else {
      Usage(flag + ": unknown key '" + k + "' (" + who + ", delay-ms, pct, from, until, from-s)");
    }
  }
  if (!have_who) Usage(flag + ": " + who + "= is required");
  return s;
}

// Ranks per node: blocks of ceil(N/K), as the fake NCCL places them (its `nodes` key).
int RanksPerNode(const Options& o) { return (o.ranks + o.nodes - 1) / o.nodes; }

Options Parse(int argc, char** argv) {
  Options o;
  bool hang_set = false;
  std::vector<Straggler> slow_nodes;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (arg != "--help" && arg != "-h" && arg != "--quiet") {
      if (i + 1 >= argc) Usage(arg + ": missing value");
      value = argv[++i];
    }
    if (arg == "--help" || arg == "-h") {
      fputs(kUsage, stdout);
      exit(0);
    } else if (arg == "--quiet") {
      o.quiet = true;
    } else if (arg == "--ranks") {
      o.ranks = ParseInt(arg, value, 1, FAKE_NCCL_MAX_RANKS);
    } else if (arg == "--steps") {
      o.steps = ParseInt(arg, value, 1, 10000000);
    } else if (arg == "--comms") {
      o.comms = ParseInt(arg, value, 1, 8);
    } else if (arg == "--compute-ms") {
      if (!ParseNumber(value, 0, 3.6e6, &o.compute_ms)) Usage("--compute-ms: expected ms >= 0");
    } else if (arg == "--jitter-ms") {
      if (!ParseNumber(value, 0, 3.6e6, &o.jitter_ms)) Usage("--jitter-ms: expected ms >= 0");
    } else if (arg == "--hiccup") {
      for (auto& [k, v] : ParseKv(arg, value)) {
        double* field = k == "rate"     ? &o.hiccups.rate_per_s
                        : k == "min-ms" ? &o.hiccups.min_ms
                        : k == "max-ms" ? &o.hiccups.max_ms
                                        : nullptr;
        if (field == nullptr) Usage("--hiccup: unknown key '" + k + "' (rate, min-ms, max-ms)");
        if (!ParseNumber(v, 0, 3.6e6, field)) Usage("--hiccup " + k + ": expected a number >= 0");
      }
      if (o.hiccups.max_ms < o.hiccups.min_ms) Usage("--hiccup: max-ms < min-ms");
    } else if (arg == "--pause") {
      for (auto& [k, v] : ParseKv(arg, value)) {
        double* field = k == "every-s"  ? &o.pauses.every_s
                        : k == "min-ms" ? &o.pauses.min_ms
                        : k == "max-ms" ? &o.pauses.max_ms
                                        : nullptr;
        if (field == nullptr) Usage("--pause: unknown key '" + k + "' (every-s, min-ms, max-ms)");
        if (!ParseNumber(v, 0, 3.6e6, field)) Usage("--pause " + k + ": expected a number >= 0");
      }
      if (o.pauses.max_ms < o.pauses.min_ms) Usage("--pause: max-ms < min-ms");
    } else if (arg == "--bytes") {
      if (!ParseSize(value, &o.bytes) || o.bytes > (size_t{1} << 34)) {
        Usage("--bytes: expected a size like 4096, 64K, 1M");
      }
    } else if (arg == "--collectives") {
      o.collectives = SplitList(value);
      for (const std::string& c : o.collectives) {
        if (c != "allreduce" && c != "allgather" && c != "reducescatter" && c != "broadcast" &&
            c != "reduce" && c != "alltoall" && c != "sendrecv") {
          Usage("--collectives: unknown collective '" + c + "'");
        }
      }
    } else if (arg == "--straggler") {
      o.stragglers.push_back(ParseStraggler(arg, value, "rank"));
    } else if (arg == "--slow-node") {
      slow_nodes.push_back(ParseStraggler(arg, value, "node"));
    } else if (arg == "--jitter-pct") {
      if (!ParseNumber(value, 0, 1000, &o.jitter_pct)) Usage("--jitter-pct: expected percent >= 0");
    } else if (arg == "--duration-s") {
      if (!ParseNumber(value, 0.1, 86400 * 7, &o.duration_s))
        Usage("--duration-s: expected seconds > 0");
    } else if (arg == "--nodes") {
      o.nodes = ParseInt(arg, value, 1, FAKE_NCCL_MAX_RANKS);
    } else if (arg == "--node-sockets") {
      o.node_sockets = SplitList(value);
      for (const std::string& path : o.node_sockets) {
        if (path.empty()) Usage("--node-sockets: empty socket path");
      }
    } else if (arg == "--hang") {
      hang_set = true;
      for (auto& [k, v] : ParseKv(arg, value)) {
        if (k == "rank")
          o.hang_rank = ParseInt("--hang rank", v, 0, FAKE_NCCL_MAX_RANKS - 1);
        else if (k == "at")
          o.hang_at = ParseInt("--hang at", v, 0, 10000000);
        else if (k == "kind" && (v == "never-launched" || v == "kernel-stuck" || v == "killed")) {
          o.hang_kernel_stuck = v == "kernel-stuck";
          o.hang_killed = v == "killed";
        } else if (k == "kind")
          Usage("--hang kind: expected never-launched, kernel-stuck or killed, got '" + v + "'");
        else
          Usage("--hang: unknown key '" + k + "' (rank, at, kind)");
      }
      if (o.hang_rank < 0) Usage("--hang: rank= is required");
    } else if (arg == "--plugin") {
      o.plugin = value;
    } else if (arg == "--scenario") {
      o.scenario = value;
    } else if (arg == "--timeout-s") {
      if (!ParseNumber(value, 0.1, 86400, &o.timeout_s)) Usage("--timeout-s: expected seconds > 0");
    } else if (arg == "--seed") {
      o.seed = static_cast<unsigned>(ParseInt(arg, value, 0, 2000000000));
    } else if (arg == "--worker-rank") {
      o.worker_rank = ParseInt(arg, value, 0, FAKE_NCCL_MAX_RANKS - 1);
    } else {
      Usage("unknown flag '" + arg + "'");
    }
  }
  for (const Straggler& s : o.stragglers) {
    if (s.rank >= o.ranks) Usage("--straggler: rank " + std::to_string(s.rank) + " >= --ranks");
  }
  if (o.nodes > o.ranks) Usage("--nodes: more nodes than ranks");
  if (!o.node_sockets.empty() && static_cast<int>(o.node_sockets.size()) != o.nodes) {
    Usage("--node-sockets: expected one socket per node (" + std::to_string(o.nodes) + ")");
  }
  const int rpn = RanksPerNode(o);
  for (const Straggler& node : slow_nodes) {
    if (node.rank >= o.nodes)
      Usage("--slow-node: node " + std::to_string(node.rank) + " >= --nodes");
    for (int r = node.rank * rpn; r < std::min(o.ranks, (node.rank + 1) * rpn); ++r) {
      Straggler s = node;
      s.rank = r;
      o.stragglers.push_back(s);
    }
  }
  if (o.jitter_pct >= 0) o.jitter_ms = o.compute_ms * o.jitter_pct / 100.0;
  if (hang_set && o.hang_rank >= o.ranks) Usage("--hang: rank >= --ranks");
  if (!o.scenario.empty()) {
    char err[256] = {0};
    if (fakeNcclCheckScenarioFile(o.scenario.c_str(), err, sizeof(err)) != 0) {
      Usage(std::string("--scenario: ") + err);
    }
  }
  return o;
}

double NowS() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void SleepMs(double ms) {
  if (ms <= 0) return;
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(ms / 1000);
  ts.tv_nsec = static_cast<long>((ms - static_cast<double>(ts.tv_sec) * 1000) * 1e6);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

std::string ToHex(const ncclUniqueId& id) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  for (unsigned char c : id.internal) {
    s += kDigits[c >> 4];
    s += kDigits[c & 15];
  }
  return s;
}

bool FromHex(const std::string& s, ncclUniqueId* id) {
  if (s.size() != 2 * sizeof(id->internal)) return false;
  for (size_t i = 0; i < sizeof(id->internal); ++i) {
    id->internal[i] = static_cast<char>(std::stoi(s.substr(2 * i, 2), nullptr, 16));
  }
  return true;
}

// Shared by the launcher and every rank (a memfd each rank maps): the job's start, each rank's
// current step, and the step every rank stops before (--duration-s). A rank publishes its step
// before it reads the stop step; the launcher publishes the stop step and then reads every
// rank's: when none has reached it, each rank reads it before it starts that step (seq_cst), so
// every rank completes the same number of steps and none is left waiting in a collective.
struct Control {
  double start_s = 0;
  std::atomic<int64_t> stop_step{-1};
  std::atomic<int64_t> step[FAKE_NCCL_MAX_RANKS];
};
static_assert(std::atomic<int64_t>::is_always_lock_free, "shared between processes");

Control* MapControl(int fd) {
  void* p = mmap(nullptr, sizeof(Control), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<Control*>(p);
}

// Sets the stop step two past every rank's current one (see Control).
void StopSoon(Control* c, int ranks) {
  for (;;) {
    int64_t max_step = 0;
    for (int r = 0; r < ranks; ++r) max_step = std::max(max_step, c->step[r].load());
    const int64_t stop = max_step + 2;
    c->stop_step.store(stop);
    int64_t now_max = 0;
    for (int r = 0; r < ranks; ++r) now_max = std::max(now_max, c->step[r].load());
    if (now_max < stop) return;
  }
}

// The p50 of `v` (reordered), 0 when empty.
double Median(std::vector<float>* v) {
  if (v->empty()) return 0;
  std::nth_element(v->begin(), v->begin() + static_cast<std::ptrdiff_t>(v->size() / 2), v->end());
  return (*v)[v->size() / 2];
}

// ---- Worker: one rank. ---------------------------------------------------------------------
void Report(int fd, const char* what, int value) {
  char line[64];
  int n = snprintf(line, sizeof(line), "%s %d\n", what, value);
  if (write(fd, line, static_cast<size_t>(n)) < 0) {
    // The launcher is gone; keep running, it will not read anyway.
  }
}

int Worker(const Options& o) {
  const char* fd_env = getenv("SENTINEL_DEV_SIM_STATUS_FD");
  const char* ids_env = getenv("SENTINEL_DEV_SIM_IDS");
  if (fd_env == nullptr || ids_env == nullptr) {
    fprintf(stderr, "sentinel-sim: --worker-rank is internal\n");
    return 2;
  }
  int fd = atoi(fd_env);
  int rank = o.worker_rank;
  const char* control_env = getenv("SENTINEL_DEV_SIM_CONTROL_FD");
  Control* control = control_env != nullptr ? MapControl(atoi(control_env)) : nullptr;
  if (control == nullptr) {
    fprintf(stderr, "sentinel-sim: rank %d: no control block\n", rank);
    return 2;
  }
  std::vector<ncclComm_t> comms;
  std::string ids(ids_env);
  for (int k = 0; k < o.comms; ++k) {
    ncclUniqueId id;
    if (!FromHex(ids.substr(static_cast<size_t>(k) * 257, 256), &id)) return 2;
    ncclComm_t comm = nullptr;
    ncclResult_t rc = ncclCommInitRank(&comm, o.ranks, id, rank);
    if (rc != ncclSuccess) {
      fprintf(stderr, "sentinel-sim: rank %d: ncclCommInitRank failed: %s\n", rank,
              ncclGetErrorString(rc));
      Report(fd, "fail", rc);
      return 1;
    }
    comms.push_back(comm);
  }
  std::mt19937 rng(o.seed * 7919u + static_cast<unsigned>(rank));
  std::uniform_real_distribution<double> jitter(0.0, o.jitter_ms);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double last_step_s = NowS();
  static char buffer[64];  // the fake never touches buffers
  size_t count = std::max<size_t>(1, o.bytes / 4);
  int n = o.ranks;
  // What this rank really did: its compute (the sleep, overshoot included) and its step period,
  // per step (at most 2^20 of each kept), for the summary's p50s.
  std::vector<float> compute_ms_seen;
  std::vector<float> period_ms_seen;
  double prev_step_start_s = 0;
  int steps_run = 0;
  for (int step = 0; step < o.steps; ++step) {
    control->step[rank].store(step);
    const int64_t stop = control->stop_step.load();
    if (stop >= 0 && step >= stop) break;
    const double step_start_s = NowS();
    if (step > 0 && period_ms_seen.size() < (size_t{1} << 20)) {
      period_ms_seen.push_back(static_cast<float>((step_start_s - prev_step_start_s) * 1e3));
    }
    prev_step_start_s = step_start_s;
    ++steps_run;
    double ms = o.compute_ms + (o.jitter_ms > 0 ? jitter(rng) : 0.0);
    if (o.hiccups.rate_per_s > 0) {
      // A Poisson process in wall time: the chance of a stall since the last step.
      const double now = NowS();
      if (unit(rng) < o.hiccups.rate_per_s * (now - last_step_s)) {
        ms += o.hiccups.min_ms + unit(rng) * (o.hiccups.max_ms - o.hiccups.min_ms);
      }
      last_step_s = now;
    }
    if (o.pauses.every_s > 0) {
      // Drawn from (seed, step) alone, so every rank pauses before the same step, equally long.
      std::mt19937 job_rng(o.seed * 2654435761u + static_cast<unsigned>(step));
      const double p = o.compute_ms / 1000.0 / o.pauses.every_s;
      if (unit(job_rng) < p)
        ms += o.pauses.min_ms + unit(job_rng) * (o.pauses.max_ms - o.pauses.min_ms);
    }
    for (const Straggler& s : o.stragglers) {
      const bool started =
          s.from_s >= 0 ? step_start_s - control->start_s >= s.from_s : step >= s.from;
      if (s.rank == rank && started && (s.until < 0 || step < s.until)) {
        ms += s.delay_ms + o.compute_ms * s.pct / 100.0;
      }
    }
    bool hang_here = rank == o.hang_rank && step == o.hang_at;
    if (hang_here && o.hang_killed) raise(SIGKILL);  // OOM killer, node failure: no goodbye
    if (hang_here && !o.hang_kernel_stuck) {
      Report(fd, "hang", step);
      for (;;) pause();  // never launches the collective; the launcher kills the job
    }
    const double compute_start_s = NowS();
    SleepMs(ms);
    if (compute_ms_seen.size() < (size_t{1} << 20)) {
      compute_ms_seen.push_back(static_cast<float>((NowS() - compute_start_s) * 1e3));
    }
    if (hang_here) {
      // The stream is stuck behind earlier work: the collectives below are enqueued but their
      // kernels never start, and the synchronize after them never returns.
      Report(fd, "hang", step);
      for (ncclComm_t c : comms) fakeNcclStallStream(c);
    }
    Report(fd, "arrive", step);
    for (ncclComm_t c : comms) {
      for (const std::string& name : o.collectives) {
        ncclResult_t rc = ncclSuccess;
        if (name == "allreduce")
          rc = ncclAllReduce(buffer, buffer, count, ncclFloat32, ncclSum, c, nullptr);
        else if (name == "allgather")
          rc = ncclAllGather(buffer, buffer, count, ncclFloat32, c, nullptr);
        else if (name == "reducescatter")
          rc = ncclReduceScatter(buffer, buffer, count, ncclFloat32, ncclSum, c, nullptr);
        else if (name == "broadcast")
          rc = ncclBroadcast(buffer, buffer, count, ncclFloat32, 0, c, nullptr);
        else if (name == "reduce")
          rc = ncclReduce(buffer, buffer, count, ncclFloat32, ncclSum, 0, c, nullptr);
        else if (name == "alltoall")
          rc = ncclAlltoAll(buffer, buffer, std::max<size_t>(1, count / static_cast<size_t>(n)),
                            ncclFloat32, c, nullptr);
        else if (name == "sendrecv") {
          ncclGroupStart();
          ncclSend(buffer, count, ncclFloat32, (rank + 1) % n, c, nullptr);
          ncclRecv(buffer, count, ncclFloat32, (rank + n - 1) % n, c, nullptr);
          rc = ncclGroupEnd();
        }
        if (rc != ncclSuccess) {
          fprintf(stderr, "sentinel-sim: rank %d: %s failed: %s\n", rank, name.c_str(),
                  ncclGetErrorString(rc));
          Report(fd, "fail", rc);
          return 1;
        }
      }
    }
    for (ncclComm_t c : comms) {
      ncclResult_t rc = fakeNcclStreamSynchronize(c);
      if (rc != ncclSuccess) {
        fprintf(stderr, "sentinel-sim: rank %d: step %d failed: %s\n", rank, step,
                ncclGetErrorString(rc));
        Report(fd, "fail", rc);
        return 1;
      }
    }
    Report(fd, "done", step);
  }
  // What crossed a loaded external net plugin (NCCL_NET_PLUGIN): equal with and without a
  // wrapping plugin in between.
  for (size_t k = 0; k < comms.size(); ++k) {
    uint64_t sent = 0;
    uint64_t received = 0;
    uint64_t checksum = 0;
    if (fakeNcclNetStats(comms[k], &sent, &received, &checksum) == ncclSuccess) {
      printf("[sim] rank %d comm %zu net: sent %llu received %llu checksum %016llx\n", rank, k,
             static_cast<unsigned long long>(sent), static_cast<unsigned long long>(received),
             static_cast<unsigned long long>(checksum));
      fflush(stdout);
    }
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  char line[128];
  const int len = snprintf(line, sizeof(line), "stat %d %.4f %.4f\n", steps_run,
                           Median(&compute_ms_seen), Median(&period_ms_seen));
  if (write(fd, line, static_cast<size_t>(len)) < 0) {
    // The launcher is gone.
  }
  Report(fd, "exit", 0);
  return 0;
}

// ---- Launcher. --------------------------------------------------------------------------------
struct RankState {
  pid_t pid = -1;
  int fd = -1;
  std::string partial;
  int arrived = -1;  // last step it arrived at (entered the collectives)
  int done = -1;     // last step completed
  bool hung_self = false;
  bool exited = false;
  int status = 0;
  double end_s = 0;
  int steps_run = -1;  // from its "stat" line: steps it ran, its compute and step period p50s
  double compute_p50_ms = 0;
  double period_p50_ms = 0;
};

// SIGTERM or SIGINT to the launcher: stop the job as --duration-s does (every rank finishes the
// same step; the ranks ignore both), and kill what is left 5 s later.
volatile sig_atomic_t g_stop_requested = 0;
void OnStopSignal(int) { g_stop_requested = 1; }

int Launcher(const Options& o, char** argv) {
  struct sigaction stop_action = {};
  stop_action.sa_handler = OnStopSignal;
  sigaction(SIGTERM, &stop_action, nullptr);
  sigaction(SIGINT, &stop_action, nullptr);
  std::vector<ncclUniqueId> ids(static_cast<size_t>(o.comms));
  std::string ids_hex;
  for (ncclUniqueId& id : ids) {
    if (ncclGetUniqueId(&id) != ncclSuccess) {
      fprintf(stderr, "sentinel-sim: ncclGetUniqueId failed\n");
      return 1;
    }
    ids_hex += ToHex(id) + ",";
  }
  setenv("SENTINEL_DEV_SIM_IDS", ids_hex.c_str(), 1);
  if (o.nodes > 1) setenv("FAKE_NCCL_NODES", std::to_string(o.nodes).c_str(), 1);
  const int control_fd = memfd_create("sentinel-sim", MFD_CLOEXEC);
  if (control_fd < 0 || ftruncate(control_fd, sizeof(Control)) != 0) {
    perror("memfd_create");
    return 1;
  }
  Control* control = MapControl(control_fd);
  if (control == nullptr) {
    perror("mmap");
    return 1;
  }
  new (control) Control();
  for (auto& step : control->step) step.store(0);
  if (!o.plugin.empty()) setenv("NCCL_PROFILER_PLUGIN", o.plugin.c_str(), 1);
  if (!o.scenario.empty()) setenv("FAKE_NCCL_SCENARIO", o.scenario.c_str(), 1);

  if (!o.quiet) {
    printf("[sim] %d ranks x %d steps, %d comm(s), %zu bytes, compute %.1f ms (+jitter %.1f ms)\n",
           o.ranks, o.steps, o.comms, o.bytes, o.compute_ms, o.jitter_ms);
    if (o.hiccups.rate_per_s > 0) {
      printf("[sim] hiccups: %.1f-%.1f ms on each rank, %.3f per second\n", o.hiccups.min_ms,
             o.hiccups.max_ms, o.hiccups.rate_per_s);
    }
    if (o.pauses.every_s > 0) {
      printf("[sim] whole-job pauses: %.1f-%.1f ms, one per %.1f s of compute\n", o.pauses.min_ms,
             o.pauses.max_ms, o.pauses.every_s);
    }
    for (const Straggler& s : o.stragglers) {
      if (s.from_s >= 0) {
        printf("[sim] straggler: rank %d +%.1f ms +%.0f%% from %.1f s until step %d\n", s.rank,
               s.delay_ms, s.pct, s.from_s, s.until);
      } else {
        printf("[sim] straggler: rank %d +%.1f ms +%.0f%% from step %d until %d\n", s.rank,
               s.delay_ms, s.pct, s.from, s.until);
      }
    }
    if (o.nodes > 1) {
      const int rpn = RanksPerNode(o);
      for (int node = 0; node < o.nodes; ++node) {
        printf("[sim] node %d: ranks %d-%d%s%s\n", node, node * rpn,
               std::min(o.ranks, (node + 1) * rpn) - 1, o.node_sockets.empty() ? "" : ", socket ",
               o.node_sockets.empty() ? "" : o.node_sockets[static_cast<size_t>(node)].c_str());
      }
    }
    if (o.hang_rank >= 0) {
      printf("[sim] hang: rank %d %s at step %d\n", o.hang_rank,
             o.hang_kernel_stuck ? "enqueues but its kernel never starts" : "stops arriving",
             o.hang_at);
    }
    fflush(stdout);
  }
  double start = NowS();
  control->start_s = start;
  bool stopping = false;
  double stop_s = 0;
  std::vector<RankState> ranks(static_cast<size_t>(o.ranks));
  std::vector<char*> child_argv;
  for (char** a = argv; *a != nullptr; ++a) child_argv.push_back(*a);
  for (int r = 0; r < o.ranks; ++r) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      perror("pipe2");
      return 1;
    }
    pid_t pid = fork();
    if (pid == 0) {
      // Child: dies with the launcher (a rank left in a collective would wait forever). The
      // write end survives exec; everything else is close-on-exec.
      // SIGTERM and SIGINT are the launcher's to act on: `timeout` and a terminal send them to
      // the whole process group, and a rank killed mid-collective leaves its peers waiting.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      signal(SIGTERM, SIG_IGN);
      signal(SIGINT, SIG_IGN);
      int wfd = fcntl(fds[1], F_DUPFD, 3);
      fcntl(wfd, F_SETFL, 0);  // the rank's writes block normally
      setenv("SENTINEL_DEV_SIM_STATUS_FD", std::to_string(wfd).c_str(), 1);
      setenv("RANK", std::to_string(r).c_str(), 1);  // as torchrun does (the fake CUPTI reads it)
      setenv("SENTINEL_DEV_SIM_CONTROL_FD", std::to_string(fcntl(control_fd, F_DUPFD, 3)).c_str(),
             1);
      if (!o.node_sockets.empty()) {
        setenv("SENTINEL_SOCKET", o.node_sockets[static_cast<size_t>(r / RanksPerNode(o))].c_str(),
               1);
      }
      std::string rank_flag = "--worker-rank=" + std::to_string(r);
      std::vector<char*> args = child_argv;
      args.push_back(const_cast<char*>(rank_flag.c_str()));
      args.push_back(nullptr);
      execv("/proc/self/exe", args.data());
      _exit(127);
    }
    close(fds[1]);
    ranks[static_cast<size_t>(r)].pid = pid;
    ranks[static_cast<size_t>(r)].fd = fds[0];
  }
  double last_progress = NowS();
  int last_printed = -1;
  double last_print_s = 0;
  bool hung = false;
  int running = o.ranks;
  while (running > 0) {
    std::vector<struct pollfd> pfds;
    for (RankState& rs : ranks) {
      if (rs.fd >= 0) pfds.push_back({rs.fd, POLLIN, 0});
    }
    poll(pfds.data(), pfds.size(), 100);
    for (RankState& rs : ranks) {
      if (rs.fd < 0) continue;
      char buf[512];
      ssize_t n = read(rs.fd, buf, sizeof(buf));
      if (n == 0) {
        close(rs.fd);
        rs.fd = -1;
        continue;
      }
      if (n < 0) continue;
      rs.partial.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = rs.partial.find('\n')) != std::string::npos) {
        std::string line = rs.partial.substr(0, nl);
        rs.partial.erase(0, nl + 1);
        int v = 0;
        if (sscanf(line.c_str(), "arrive %d", &v) == 1)
          rs.arrived = v;
        else if (sscanf(line.c_str(), "done %d", &v) == 1)
          rs.done = v;
        else if (sscanf(line.c_str(), "hang %d", &v) == 1)
          rs.hung_self = true;
        else if (sscanf(line.c_str(), "stat %d %lf %lf", &rs.steps_run, &rs.compute_p50_ms,
                        &rs.period_p50_ms) == 3)
          continue;
        last_progress = NowS();
      }
    }
    for (RankState& rs : ranks) {
      if (rs.exited) continue;
      int status = 0;
      if (waitpid(rs.pid, &status, WNOHANG) == rs.pid) {
        rs.exited = true;
        rs.status = status;
        rs.end_s = NowS() - start;
        --running;
        last_progress = NowS();
      }
    }
    int min_done = o.steps;
    for (const RankState& rs : ranks) min_done = std::min(min_done, rs.done);
    double now = NowS();
    if (!stopping && (g_stop_requested || (o.duration_s > 0 && now - start >= o.duration_s))) {
      StopSoon(control, o.ranks);
      stopping = true;
      stop_s = now;
      if (!o.quiet)
        printf("[sim] %.1f s: stopping after step %lld\n", now - start,
               static_cast<long long>(control->stop_step.load()));
    }
    if (!o.quiet && min_done > last_printed &&
        (now - last_print_s > 1.0 || min_done + 1 == o.steps)) {
      printf("[sim] step %d/%d completed by every rank (%.1f s)\n", min_done + 1, o.steps,
             now - start);
      fflush(stdout);
      last_printed = min_done;
      last_print_s = now;
    }
    if (running > 0 && g_stop_requested && stopping && now - stop_s > 5) {
      for (RankState& rs : ranks) {
        if (!rs.exited) kill(rs.pid, SIGKILL);
      }
    }
    if (running > 0 && now - last_progress > o.timeout_s) {
      hung = true;
      for (RankState& rs : ranks) {
        if (!rs.exited) kill(rs.pid, SIGKILL);
      }
    }
  }
  double wall = NowS() - start;
  for (const ncclUniqueId& id : ids) fakeNcclReleaseUniqueId(&id);

  int max_arrived = -1;
  for (const RankState& rs : ranks) max_arrived = std::max(max_arrived, rs.arrived);
  printf("\n[sim] summary (%.2f s)\n  rank  steps-done  wall-s  status\n", wall);
  int failed = 0;
  for (int r = 0; r < o.ranks; ++r) {
    const RankState& rs = ranks[static_cast<size_t>(r)];
    std::string status;
    if (WIFEXITED(rs.status) && WEXITSTATUS(rs.status) == 0) {
      status = "ok";
    } else if (WIFSIGNALED(rs.status)) {
      status = hung ? "killed (job hung)" : "signal " + std::to_string(WTERMSIG(rs.status));
      ++failed;
    } else {
      status = "exit " + std::to_string(WEXITSTATUS(rs.status));
      ++failed;
    }
    if (hung && rs.arrived < max_arrived)
      status += ", STOPPED ARRIVING after step " + std::to_string(rs.arrived);
    printf("  %4d  %10d  %6.2f  %s\n", r, rs.done + 1, rs.end_s, status.c_str());
  }
  // What the ranks really computed: the figure an exported compute segment must match.
  for (int r = 0; r < o.ranks; ++r) {
    const RankState& rs = ranks[static_cast<size_t>(r)];
    if (rs.steps_run < 0) continue;
    printf("[sim] rank %d node %d: %d steps, compute p50 %.3f ms, step p50 %.3f ms\n", r,
           r / RanksPerNode(o), rs.steps_run, rs.compute_p50_ms, rs.period_p50_ms);
  }
  if (hung) {
    std::string who;
    for (int r = 0; r < o.ranks; ++r) {
      if (ranks[static_cast<size_t>(r)].arrived < max_arrived)
        who += (who.empty() ? "" : ",") + std::to_string(r);
    }
    std::string stuck;
    for (int r = 0; r < o.ranks; ++r) {
      const RankState& rs = ranks[static_cast<size_t>(r)];
      if (rs.hung_self && rs.arrived == max_arrived)
        stuck += (stuck.empty() ? "" : ",") + std::to_string(r);
    }
    if (who.empty() && !stuck.empty()) {
      printf(
          "[sim] HANG: no progress for %.1f s; rank(s) %s launched step %d but the kernel never "
          "started; job killed\n",
          o.timeout_s, stuck.c_str(), max_arrived);
    } else if (who.empty()) {
      printf(
          "[sim] HANG: no progress for %.1f s; every rank arrived at step %d but it never "
          "completed; job killed\n",
          o.timeout_s, max_arrived);
    } else {
      printf(
          "[sim] HANG: no progress for %.1f s; rank(s) %s never arrived at step %d; job killed\n",
          o.timeout_s, who.c_str(), max_arrived);
    }
    return 3;
  }
  printf("[sim] %s\n", failed == 0 ? "all ranks finished" : "some ranks FAILED");
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace sentinel::sim

int main(int argc, char** argv) {
  sentinel::sim::Options o = sentinel::sim::Parse(argc, argv);
  if (o.worker_rank >= 0) return sentinel::sim::Worker(o);
  return sentinel::sim::Launcher(o, argv);
}
