// sentinel-sim's command line (sim_options.h).
#include "tests/sim/sim_options.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
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
    "  --mismatch rank=R,at=STEP,kind=func|count|root|dtype\n"
    "                         at step STEP rank R issues another collective than its peers as\n"
    "                         the step's first on communicator 0: func: allgather (allreduce\n"
    "                         where the step's is allgather); count: twice the count; root: root "
    "1\n"
    "                         instead of 0 (the first of --collectives must be broadcast or\n"
    "                         reduce); dtype: bfloat16 instead of float32. The fake NCCL then\n"
    "                         hangs as NCCL does, until --timeout-s kills the job (status 3)\n"
    "  --deadlock ranks=A,B,at=STEP\n"
    "                         with --comms >= 2: at step STEP rank A issues the step's\n"
    "                         collectives on communicator 1 and waits for them before\n"
    "                         communicator 0, rank B on communicator 0 and waits before 1, the\n"
    "                         others as usual: A waits in comm 1 for B, B in comm 0 for A (a\n"
    "                         cross-communicator cycle); --timeout-s kills the job (status 3)\n"
    "  --pause-rank rank=R,at-s=T,for-s=D[,kind=sleep|io]\n"
    "                         rank R's host pauses D s outside NCCL before the collectives of its\n"
    "                         first step after T s of the job, then goes on: asleep (sleep, the\n"
    "                         default) or writing and syncing a temporary file in $TMPDIR or /tmp\n"
    "                         (io, as a checkpoint would; state S or D). The others wait inside\n"
    "                         the collective meanwhile; the job completes if D < --timeout-s\n"
    "                         (repeatable)\n"
    "  --compute sleep|spin   how a rank spends its compute: sleep (default), or spin: burn that\n"
    "                         much of its own CPU time, so that CPU contention and quotas slow it\n"
    "  --cupti PATH           the fake libcupti (libsentinel_fake_cupti.so): every rank's plugin\n"
    "                         loads it (SENTINEL_CUPTI_PATH) and the rank pushes the kernel "
    "records\n"
    "                         of what it does: a compute kernel over its compute, an NCCL kernel\n"
    "                         per collective from its launch to its end (spinning while peers are\n"
    "                         late), nothing while its host stalls; each collective is then\n"
    "                         synchronized on its own. Not with FAKE_CUPTI_GEN=1\n"
    "  --nvml-script LIST     comma list of K files, one per node: the sim writes each node's "
    "fake\n"
    "                         NVML script (FAKE_NVML_SCRIPT of its sentineld; rewritten by\n"
    "                         rename): one healthy GPU per rank of the node, bus 0000:XX:00.0 "
    "with\n"
    "                         XX = 18 + the rank's index on its node (the fake NCCL's busId), "
    "pids\n"
    "                         = the rank's pid; a --gpu-slow rank's GPU shows its reason from S s\n"
    "  --gpu-slow rank=R,pct=P[,reason=power_cap|thermal|hw_slowdown][,from-s=S]\n"
    "                         rank R's compute (and its compute kernels) take P % longer from S s\n"
    "                         on (default 0); in --nvml-script its SM clock drops to 1/(1+P/100) "
    "of\n"
    "                         its maximum with reasons 0x4 and power at the limit (power_cap,\n"
    "                         the default), 0x60 and 92 C (thermal) or 0x8 (hw_slowdown)\n"
    "  --host-stall rank=R,share=X[,from-s=S]\n"
    "                         rank R's host sleeps before each step's collectives (an input\n"
    "                         stall: no CPU used, no kernel running) for X/(1-X) of --compute-ms,\n"
    "                         so that its GPU idles about X of each step (0 < X <= 0.9)\n"
    "  --cpu-hog rank=R[,cpu=N][,from-s=S]\n"
    "                         rank R's process is pinned to CPU N (default: the launcher's last\n"
    "                         allowed CPU) and its compute spins; from S s a busy process pinned\n"
    "                         to the same CPU competes with it until the job ends\n"
    "  --cpu-quota rank=R,cpus=C[,from-s=S]\n"
    "                         rank R's process runs in a cgroup of its own, made by the sim and\n"
    "                         removed at exit (cgroup v2 cpu.max, else v1 cpu.cfs_quota_us), "
    "limited\n"
    "                         to C CPUs from S s on; its compute spins. Exits with status 4 and "
    "the\n"
    "                         reason where no writable cgroup CPU controller is available\n"
    "  --plugin PATH          profiler plugin: sets NCCL_PROFILER_PLUGIN for every rank\n"
    "  --scenario FILE        fake NCCL scenario (tests/fakes/README.md): sets FAKE_NCCL_SCENARIO\n"
    "  --timeout-s T          kill the job when no rank made progress for T s (default 30)\n"
    "  --seed N               jitter seed (default 1)\n"
    "  --quiet                print only the summary\n"
    "Exit status: 0 all ranks finished; 1 a rank failed; 3 the job hung and was killed;\n"
    "2 bad flags; 4 a cause cannot be set up on this machine (the message says why).\n";

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

// The "from-s" key shared by every cause flag.
double ParseFromS(const std::string& flag, const std::string& v) {
  double s = 0;
  if (!ParseNumber(v, 0, 86400 * 7, &s)) Usage(flag + " from-s: expected seconds >= 0");
  return s;
}

int ParseRank(const std::string& flag, const std::string& v) {
  return ParseInt(flag + " rank", v, 0, FAKE_NCCL_MAX_RANKS - 1);
}

GpuSlow ParseGpuSlow(const std::string& flag, const std::string& value) {
  GpuSlow g;
  bool have_pct = false;
  for (auto& [k, v] : ParseKv(flag, value)) {
    if (k == "rank") {
      g.rank = ParseRank(flag, v);
    } else if (k == "pct") {
      if (!ParseNumber(v, 0, 10000, &g.pct)) Usage(flag + " pct: expected percent >= 0");
      have_pct = true;
    } else if (k == "reason") {
      if (v == "power_cap")
        g.reason = SlowReason::kPowerCap;
      else if (v == "thermal")
        g.reason = SlowReason::kThermal;
      else if (v == "hw_slowdown")
        g.reason = SlowReason::kHwSlowdown;
      else
        Usage(flag + " reason: expected power_cap, thermal or hw_slowdown, got '" + v + "'");
    } else if (k == "from-s") {
      g.from_s = ParseFromS(flag, v);
    } else {
      Usage(flag + ": unknown key '" + k + "' (rank, pct, reason, from-s)");
    }
  }
  if (g.rank < 0 || !have_pct) Usage(flag + ": rank= and pct= are required");
  return g;
}

HostStall ParseHostStall(const std::string& flag, const std::string& value) {
  HostStall h;
  for (auto& [k, v] : ParseKv(flag, value)) {
    if (k == "rank") {
      h.rank = ParseRank(flag, v);
    } else if (k == "share") {
      if (!ParseNumber(v, 0, 0.9, &h.share) || h.share <= 0)
        Usage(flag + " share: expected 0 < X <= 0.9");
    } else if (k == "from-s") {
      h.from_s = ParseFromS(flag, v);
    } else {
      Usage(flag + ": unknown key '" + k + "' (rank, share, from-s)");
    }
  }
  if (h.rank < 0 || h.share <= 0) Usage(flag + ": rank= and share= are required");
  return h;
}

CpuHog ParseCpuHog(const std::string& flag, const std::string& value) {
  CpuHog c;
  for (auto& [k, v] : ParseKv(flag, value)) {
    if (k == "rank")
      c.rank = ParseRank(flag, v);
    else if (k == "cpu")
      c.cpu = ParseInt(flag + " cpu", v, 0, CPU_SETSIZE - 1);
    else if (k == "from-s")
      c.from_s = ParseFromS(flag, v);
    else
      Usage(flag + ": unknown key '" + k + "' (rank, cpu, from-s)");
  }
  if (c.rank < 0) Usage(flag + ": rank= is required");
  return c;
}

CpuQuota ParseCpuQuota(const std::string& flag, const std::string& value) {
  CpuQuota q;
  for (auto& [k, v] : ParseKv(flag, value)) {
    if (k == "rank") {
      q.rank = ParseRank(flag, v);
    } else if (k == "cpus") {
      if (!ParseNumber(v, 0.01, 1024, &q.cpus)) Usage(flag + " cpus: expected 0.01 to 1024");
    } else if (k == "from-s") {
      q.from_s = ParseFromS(flag, v);
    } else {
      Usage(flag + ": unknown key '" + k + "' (rank, cpus, from-s)");
    }
  }
  if (q.rank < 0 || q.cpus <= 0) Usage(flag + ": rank= and cpus= are required");
  return q;
}

// --mismatch rank=R,at=STEP,kind=K
Mismatch ParseMismatch(const std::string& flag, const std::string& value) {
  Mismatch m;
  for (auto& [k, v] : ParseKv(flag, value)) {
    if (k == "rank") {
      m.rank = ParseRank(flag, v);
    } else if (k == "at") {
      m.at = ParseInt(flag + " at", v, 0, 10000000);
    } else if (k == "kind") {
      if (v == "func")
        m.kind = MismatchKind::kFunc;
      else if (v == "count")
        m.kind = MismatchKind::kCount;
      else if (v == "root")
        m.kind = MismatchKind::kRoot;
      else if (v == "dtype")
        m.kind = MismatchKind::kDtype;
      else
        Usage(flag + " kind: expected func, count, root or dtype, got '" + v + "'");
    } else {
      Usage(flag + ": unknown key '" + k + "' (rank, at, kind)");
    }
  }
  if (m.rank < 0) Usage(flag + ": rank= is required");
  return m;
}

// --deadlock ranks=A,B,at=STEP: the item after "ranks=A" is B, without a key.
Deadlock ParseDeadlock(const std::string& flag, const std::string& value) {
  Deadlock d;
  std::vector<std::string> items = SplitList(value);
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string& item = items[i];
    const size_t eq = item.find('=');
    const std::string k = item.substr(0, eq);
    const std::string v = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (k == "ranks" && eq != std::string::npos) {
      if (i + 1 >= items.size() || items[i + 1].find('=') != std::string::npos) {
        Usage(flag + " ranks: expected two ranks, ranks=A,B");
      }
      d.rank_a = ParseInt(flag + " ranks", v, 0, FAKE_NCCL_MAX_RANKS - 1);
      d.rank_b = ParseInt(flag + " ranks", items[++i], 0, FAKE_NCCL_MAX_RANKS - 1);
    } else if (k == "at" && eq != std::string::npos) {
      d.at = ParseInt(flag + " at", v, 0, 10000000);
    } else if (eq == std::string::npos) {
      Usage(flag + ": expected key=value items, got '" + item + "'");
    } else {
      Usage(flag + ": unknown key '" + k + "' (ranks, at)");
    }
  }
  if (d.rank_a < 0) Usage(flag + ": ranks=A,B is required");
  if (d.rank_a == d.rank_b) Usage(flag + ": the two ranks must differ");
  return d;
}

// --pause-rank rank=R,at-s=T,for-s=D[,kind=sleep|io]
RankPause ParseRankPause(const std::string& flag, const std::string& value) {
  RankPause p;
  for (auto& [k, v] : ParseKv(flag, value)) {
    if (k == "rank") {
      p.rank = ParseRank(flag, v);
    } else if (k == "at-s") {
      if (!ParseNumber(v, 0, 86400 * 7, &p.at_s)) Usage(flag + " at-s: expected seconds >= 0");
    } else if (k == "for-s") {
      if (!ParseNumber(v, 0, 86400, &p.for_s) || p.for_s <= 0)
        Usage(flag + " for-s: expected seconds > 0");
    } else if (k == "kind") {
      if (v != "sleep" && v != "io") Usage(flag + " kind: expected sleep or io, got '" + v + "'");
      p.io = v == "io";
    } else {
      Usage(flag + ": unknown key '" + k + "' (rank, at-s, for-s, kind)");
    }
  }
  if (p.rank < 0 || p.for_s <= 0) Usage(flag + ": rank= and for-s= are required");
  return p;
}

// The checks of --mismatch, --deadlock and --pause-rank against the rest of the job.
void CheckHangKinds(const Options& o, bool hang_set) {
  const int kinds =
      (hang_set ? 1 : 0) + (o.mismatch.rank >= 0 ? 1 : 0) + (o.deadlock.rank_a >= 0 ? 1 : 0);
  if (kinds > 1) Usage("--hang, --mismatch and --deadlock: at most one of them per job");
  if (o.mismatch.rank >= 0) {
    const Mismatch& m = o.mismatch;
    if (m.rank >= o.ranks) Usage("--mismatch: rank " + std::to_string(m.rank) + " >= --ranks");
    if (o.ranks < 2) Usage("--mismatch: needs --ranks >= 2 (one rank agrees with itself)");
    if (m.at >= o.steps) Usage("--mismatch: at >= --steps (the step never runs)");
    const std::string& first = o.collectives.front();
    if (m.kind == MismatchKind::kRoot && first != "broadcast" && first != "reduce") {
      Usage(
          "--mismatch kind=root: the first of --collectives must be broadcast or reduce (the "
          "collectives with a root), not '" +
          first + "'");
    }
  }
  if (o.deadlock.rank_a >= 0) {
    const Deadlock& d = o.deadlock;
    if (o.comms < 2)
      Usage("--deadlock: needs --comms >= 2 (the cycle spans communicators 0 and 1)");
    if (std::max(d.rank_a, d.rank_b) >= o.ranks) Usage("--deadlock: a rank >= --ranks");
    if (d.at >= o.steps) Usage("--deadlock: at >= --steps (the step never runs)");
  }
  for (const RankPause& p : o.rank_pauses) {
    if (p.rank >= o.ranks) Usage("--pause-rank: rank " + std::to_string(p.rank) + " >= --ranks");
  }
}

// The ranks named by one cause flag.
std::vector<int> CauseRanks(const Options& o, const std::string& flag) {
  std::vector<int> ranks;
  if (flag == "--gpu-slow")
    for (const GpuSlow& c : o.gpu_slow) ranks.push_back(c.rank);
  if (flag == "--host-stall")
    for (const HostStall& c : o.host_stalls) ranks.push_back(c.rank);
  if (flag == "--cpu-hog")
    for (const CpuHog& c : o.cpu_hogs) ranks.push_back(c.rank);
  if (flag == "--cpu-quota")
    for (const CpuQuota& c : o.cpu_quotas) ranks.push_back(c.rank);
  return ranks;
}

}  // namespace

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
    } else if (arg == "--mismatch") {
      o.mismatch = ParseMismatch(arg, value);
    } else if (arg == "--deadlock") {
      o.deadlock = ParseDeadlock(arg, value);
    } else if (arg == "--pause-rank") {
      o.rank_pauses.push_back(ParseRankPause(arg, value));
    } else if (arg == "--compute") {
      if (value != "sleep" && value != "spin") Usage("--compute: expected sleep or spin");
      o.compute_spin = value == "spin";
    } else if (arg == "--cupti") {
      if (value.empty()) Usage("--cupti: expected the path of libsentinel_fake_cupti.so");
      o.cupti = value;
    } else if (arg == "--nvml-script") {
      o.nvml_scripts = SplitList(value);
      for (const std::string& path : o.nvml_scripts) {
        if (path.empty()) Usage("--nvml-script: empty path");
      }
    } else if (arg == "--gpu-slow") {
      o.gpu_slow.push_back(ParseGpuSlow(arg, value));
    } else if (arg == "--host-stall") {
      o.host_stalls.push_back(ParseHostStall(arg, value));
    } else if (arg == "--cpu-hog") {
      o.cpu_hogs.push_back(ParseCpuHog(arg, value));
    } else if (arg == "--cpu-quota") {
      o.cpu_quotas.push_back(ParseCpuQuota(arg, value));
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
  for (const char* flag : {"--gpu-slow", "--host-stall", "--cpu-hog", "--cpu-quota"}) {
    for (int r : CauseRanks(o, flag)) {
      if (r >= o.ranks) Usage(std::string(flag) + ": rank " + std::to_string(r) + " >= --ranks");
    }
  }
  if (!o.nvml_scripts.empty() && static_cast<int>(o.nvml_scripts.size()) != o.nodes) {
    Usage("--nvml-script: expected one file per node (" + std::to_string(o.nodes) + ")");
  }
  const char* gen = getenv("FAKE_CUPTI_GEN");
  if (!o.cupti.empty() && gen != nullptr && strcmp(gen, "1") == 0) {
    Usage("--cupti: FAKE_CUPTI_GEN=1 would add a second kernel pattern unrelated to the ranks");
  }
  if (o.jitter_pct >= 0) o.jitter_ms = o.compute_ms * o.jitter_pct / 100.0;
  if (hang_set && o.hang_rank >= o.ranks) Usage("--hang: rank >= --ranks");
  CheckHangKinds(o, hang_set);
  if (!o.scenario.empty()) {
    char err[256] = {0};
    if (fakeNcclCheckScenarioFile(o.scenario.c_str(), err, sizeof(err)) != 0) {
      Usage(std::string("--scenario: ") + err);
    }
  }
  return o;
}

bool ComputeSpins(const Options& o, int rank) {
  if (o.compute_spin) return true;
  for (const CpuHog& c : o.cpu_hogs) {
    if (c.rank == rank) return true;
  }
  for (const CpuQuota& c : o.cpu_quotas) {
    if (c.rank == rank) return true;
  }
  return false;
}

bool IsCauseRank(const Options& o, int rank) {
  for (const char* flag : {"--gpu-slow", "--host-stall", "--cpu-hog", "--cpu-quota"}) {
    for (int r : CauseRanks(o, flag)) {
      if (r == rank) return true;
    }
  }
  return false;
}

}  // namespace sentinel::sim
