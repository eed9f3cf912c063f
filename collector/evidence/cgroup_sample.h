// What the cgroup tree says about one process at one poll: its CPU quota and how often it was
// throttled (cpu.stat, cpu.max; cgroup v1's cpu.cfs_*), and its cgroup's pressure stall totals
// (cpu/memory/io.pressure, cgroup v2 only); and the node's own pressure (/proc/pressure/*).
// Cumulative counters, as read; a figure that could not be read carries a one-line reason.
//
// The path in /proc/<pid>/cgroup is relative to the reader's cgroup namespace root: a sentineld in
// a container with its own cgroup namespace sees the job's cgroups as "/../..." (refused, with the
// reason) or not at all; it needs the host's cgroup namespace, or the job's cgroup tree mounted at
// EvidenceRoots::cgroup.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "collector/evidence/proc_sample.h"

namespace sentinel::collector {

enum PsiResource : int { kPsiCpu = 0, kPsiMemory, kPsiIo, kPsiResourceCount };
// "cpu", "memory", "io": the file is "<name>.pressure".
const char* PsiResourceName(int resource);

// One pressure file's cumulative stall totals ("some ... total=<us>", "full ... total=<us>").
struct PsiTotals {
  bool has_some = false;
  uint64_t some_us = 0;
  bool has_full = false;  // the node's and a cgroup's cpu.pressure have no full line before 5.13
  uint64_t full_us = 0;
  std::string some_why;  // why has_some is false
  std::string full_why;
};
// Parses a pressure file; lines it cannot parse leave their half absent (with a reason).
PsiTotals ParsePsi(const std::string& text, const std::string& what);
// Reads and parses one pressure file; `missing_hint` is appended to the reason of an absent file.
PsiTotals ReadPsiFile(const std::string& path, const std::string& what,
                      const std::string& missing_hint);

// The node's pressure: <proc>/pressure/{cpu,memory,io}.
std::array<PsiTotals, kPsiResourceCount> ReadNodePsi(const EvidenceRoots& roots);

struct CgroupSample {
  // From /proc/<pid>/cgroup, relative to the cgroup namespace root.
  bool has_paths = false;
  std::string v2_path;         // the "0::" line ("" without one)
  std::string v1_cpu_path;     // the line whose controllers hold "cpu" ("" without one)
  std::string v1_cpu_mount;    // that line's controller list, e.g. "cpu,cpuacct"
  std::string v1_memory_path;  // the "memory" line ("" without one): no PSI in v1, shown only
  std::string paths_why;

  // cgroup v2 pressure of the process's own cgroup (in a hybrid tree, from the unified mount).
  std::string psi_dir;  // the directory read, "" when none
  std::array<PsiTotals, kPsiResourceCount> psi;

  // The CPU quota: the tightest over the process's cgroup and its ancestors, since a parent's
  // limit (a Kubernetes pod's) throttles its children too.
  bool has_quota = false;
  double quota_cpus = -1;  // -1: no quota at any level
  std::string quota_why;
  // Throttling is counted in the cpu.stat of the level whose quota ran out: read at the limiting
  // level (the process's own cgroup when there is no quota).
  std::string throttle_dir;
  bool has_throttle = false;
  uint64_t nr_periods = 0;
  uint64_t nr_throttled = 0;
  uint64_t throttled_ns = 0;
  std::string throttle_why;
};

// Reads /proc/<pid>/cgroup, then the cgroup files it names under roots.cgroup. The tree is v2 when
// <cgroup>/cgroup.controllers exists, hybrid when <cgroup>/unified/cgroup.controllers does (v1
// controllers beside a v2 mount for PSI), else v1. A v1 controller's directory is
// <cgroup>/<controller list as in /proc/<pid>/cgroup>, else <cgroup>/cpu or cpu,cpuacct.
// `now_ns` (CLOCK_MONOTONIC; 0: unknown) times the cache of the reader's own cgroup that places
// paths of another cgroup namespace (cgroup_namespace.h).
CgroupSample ReadCgroupSample(const EvidenceRoots& roots, uint32_t pid, int64_t now_ns = 0);

// Parsers, public for the tests of hostile content. False on garbage; outputs untouched then.
// /proc/<pid>/cgroup: "0::/path" (v2) and "N:ctrl,ctrl:/path" (v1).
bool ParseProcCgroup(const std::string& text, CgroupSample* out);
// cpu.stat: v2 (throttled_usec) or v1 (throttled_time, ns); all three counters or false.
bool ParseCpuStat(const std::string& text, uint64_t* nr_periods, uint64_t* nr_throttled,
                  uint64_t* throttled_ns);
// cpu.max: "max 100000" -> -1, "20000 100000" -> 0.2.
bool ParseCpuMax(const std::string& text, double* quota_cpus);
// cgroup v1 cpu.cfs_quota_us and cpu.cfs_period_us: "-1" -> -1, else quota / period.
bool ParseCfsQuota(const std::string& quota_text, const std::string& period_text,
                   double* quota_cpus);

}  // namespace sentinel::collector
