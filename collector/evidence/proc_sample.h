// What the kernel says about one process at one poll: its threads' time on a CPU and waiting for
// one (/proc/<pid>/task/*/schedstat), their context switches (task/*/status), its state, major
// faults and start time (/proc/<pid>/stat). Cumulative counters only: a window is the difference of
// two polls (host_sampler.h). Every file is read with a bound and parsed as hostile input; a figure
// that could not be read carries a one-line reason instead of a silent zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sentinel::collector {

// Where the kernel's files are: the real ones, or a fake tree in tests. A containerised sentineld
// sees the job's processes only with the host's PID namespace (proc) and their cgroups only with
// the host's cgroup namespace or the job's cgroup tree mounted (cgroup).
struct EvidenceRoots {
  std::string proc = "/proc";
  std::string cgroup = "/sys/fs/cgroup";
  // The reader's own pid as <proc> and the tree's cgroup.procs show it (0: getpid()); it places
  // another cgroup namespace's paths (cgroup_namespace.h). Tests name a fake one.
  uint32_t reader_pid = 0;
};

// Bounds on the work of one poll of one process.
inline constexpr size_t kMaxTasksPerProcess = 4096;
inline constexpr size_t kProcFileLimit = 4096;     // schedstat, stat, cgroup, PSI, cpu.stat
inline constexpr size_t kStatusFileLimit = 16384;  // status: a long Groups: line comes first

// Reads at most `limit` bytes of `path` into `text` (no symlink is followed at the last component,
// O_CLOEXEC). Returns 0, or the errno of the failed open/read (EISDIR for a directory in the
// file's place). A file longer than `limit` is cut, not failed: parsers see a bounded prefix.
int ReadBoundedFile(const std::string& path, size_t limit, std::string* text);
// "cpu.stat: no such file", "stat: Permission denied": `what` and the errno's text, one line.
std::string ReadFailure(const std::string& what, int err);

// One thread's counters at a poll.
struct TaskCounters {
  uint32_t tid = 0;
  bool has_sched = false;  // schedstat read and parsed
  uint64_t cpu_ns = 0;     // schedstat field 1: time on a CPU
  uint64_t wait_ns = 0;    // schedstat field 2: time runnable, waiting on a run queue
  bool has_ctxt = false;   // both switch counts found in status (or kept: ReadProcSample)
  uint64_t voluntary_switches = 0;
  uint64_t involuntary_switches = 0;
  uint64_t timeslices = 0;  // schedstat field 3: times it was scheduled onto a CPU
};

// One poll of /proc/<pid>.
struct ProcSample {
  uint32_t pid = 0;
  // /proc/<pid> does not exist (or cannot be seen: hidepid, another PID namespace). A zombie is
  // not gone: it has state 'Z' and frozen counters.
  bool gone = false;
  std::string gone_why;

  bool has_stat = false;  // state, majflt, starttime
  char state = '?';       // R, S, D, Z, T, ... (the main thread's: 'Z' once it exited)
  uint64_t major_faults = 0;
  uint64_t starttime_ticks = 0;  // field 22: tells a reused pid from its predecessor
  std::string stat_why;          // why has_stat is false

  // /proc/<pid>/io: rchar + wchar, the bytes its read and write calls moved (files, pipes, any
  // device). Readable by the process's own user and root only.
  bool has_io = false;
  uint64_t io_chars = 0;
  std::string io_why;  // why has_io is false

  // The threads read, by ascending tid; at most kMaxTasksPerProcess.
  std::vector<TaskCounters> tasks;
  uint32_t threads = 0;          // task entries listed (at most kMaxTasksPerProcess + 1)
  bool tasks_truncated = false;  // more threads than the bound: sums cover part of the process
  std::string tasks_why;         // why no thread's schedstat could be read (empty when some were)
  std::string ctxt_why;          // why no thread's switch counts could be read
  uint32_t ctxt_kept = 0;        // threads whose switch counts came from `previous` (not read)
};

// Reads /proc/<pid>/{stat,io} and every /proc/<pid>/task/<tid>/{schedstat,status} under
// roots.proc. With `previous`, this process's last sample (same pid and start time), a thread whose
// schedstat shows neither CPU time nor a timeslice since then keeps its switch counts and its
// status is not read: a context switch takes the thread off a CPU it was scheduled onto, which
// counts a timeslice, or, for a thread on a CPU at the last read, adds the CPU time it ran until
// the switch. Most threads of a training process sleep between polls, and status is the costlier
// file (the kernel formats some 50 lines for it).
ProcSample ReadProcSample(const EvidenceRoots& roots, uint32_t pid,
                          const ProcSample* previous = nullptr);

// Parsers, public for the tests of hostile content. False on garbage; outputs untouched then.
// `text` is the content of /proc/<pid>/stat: "pid (comm) S ppid ...", comm may hold ") ".
bool ParseProcStat(const std::string& text, char* state, uint64_t* major_faults,
                   uint64_t* starttime_ticks);
// /proc/<pid>/io: the sum of its rchar and wchar lines (both required).
bool ParseProcIo(const std::string& text, uint64_t* chars);
// "cpu_ns wait_ns timeslices".
bool ParseSchedstat(const std::string& text, uint64_t* cpu_ns, uint64_t* wait_ns,
                    uint64_t* timeslices = nullptr);
// The voluntary_ctxt_switches and nonvoluntary_ctxt_switches lines of a status file.
bool ParseStatusSwitches(const std::string& text, uint64_t* voluntary, uint64_t* involuntary);
// A whole unsigned decimal number, nothing else around it but ASCII whitespace.
bool ParseU64(const std::string& text, uint64_t* value);

}  // namespace sentinel::collector
