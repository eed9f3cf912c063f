// The host evidence of the job's processes over time: sentineld polls each rank's pid (known from
// SO_PEERCRED) about once a second from a thread of its own, never the job's; the sampler keeps a
// bounded history of compact points per pid and answers, for a pid and a time range, how much CPU
// contention (run-queue wait, involuntary switches), CPU-quota throttling, memory and I/O pressure
// (the cgroup's and the node's PSI) and major faults the process suffered. A figure that cannot be
// told for the window is unknown, with a one-line reason, never a zero.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

#include "collector/base/ring.h"
#include "collector/evidence/cgroup_sample.h"
#include "collector/evidence/proc_sample.h"

namespace sentinel::collector {

// The figures a point may hold: bit i of HostPoint::present, and the index of its reason.
enum HostFigure : int {
  kFigStat = 0,  // state, major faults, start time
  kFigSched,     // CPU time and run-queue wait (thread sums)
  kFigSwitches,  // context switches (thread sums)
  kFigQuota,
  kFigThrottle,
  kFigIo,                                               // bytes read and written (/proc/<pid>/io)
  kFigCgroupPsi,                                        // + 2 * resource (+ 1 for full)
  kFigNodePsi = kFigCgroupPsi + 2 * kPsiResourceCount,  // likewise
  kHostFigureCount = kFigNodePsi + 2 * kPsiResourceCount,
};
constexpr int CgroupPsiFigure(int resource, bool full) {
  return kFigCgroupPsi + 2 * resource + (full ? 1 : 0);
}
constexpr int NodePsiFigure(int resource, bool full) {
  return kFigNodePsi + 2 * resource + (full ? 1 : 0);
}
using HostReasons = std::array<std::string, kHostFigureCount>;

// The threads' counters summed across polls. The kernel keeps no schedstat or switch counts of a
// thread that exited, so summing the live threads at each poll would drop when one exits. Instead
// each poll adds, per thread, only its growth since the last poll: a tid in both polls adds its
// difference; a tid new since a complete listing adds all it has (it was born after that poll); a
// tid whose counters went backwards is a new thread under a reused tid and adds all it has; a tid
// that vanished adds nothing more (its time between the last poll and its exit is lost: the window
// understates, it never goes negative).
struct ThreadFold {
  bool primed = false;  // a first listing was seen: the totals count from it
  bool last_truncated = false;
  std::vector<TaskCounters> last;  // by ascending tid; a family not read keeps its older values
  uint64_t cpu_ns = 0;
  uint64_t wait_ns = 0;
  uint64_t voluntary = 0;
  uint64_t involuntary = 0;
};
// Folds one sample's threads into `fold` (a gone sample or one without a task listing is a no-op).
void FoldThreads(const ProcSample& sample, ThreadFold* fold);

// What the sampler keeps of one poll of a process: cumulative figures only (about 250 bytes; the
// history holds samples_per_pid of them per pid).
struct HostPoint {
  int64_t mono_ns = 0;
  uint32_t present = 0;  // bit HostFigure: read at this poll
  bool gone = false;
  char state = '?';
  uint64_t starttime_ticks = 0;
  uint32_t threads = 0;
  bool tasks_truncated = false;
  uint64_t cpu_ns = 0;  // ThreadFold's totals
  uint64_t wait_ns = 0;
  uint64_t voluntary = 0;
  uint64_t involuntary = 0;
  uint64_t major_faults = 0;
  uint64_t io_chars = 0;
  uint32_t cgroup_epoch = 0;  // changes when the cgroup directories read change (a move)
  double quota_cpus = -1;
  uint64_t nr_periods = 0;
  uint64_t nr_throttled = 0;
  uint64_t throttled_ns = 0;
  std::array<uint64_t, kPsiResourceCount> cgroup_some_us{};
  std::array<uint64_t, kPsiResourceCount> cgroup_full_us{};
  std::array<uint64_t, kPsiResourceCount> node_some_us{};
  std::array<uint64_t, kPsiResourceCount> node_full_us{};
};

// A time a window measured: milliseconds, and their share of the window's wall time.
struct TimeFigure {
  bool known = false;
  double ms = 0;
  double share = 0;
  std::string why;  // why unknown: one line
};
// A count a window measured, and its rate per wall second.
struct CountFigure {
  bool known = false;
  uint64_t count = 0;
  double per_s = 0;
  std::string why;
};
struct PsiWindow {
  TimeFigure some;  // some task of the group stalled on the resource
  TimeFigure full;  // all non-idle tasks stalled at once
};

// What one process suffered between two points.
struct HostWindow {
  uint32_t pid = 0;
  int64_t from_ns = 0;  // the mono times of the two points diffed (see HostSampler::Window)
  int64_t to_ns = 0;
  double wall_s = 0;
  bool gone = false;  // the process had exited by to_ns: the figures end at its last live poll
  std::string gone_why;
  // At the end point. 'Z': a zombie (exited, not reaped: counters frozen), or, with threads still
  // listed, a process whose main thread exited while others run on.
  char state = '?';
  uint32_t threads = 0;
  bool tasks_truncated = false;  // more threads than kMaxTasksPerProcess: sums cover part of it
  TimeFigure cpu;                // on a CPU, summed over threads: share = CPUs used on average
  // Runnable but not running, summed over threads: the share can pass 1 with several waiting.
  TimeFigure run_queue_wait;
  CountFigure involuntary_switches;
  CountFigure voluntary_switches;
  CountFigure major_faults;
  CountFigure io_chars;  // bytes its read and write calls moved (rchar + wchar)
  // CPU quota: throttled time at the limiting cgroup level, periods throttled and run.
  TimeFigure throttled;
  CountFigure nr_throttled;
  CountFigure nr_periods;
  bool quota_known = false;
  double quota_cpus = -1;  // at the end point; -1: no quota
  std::string quota_why;
  std::array<PsiWindow, kPsiResourceCount> cgroup_psi;  // by PsiResource
  std::array<PsiWindow, kPsiResourceCount> node_psi;
};

// The window between two points of one process, `from` before `to`. Process figures are unknown
// when the start times differ (a reused pid); cgroup figures when the cgroup directories changed;
// any counter that went backwards is unknown for the window. `why` gives the reason of a figure
// absent at either point.
HostWindow DiffPoints(uint32_t pid, const HostPoint& from, const HostPoint& to,
                      const HostReasons& why);

struct HostSamplerOptions {
  EvidenceRoots roots;
  size_t max_pids = 256;         // beyond it a new pid evicts the least recently polled one
  size_t samples_per_pid = 300;  // 300 s of history at sentineld's 1 Hz poll
  int64_t forget_after_ns = 60'000'000'000;  // a pid not passed to Poll for this long is dropped
};

// Thread-safe: Poll from one thread (sentineld's poller; concurrent Polls are serialised), Window
// from any other (the aggregator's). The files are read outside the lock Window takes; the lock is
// held only to fold a read sample into its pid's history, and by Window to diff two points.
class HostSampler {
 public:
  explicit HostSampler(HostSamplerOptions options = {});
  HostSampler(const HostSampler&) = delete;
  HostSampler& operator=(const HostSampler&) = delete;

  // Reads every pid (and the node's PSI once) and keeps one point per pid; `mono_ns` must grow
  // from Poll to Poll (a point no later than a pid's newest is dropped). A pid whose start time
  // changed is a new process: its history restarts.
  void Poll(const std::vector<uint32_t>& pids, int64_t mono_ns) ABSL_LOCKS_EXCLUDED(poll_mu_, mu_);

  // The window of `pid` over [from_ns, to_ns]: from the newest live point at or before from_ns
  // (else the oldest kept) to the oldest live point at or after to_ns (else the newest), so the
  // window covers the range whenever the history does, and says the times it actually spans.
  // nullopt for a pid never polled or forgotten; with fewer than two live points every figure is
  // unknown (why: one poll only).
  std::optional<HostWindow> Window(uint32_t pid, int64_t from_ns, int64_t to_ns) const
      ABSL_LOCKS_EXCLUDED(mu_);

  size_t TrackedPids() const ABSL_LOCKS_EXCLUDED(mu_);
  // New pids refused because max_pids were all polled in the same Poll.
  uint64_t RefusedPids() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct PidState {
    Ring<HostPoint> points{0};
    ThreadFold fold;
    HostReasons why;  // the latest reason of each figure that was missing
    std::string gone_why;
    bool has_starttime = false;
    uint64_t starttime_ticks = 0;
    std::string cgroup_key;
    uint32_t cgroup_epoch = 0;
    int64_t last_polled_ns = 0;
  };
  void Fold(const ProcSample& proc, const CgroupSample& cgroup,
            const std::array<PsiTotals, kPsiResourceCount>& node, int64_t mono_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const HostSamplerOptions options_;
  absl::Mutex poll_mu_;
  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(poll_mu_);
  absl::flat_hash_map<uint32_t, PidState> pids_ ABSL_GUARDED_BY(mu_);
  // Each polled pid's last sample (its threads' counters), for the next read to skip the status
  // of threads that have not run since (ReadProcSample); at most max_pids, only this poll's pids.
  absl::flat_hash_map<uint32_t, ProcSample> last_proc_ ABSL_GUARDED_BY(poll_mu_);
  uint64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sentinel::collector
