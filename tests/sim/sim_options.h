// sentinel-sim's flags (see kUsage in sim_options.cc, printed by --help).
#pragma once

#include <stddef.h>

#include <string>
#include <vector>

namespace sentinel::sim {

// A rank's GPU runs slower from from_s on: its compute (kernels) take pct % longer.
enum class SlowReason { kPowerCap, kThermal, kHwSlowdown };
struct GpuSlow {
  int rank = -1;
  double pct = 0;
  SlowReason reason = SlowReason::kPowerCap;
  double from_s = 0;
};
// A rank's host stalls before each step's collectives (its GPU idles), from from_s on.
struct HostStall {
  int rank = -1;
  double share = 0;  // of the step the GPU idles: the stall is share / (1 - share) of compute-ms
  double from_s = 0;
};
// A rank pinned to one CPU, shared with a busy process from from_s on.
struct CpuHog {
  int rank = -1;
  int cpu = -1;  // -1: the last CPU the launcher may run on
  double from_s = 0;
};
// A rank in a cgroup of its own whose CPU quota is `cpus` CPUs from from_s on.
struct CpuQuota {
  int rank = -1;
  double cpus = 0;
  double from_s = 0;
};

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

// Hangs where no rank stopped: the ranks disagree (sim_hangs.h).
// At step `at`, rank `rank` issues something else than its peers as the step's first collective
// on communicator 0: another function (AllGather; AllReduce where the step's is AllGather), twice
// the count, root 1 instead of 0, or bfloat16 instead of float32.
enum class MismatchKind { kFunc, kCount, kRoot, kDtype };
struct Mismatch {
  int rank = -1;  // -1: none
  int at = 0;
  MismatchKind kind = MismatchKind::kFunc;
};
// At step `at`, rank_a issues the step's collectives on communicator 1 and waits for them before
// communicator 0, rank_b on communicator 0 and waits before communicator 1: each waits for the
// other in a different communicator.
struct Deadlock {
  int rank_a = -1;  // -1: none
  int rank_b = -1;
  int at = 0;
};
// A live rank's host pauses outside NCCL at its first step after at_s, for for_s seconds, then
// goes on: asleep, or blocked in file writes and syncs (io), as a checkpoint would.
struct RankPause {
  int rank = -1;
  double at_s = 0;
  double for_s = 0;
  bool io = false;
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
  bool hang_kernel_stuck = false;      // --hang kind=kernel-stuck (else never-launched)
  bool hang_killed = false;            // --hang kind=killed: the rank's process dies (SIGKILL)
  Mismatch mismatch;                   // --mismatch
  Deadlock deadlock;                   // --deadlock
  std::vector<RankPause> rank_pauses;  // --pause-rank
  std::string plugin;
  std::string scenario;
  double timeout_s = 30;
  unsigned seed = 1;
  bool quiet = false;
  int worker_rank = -1;  // internal: this process is rank N of a job
  // Causes of a late rank, each leaving the traces its real counterpart leaves (sim_causes.h).
  bool compute_spin = false;  // --compute spin: every rank burns its compute as CPU time
  std::string cupti;          // --cupti: the fake libcupti every rank's plugin loads and it drives
  std::vector<std::string> nvml_scripts;  // --nvml-script: one fake NVML script per node
  std::vector<GpuSlow> gpu_slow;
  std::vector<HostStall> host_stalls;
  std::vector<CpuHog> cpu_hogs;
  std::vector<CpuQuota> cpu_quotas;
};

// Parses the command line (the launcher's, and each rank's: the same flags plus --worker-rank);
// bad flags print the usage and exit with status 2.
Options Parse(int argc, char** argv);

// Ranks per node: blocks of ceil(N/K), as the fake NCCL places them (its `nodes` key).
inline int RanksPerNode(const Options& o) { return (o.ranks + o.nodes - 1) / o.nodes; }

// Whether rank `rank`'s compute burns CPU time rather than sleeping (--compute spin, or a CPU
// cause on it: contention and quotas slow only work that needs the CPU).
bool ComputeSpins(const Options& o, int rank);

// Whether a cause flag (--gpu-slow, --host-stall, --cpu-hog, --cpu-quota) names rank `rank`.
bool IsCauseRank(const Options& o, int rank);

}  // namespace sentinel::sim
