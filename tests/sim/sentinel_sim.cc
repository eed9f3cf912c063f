// sentinel-sim: runs an N-rank training-like job as N processes on one machine, each linked
// against the fake NCCL (libnccl.so.2), with a real cross-process barrier per collective. Injects
// compute jitter, stragglers and hangs; prints progress and a per-rank summary. With --nodes the
// ranks stand for a job over several nodes on this one machine: each node's ranks in a block (as
// the fake NCCL places them), streaming to their own node's sentineld (--node-sockets). The causes
// of a late rank (a slower GPU, a host stall, CPU contention, a CPU quota) leave the evidence their
// real counterparts leave (sim_causes.h); flags in sim_options.cc. Usage: sentinel-sim --help.
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
#include "tests/sim/sim_causes.h"
#include "tests/sim/sim_hang_kinds.h"
#include "tests/sim/sim_options.h"

namespace sentinel::sim {
namespace {

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
  // Loaded before the plugin loads the same path, so both reach one fake CUPTI.
  GpuTrace gpu;
  std::string gpu_err;
  if (!o.cupti.empty() && !gpu.Open(o.cupti, &gpu_err)) {
    fprintf(stderr, "sentinel-sim: rank %d: --cupti: %s\n", rank, gpu_err.c_str());
    Report(fd, "fail", 0);
    return 2;
  }
  const bool spin = ComputeSpins(o, rank);
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
  std::vector<bool> paused(o.rank_pauses.size(), false);  // per --pause-rank: done
  // What this rank really did: its compute and host time before its collectives (overshoot
  // included) and its step period,
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
    const double elapsed_s = step_start_s - control->start_s;
    for (const GpuSlow& g : o.gpu_slow) {
      if (g.rank == rank && elapsed_s >= g.from_s) ms *= 1 + g.pct / 100;
    }
    // Host time before the collectives, with nothing on the GPU: stalls and pauses.
    double host_ms = 0;
    for (const HostStall& h : o.host_stalls) {
      if (h.rank == rank && elapsed_s >= h.from_s)
        host_ms += o.compute_ms * h.share / (1 - h.share);
    }
    if (o.hiccups.rate_per_s > 0) {
      // A Poisson process in wall time: the chance of a stall since the last step.
      const double now = NowS();
      if (unit(rng) < o.hiccups.rate_per_s * (now - last_step_s)) {
        host_ms += o.hiccups.min_ms + unit(rng) * (o.hiccups.max_ms - o.hiccups.min_ms);
      }
      last_step_s = now;
    }
    if (o.pauses.every_s > 0) {
      // Drawn from (seed, step) alone, so every rank pauses before the same step, equally long.
      std::mt19937 job_rng(o.seed * 2654435761u + static_cast<unsigned>(step));
      const double p = o.compute_ms / 1000.0 / o.pauses.every_s;
      if (unit(job_rng) < p)
        host_ms += o.pauses.min_ms + unit(job_rng) * (o.pauses.max_ms - o.pauses.min_ms);
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
    const uint64_t kernel_start = gpu.Now();
    if (spin)
      SpinCpuMs(ms);
    else
      SleepMs(ms);
    // The GPU needs `ms` for the step's kernels. A host that took longer (descheduled by other
    // processes, a late wake-up) leaves the GPU idle before them: the kernels are the last `ms`
    // of the phase, never stretched by the host's delay, as on a real GPU.
    const uint64_t kernel_end = gpu.Now();
    const auto need = static_cast<uint64_t>(ms * 1e6);
    gpu.Compute(kernel_end - kernel_start > need ? kernel_end - need : kernel_start, kernel_end);
    SleepMs(host_ms);
    for (size_t i = 0; i < o.rank_pauses.size(); ++i) {
      const RankPause& p = o.rank_pauses[i];
      if (p.rank != rank || paused[i] || elapsed_s < p.at_s) continue;
      paused[i] = true;
      Report(fd, "pause", static_cast<int>(i));
      PauseOutsideNccl(p);
      Report(fd, "resume", static_cast<int>(i));
    }
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
    bool wait_after_first = false;
    const std::vector<int> order = CommOrder(o, rank, step, &wait_after_first);
    if (wait_after_first) Report(fd, "deadlock", step);
    if (MismatchHere(o, rank, step)) Report(fd, "mismatch", step);
    for (size_t i = 0; i < order.size(); ++i) {
      const int k = order[i];
      ncclComm_t c = comms[static_cast<size_t>(k)];
      for (size_t j = 0; j < o.collectives.size(); ++j) {
        const std::string& name = o.collectives[j];
        const uint64_t launch = gpu.Now();
        ncclResult_t rc =
            IssueCollective(o, name, rank, c, k == 0 && j == 0 && MismatchHere(o, rank, step));
        if (rc != ncclSuccess) {
          fprintf(stderr, "sentinel-sim: rank %d: %s failed: %s\n", rank, name.c_str(),
                  ncclGetErrorString(rc));
          Report(fd, "fail", rc);
          return 1;
        }
        // With --cupti each collective is waited for on its own: its kernel's end is known.
        if (gpu.on()) {
          rc = fakeNcclStreamSynchronize(c);
          if (rc == ncclSuccess) gpu.Collective(name, k, launch, gpu.Now());
        }
      }
      // A rank that waits for its first communicator's collectives before it issues the next
      // (a blocking wait on the host, as after a stream synchronize).
      if (wait_after_first && i == 0) {
        const ncclResult_t rc = fakeNcclStreamSynchronize(c);
        if (rc != ncclSuccess) {
          fprintf(stderr, "sentinel-sim: rank %d: step %d failed: %s\n", rank, step,
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
  int mismatch_at = -1;  // the step it issued a mismatched collective at (--mismatch)
  int deadlock_at = -1;  // the step it issued in a deadlocking order at (--deadlock)
  bool exited = false;
  int status = 0;
  double end_s = 0;
  int steps_run = -1;  // from its "stat" line: steps it ran, its compute and step period p50s
  double compute_p50_ms = 0;
  double period_p50_ms = 0;
};

// A --pause-rank's rank began (`begins`) or ended its pause.
void PrintPause(const Options& o, int index, bool begins, double elapsed_s) {
  if (o.quiet || index < 0 || static_cast<size_t>(index) >= o.rank_pauses.size()) return;
  const RankPause& p = o.rank_pauses[static_cast<size_t>(index)];
  if (begins) {
    printf("[sim] %.1f s: rank %d pauses %.1f s outside NCCL (%s)\n", elapsed_s, p.rank, p.for_s,
           p.io ? "io" : "sleep");
  } else {
    printf("[sim] %.1f s: rank %d resumes\n", elapsed_s, p.rank);
  }
  fflush(stdout);
}

// SIGTERM or SIGINT to the launcher: stop the job as --duration-s does (every rank finishes the
// same step; the ranks ignore both), and kill what is left 5 s later.
volatile sig_atomic_t g_stop_requested = 0;
void OnStopSignal(int) { g_stop_requested = 1; }

int Launcher(const Options& o, char** argv) {
  struct sigaction stop_action = {};
  stop_action.sa_handler = OnStopSignal;
  sigaction(SIGTERM, &stop_action, nullptr);
  sigaction(SIGINT, &stop_action, nullptr);
  sigaction(SIGHUP, &stop_action, nullptr);
  // Hogs are killed and cgroups removed when it goes out of scope, whichever way the job ends.
  CauseRunner causes(o);
  std::string cause_err;
  if (!causes.Setup(&cause_err)) {
    fprintf(stderr, "sentinel-sim: %s\n", cause_err.c_str());
    return 4;
  }
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
  if (!o.cupti.empty()) {
    // Checked once here rather than failing every rank.
    GpuTrace probe;
    if (!probe.Open(o.cupti, &cause_err)) {
      fprintf(stderr, "sentinel-sim: --cupti: %s\n", cause_err.c_str());
      return 2;
    }
    setenv("SENTINEL_CUPTI_PATH", o.cupti.c_str(), 1);
  }

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
    for (const std::string& line : HangKindBanner(o)) printf("[sim] %s\n", line.c_str());
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
      causes.InChild(r);
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
    if (pid > 0 && !causes.Started(r, pid, &cause_err)) {
      fprintf(stderr, "sentinel-sim: %s\n", cause_err.c_str());
      for (int k = 0; k <= r; ++k) {
        const pid_t started = ranks[static_cast<size_t>(k)].pid;
        if (started <= 0) continue;
        kill(started, SIGKILL);
        waitpid(started, nullptr, 0);
      }
      return 4;
    }
    if (!o.quiet && (IsCauseRank(o, r) || NamedByHangKind(o, r))) {
      printf("[sim] rank %d pid %d\n", r, static_cast<int>(pid));
    }
  }
  // The NVML scripts exist (and causes due at 0 s apply) before the first step ends.
  for (const std::string& line : causes.Tick(NowS() - start)) {
    if (!o.quiet) printf("[sim] %s\n", line.c_str());
  }
  fflush(stdout);
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
        else if (sscanf(line.c_str(), "mismatch %d", &v) == 1)
          rs.mismatch_at = v;
        else if (sscanf(line.c_str(), "deadlock %d", &v) == 1)
          rs.deadlock_at = v;
        else if (sscanf(line.c_str(), "pause %d", &v) == 1)
          PrintPause(o, v, true, NowS() - start);
        else if (sscanf(line.c_str(), "resume %d", &v) == 1)
          PrintPause(o, v, false, NowS() - start);
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
    for (const std::string& line : causes.Tick(now - start)) {
      if (!o.quiet) printf("[sim] %s\n", line.c_str());
    }
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
  causes.Finish();
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
    int mismatch_at = -1;
    int deadlock_at = -1;
    for (const RankState& rs : ranks) {
      mismatch_at = std::max(mismatch_at, rs.mismatch_at);
      deadlock_at = std::max(deadlock_at, rs.deadlock_at);
    }
    const std::string verdict = HangKindVerdict(o, o.timeout_s, mismatch_at, deadlock_at);
    if (!verdict.empty()) {
      printf("%s\n", verdict.c_str());
    } else if (who.empty() && !stuck.empty()) {
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
