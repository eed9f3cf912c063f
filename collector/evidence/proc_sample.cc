// One poll of a process from /proc: bounded reads, defensive parsers.
#include "collector/evidence/proc_sample.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "common/errno_text.h"

namespace sentinel::collector {
namespace {

bool ParseU64View(absl::string_view text, uint64_t* value) {
  text = absl::StripAsciiWhitespace(text);
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *value = v;
  return true;
}

// The value after "<key>:" on its own line of a status file.
bool StatusValue(absl::string_view text, absl::string_view key, uint64_t* value) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == absl::string_view::npos) end = text.size();
    const absl::string_view line = text.substr(pos, end - pos);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ':') {
      return ParseU64View(line.substr(key.size() + 1), value);
    }
    pos = end + 1;
  }
  return false;
}

// Numeric entries of /proc/<pid>/task, ascending, at most kMaxTasksPerProcess + 1 (one more tells
// that there were too many). Returns 0 or the errno of opendir.
int ListTasks(const std::string& dir, std::vector<uint32_t>* tids) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return errno;
  while (tids->size() <= kMaxTasksPerProcess) {
    const dirent* e = readdir(d);
    if (e == nullptr) break;
    uint64_t tid = 0;
    if (!ParseU64View(e->d_name, &tid) || tid == 0 || tid > UINT32_MAX) continue;
    tids->push_back(static_cast<uint32_t>(tid));
  }
  closedir(d);
  std::sort(tids->begin(), tids->end());
  return 0;
}

// A thread or process that vanished between the listing and the read: not an error of ours.
bool Vanished(int err) { return err == ENOENT || err == ESRCH; }

// ReadBoundedFile relative to an open directory (a process's task/: no path walk per thread).
// O_NONBLOCK: a FIFO planted in a tree opens and reads empty instead of blocking the poller.
int ReadBoundedFileAt(int dir_fd, const char* name, size_t limit, std::string* text) {
  text->clear();
  const int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return errno;
  text->resize(limit);
  size_t got = 0;
  int err = 0;
  while (got < limit) {
    const size_t want = limit - got;
    const ssize_t n = read(fd, &(*text)[got], want);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    got += static_cast<size_t>(n);
    // A short read is the end: the kernel's one-record files (all of /proc/<pid>'s and the cgroup
    // files read here) hand over everything they have in one read, and a regular file does too.
    // It saves the second read that would return 0 (a third of the poll's system calls).
    if (static_cast<size_t>(n) < want) break;
  }
  close(fd);
  text->resize(got);
  return err;
}

}  // namespace

int ReadBoundedFile(const std::string& path, size_t limit, std::string* text) {
  return ReadBoundedFileAt(AT_FDCWD, path.c_str(), limit, text);
}

std::string ReadFailure(const std::string& what, int err) {
  return absl::StrCat(what, ": ", err == ENOENT ? "no such file" : rules::ErrnoText(err));
}

bool ParseU64(const std::string& text, uint64_t* value) { return ParseU64View(text, value); }

bool ParseProcIo(const std::string& text, uint64_t* chars) {
  uint64_t r = 0;
  uint64_t w = 0;
  if (!StatusValue(text, "rchar", &r) || !StatusValue(text, "wchar", &w) || r > UINT64_MAX - w) {
    return false;
  }
  *chars = r + w;
  return true;
}

bool ParseProcStat(const std::string& text, char* state, uint64_t* major_faults,
                   uint64_t* starttime_ticks) {
  // The comm field is "(...)" and may itself hold ") " or spaces: the fields resume after the
  // last ')', the numbers that follow never contain one.
  const size_t close = text.rfind(')');
  if (close == std::string::npos || text.find('(') > close) return false;
  const absl::string_view rest = absl::string_view(text).substr(close + 1);
  // Fields 3.. of proc(5), split on single spaces.
  std::vector<absl::string_view> fields;
  size_t pos = 0;
  while (pos < rest.size() && fields.size() < 20) {
    while (pos < rest.size() && rest[pos] == ' ') ++pos;
    size_t end = pos;
    while (end < rest.size() && rest[end] != ' ' && rest[end] != '\n') ++end;
    if (end == pos) break;
    fields.push_back(rest.substr(pos, end - pos));
    pos = end;
  }
  if (fields.size() < 20 || fields[0].size() != 1) return false;
  const char s = fields[0][0];
  if (s < 'A' || s > 'z') return false;
  uint64_t majflt = 0;
  uint64_t start = 0;
  if (!ParseU64View(fields[12 - 3], &majflt) || !ParseU64View(fields[22 - 3], &start)) return false;
  *state = s;
  *major_faults = majflt;
  *starttime_ticks = start;
  return true;
}

bool ParseSchedstat(const std::string& text, uint64_t* cpu_ns, uint64_t* wait_ns,
                    uint64_t* timeslices) {
  const absl::string_view line = absl::StripAsciiWhitespace(text);
  const size_t a = line.find(' ');
  if (a == absl::string_view::npos) return false;
  const size_t b = line.find(' ', a + 1);
  if (b == absl::string_view::npos) return false;
  uint64_t cpu = 0;
  uint64_t wait = 0;
  uint64_t slices = 0;
  if (!ParseU64View(line.substr(0, a), &cpu) ||
      !ParseU64View(line.substr(a + 1, b - a - 1), &wait) ||
      !ParseU64View(line.substr(b + 1), &slices)) {
    return false;
  }
  *cpu_ns = cpu;
  *wait_ns = wait;
  if (timeslices != nullptr) *timeslices = slices;
  return true;
}

bool ParseStatusSwitches(const std::string& text, uint64_t* voluntary, uint64_t* involuntary) {
  uint64_t vol = 0;
  uint64_t invol = 0;
  if (!StatusValue(text, "voluntary_ctxt_switches", &vol) ||
      !StatusValue(text, "nonvoluntary_ctxt_switches", &invol)) {
    return false;
  }
  *voluntary = vol;
  *involuntary = invol;
  return true;
}

ProcSample ReadProcSample(const EvidenceRoots& roots, uint32_t pid, const ProcSample* previous) {
  ProcSample s;
  s.pid = pid;
  const std::string dir = absl::StrCat(roots.proc, "/", pid);
  std::string text;
  const int stat_err = ReadBoundedFile(dir + "/stat", kProcFileLimit, &text);
  if (Vanished(stat_err)) {
    s.gone = true;
    s.gone_why =
        absl::StrCat(dir, ": process gone (or not visible: another PID namespace, hidepid)");
    return s;
  }
  if (stat_err != 0) {
    s.stat_why = ReadFailure(dir + "/stat", stat_err);
  } else if (ParseProcStat(text, &s.state, &s.major_faults, &s.starttime_ticks)) {
    s.has_stat = true;
  } else {
    s.stat_why = absl::StrCat(dir, "/stat: unparsable");
  }

  const int io_err = ReadBoundedFile(dir + "/io", kProcFileLimit, &text);
  if (io_err != 0) {
    s.io_why = ReadFailure(dir + "/io", io_err);
  } else if (ParseProcIo(text, &s.io_chars)) {
    s.has_io = true;
  } else {
    s.io_why = absl::StrCat(dir, "/io: unparsable");
  }

  std::vector<uint32_t> tids;
  const int list_err = ListTasks(dir + "/task", &tids);
  if (list_err != 0) {
    s.tasks_why = ReadFailure(dir + "/task", list_err);
    s.ctxt_why = s.tasks_why;
    return s;
  }
  s.threads = static_cast<uint32_t>(tids.size());
  if (tids.size() > kMaxTasksPerProcess) {
    s.tasks_truncated = true;
    tids.resize(kMaxTasksPerProcess);
  }
  s.tasks.reserve(tids.size());
  const int task_fd = open((dir + "/task").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (task_fd < 0) {
    s.tasks_why = ReadFailure(dir + "/task", errno);
    s.ctxt_why = s.tasks_why;
    return s;
  }
  std::string first_sched_why;
  std::string first_ctxt_why;
  // The previous sample's threads, walked alongside (both in ascending tid order), only when it
  // is the same process (a reused pid has another start time).
  const bool same_process = previous != nullptr && previous->pid == pid && previous->has_stat &&
                            s.has_stat && previous->starttime_ticks == s.starttime_ticks;
  size_t prev_at = 0;
  for (const uint32_t tid : tids) {
    TaskCounters t;
    t.tid = tid;
    const std::string tname = std::to_string(tid);
    const auto exited = [&](int err) {
      return Vanished(err) && faccessat(task_fd, tname.c_str(), F_OK, 0) != 0;
    };
    int err = ReadBoundedFileAt(task_fd, (tname + "/schedstat").c_str(), kProcFileLimit, &text);
    if (err == 0) {
      t.has_sched = ParseSchedstat(text, &t.cpu_ns, &t.wait_ns, &t.timeslices);
      if (!t.has_sched && first_sched_why.empty()) {
        first_sched_why = absl::StrCat(dir, "/task/", tname, "/schedstat: unparsable");
      }
    } else if (exited(err)) {
      continue;  // the thread exited after the listing
    } else if (first_sched_why.empty()) {
      first_sched_why = ReadFailure(absl::StrCat(dir, "/task/", tname, "/schedstat"), err);
      if (err == ENOENT) absl::StrAppend(&first_sched_why, " (kernel without CONFIG_SCHED_INFO)");
    }
    if (same_process && t.has_sched) {
      while (prev_at < previous->tasks.size() && previous->tasks[prev_at].tid < tid) ++prev_at;
      const TaskCounters* prev =
          prev_at < previous->tasks.size() && previous->tasks[prev_at].tid == tid
              ? &previous->tasks[prev_at]
              : nullptr;
      if (prev != nullptr && prev->has_sched && prev->has_ctxt && prev->cpu_ns == t.cpu_ns &&
          prev->timeslices == t.timeslices) {
        t.has_ctxt = true;
        t.voluntary_switches = prev->voluntary_switches;
        t.involuntary_switches = prev->involuntary_switches;
        ++s.ctxt_kept;
        s.tasks.push_back(t);
        continue;
      }
    }
    err = ReadBoundedFileAt(task_fd, (tname + "/status").c_str(), kStatusFileLimit, &text);
    if (err == 0) {
      t.has_ctxt = ParseStatusSwitches(text, &t.voluntary_switches, &t.involuntary_switches);
      if (!t.has_ctxt && first_ctxt_why.empty()) {
        first_ctxt_why =
            absl::StrCat(dir, "/task/", tname, "/status: no parsable ctxt_switches lines");
      }
    } else if (first_ctxt_why.empty() && !exited(err)) {
      first_ctxt_why = ReadFailure(absl::StrCat(dir, "/task/", tname, "/status"), err);
    }
    s.tasks.push_back(t);
  }
  close(task_fd);
  const bool any_sched = std::any_of(s.tasks.begin(), s.tasks.end(),
                                     [](const TaskCounters& t) { return t.has_sched; });
  const bool any_ctxt =
      std::any_of(s.tasks.begin(), s.tasks.end(), [](const TaskCounters& t) { return t.has_ctxt; });
  if (!any_sched) {
    s.tasks_why = first_sched_why.empty() ? absl::StrCat(dir, "/task: no thread left to read")
                                          : first_sched_why;
  }
  if (!any_ctxt) {
    s.ctxt_why = first_ctxt_why.empty() ? absl::StrCat(dir, "/task: no thread left to read")
                                        : first_ctxt_why;
  }
  return s;
}

}  // namespace sentinel::collector
