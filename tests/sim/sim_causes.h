// The causes of a late rank that sentinel-sim injects, each leaving the evidence its real
// counterpart leaves on a node: kernel records in the fake CUPTI the rank's plugin loaded
// (GpuTrace), the fake NVML script of each node's sentineld (NvmlScriptText), a busy process
// sharing the rank's CPU and a CPU quota on the rank's own cgroup (CauseRunner), CPU-bound compute
// (SpinCpuMs).
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "tests/sim/sim_options.h"

namespace sentinel::sim {

// Burns `ms` of the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID): under contention or a
// quota it takes longer in wall time, as real host work does.
void SpinCpuMs(double ms);

// A rank's side of the fake CUPTI: the copy of libsentinel_fake_cupti.so its plugin loads (the
// same path, so the same loaded object) gets the records of what the rank does. Real CUPTI writes
// a kernel's record once the kernel ended and hands it over at the next flush: so does this, as
// records are pushed only after their kernel's end and delivered by the plugin's own flushes.
class GpuTrace {
 public:
  // Loads `path`; false (and why in *err) when it is not the fake libcupti.
  bool Open(const std::string& path, std::string* err);
  bool on() const { return push_ != nullptr; }
  // CUPTI's clock (the fake's cuptiGetTimestamp), 0 when off.
  uint64_t Now() const;
  // A compute kernel on the compute stream.
  void Compute(uint64_t start, uint64_t end);
  // The NCCL kernel of collective `name` (an --collectives item) on communicator `comm`'s stream.
  void Collective(const std::string& name, int comm, uint64_t start, uint64_t end);

 private:
  using PushFn = void (*)(uint64_t, uint64_t, uint32_t, const char*, uint64_t, uint32_t);
  using NowFn = int (*)(uint64_t*);
  PushFn push_ = nullptr;
  NowFn now_ = nullptr;
  uint32_t correlation_ = 0;
};

// The fake NVML script of node `node` (format: tests/fakes/README.md, fake NVML) at `elapsed_s`
// into the job: one GPU per rank of the node, healthy, but for the --gpu-slow ranks whose from-s
// has passed. `pids[r]` is rank r's pid (<= 0: not started).
std::string NvmlScriptText(const Options& o, int node, const std::vector<pid_t>& pids,
                           double elapsed_s);

// Writes `text` to path.tmp and renames it over `path`; false (and why in *err) on failure.
bool WriteFileAtomically(const std::string& path, const std::string& text, std::string* err);

// The launcher's side of the causes: sets up what must exist before the ranks start (CPUs to pin,
// cgroups), pins and moves each rank, starts hogs, sets quotas and rewrites the NVML scripts at
// their from-s, and undoes it all (hogs killed, cgroups removed) when destroyed.
class CauseRunner {
 public:
  explicit CauseRunner(const Options& o) : o_(o) {}
  ~CauseRunner();
  CauseRunner(const CauseRunner&) = delete;
  CauseRunner& operator=(const CauseRunner&) = delete;

  // Before any rank starts: false (and why in *err) when a cause cannot be set up here.
  bool Setup(std::string* err);
  // In rank `rank`'s child process between fork and exec (pins it to its CPU).
  void InChild(int rank) const;
  // In the launcher once rank `rank` runs as `pid`: false (and why) when it cannot be moved to
  // its cgroup.
  bool Started(int rank, pid_t pid, std::string* err);
  // Applies what is due at `elapsed_s` (hogs, quotas, NVML scripts); the lines to print.
  std::vector<std::string> Tick(double elapsed_s);
  // Once every rank exited: kills the hogs and removes the cgroups.
  void Finish();

 private:
  struct Cgroup {
    int rank = -1;
    std::string dir;  // empty once removed
    bool v2 = true;
  };
  bool MakeCgroup(int rank, std::string* err);
  void WriteNvmlScripts(double elapsed_s, std::vector<std::string>* lines);

  const Options& o_;
  std::vector<pid_t> pids_;
  std::vector<int> hog_cpu_;      // per --cpu-hog
  std::vector<pid_t> hogs_;       // per --cpu-hog, -1 until started
  std::vector<bool> quota_set_;   // per --cpu-quota
  std::vector<Cgroup> cgroups_;   // per --cpu-quota
  std::vector<bool> slow_shown_;  // per --gpu-slow: its NVML reason written
  bool nvml_written_ = false;
};

}  // namespace sentinel::sim
