// The host sampler: per-pid history of compact points, the thread fold, and window diffs.
#include "collector/evidence/host_sampler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sentinel::collector {
namespace {

constexpr uint32_t Bit(int figure) { return 1u << figure; }

// Adds a thread's growth since `prev` (see ThreadFold) to two running totals.
void AddGrowth(bool primed, bool last_truncated, bool prev_known, uint64_t prev_a, uint64_t prev_b,
               bool has_prev_entry, uint64_t now_a, uint64_t now_b, uint64_t* total_a,
               uint64_t* total_b) {
  if (!primed) return;
  if (has_prev_entry && prev_known) {
    if (now_a >= prev_a && now_b >= prev_b) {
      *total_a += now_a - prev_a;
      *total_b += now_b - prev_b;
    } else {  // a new thread under a reused tid: all it has came after the last poll
      *total_a += now_a;
      *total_b += now_b;
    }
  } else if (!has_prev_entry && !last_truncated) {  // born since a complete listing
    *total_a += now_a;
    *total_b += now_b;
  }
  // Otherwise the thread was there without a baseline: it starts counting from now.
}

std::string Reason(const HostReasons& why, int figure) {
  const std::string& text = why[static_cast<size_t>(figure)];
  return text.empty() ? std::string("not read") : text;
}

// Diffs one cumulative figure; false (with `why_out`) when it is unknown for the window.
bool Growth(const HostPoint& a, const HostPoint& b, int figure, uint64_t from, uint64_t to,
            const char* name, const HostReasons& why, const std::string& veto, uint64_t* delta,
            std::string* why_out) {
  if (!veto.empty()) {
    *why_out = veto;
    return false;
  }
  if ((a.present & Bit(figure)) == 0 || (b.present & Bit(figure)) == 0) {
    *why_out = Reason(why, figure);
    return false;
  }
  if (to < from) {
    *why_out = absl::StrCat(name, " went backwards between the points (counter reset)");
    return false;
  }
  *delta = to - from;
  return true;
}

void TimeOf(const HostPoint& a, const HostPoint& b, int figure, uint64_t from, uint64_t to,
            double ns_per_unit, const char* name, const HostReasons& why, const std::string& veto,
            TimeFigure* out) {
  uint64_t d = 0;
  if (!Growth(a, b, figure, from, to, name, why, veto, &d, &out->why)) return;
  const double ns = static_cast<double>(d) * ns_per_unit;
  out->known = true;
  out->ms = ns / 1e6;
  out->share = ns / static_cast<double>(b.mono_ns - a.mono_ns);
}

void CountOf(const HostPoint& a, const HostPoint& b, int figure, uint64_t from, uint64_t to,
             const char* name, const HostReasons& why, const std::string& veto, CountFigure* out) {
  uint64_t d = 0;
  if (!Growth(a, b, figure, from, to, name, why, veto, &d, &out->why)) return;
  out->known = true;
  out->count = d;
  out->per_s = static_cast<double>(d) * 1e9 / static_cast<double>(b.mono_ns - a.mono_ns);
}

// A window whose every figure is unknown for one reason.
HostWindow Unknown(uint32_t pid, const std::string& why) {
  HostWindow w;
  w.pid = pid;
  for (TimeFigure* t : {&w.cpu, &w.run_queue_wait, &w.throttled}) t->why = why;
  for (CountFigure* c : {&w.involuntary_switches, &w.voluntary_switches, &w.major_faults,
                         &w.io_chars, &w.nr_throttled, &w.nr_periods}) {
    c->why = why;
  }
  w.quota_why = why;
  for (auto* psi : {&w.cgroup_psi, &w.node_psi}) {
    for (PsiWindow& p : *psi) p.some.why = p.full.why = why;
  }
  return w;
}

}  // namespace

void FoldThreads(const ProcSample& sample, ThreadFold* fold) {
  if (sample.gone || sample.threads == 0) return;  // nothing listed: keep the last baseline
  std::vector<TaskCounters> next;
  next.reserve(sample.tasks.size());
  size_t j = 0;
  for (const TaskCounters& now : sample.tasks) {
    while (j < fold->last.size() && fold->last[j].tid < now.tid) ++j;
    const bool has_prev = j < fold->last.size() && fold->last[j].tid == now.tid;
    const TaskCounters prev = has_prev ? fold->last[j] : TaskCounters{};
    TaskCounters keep = now;
    if (now.has_sched) {
      AddGrowth(fold->primed, fold->last_truncated, prev.has_sched, prev.cpu_ns, prev.wait_ns,
                has_prev, now.cpu_ns, now.wait_ns, &fold->cpu_ns, &fold->wait_ns);
    } else if (prev.has_sched) {  // not read this time: keep the baseline for the next poll
      keep.has_sched = true;
      keep.cpu_ns = prev.cpu_ns;
      keep.wait_ns = prev.wait_ns;
    }
    if (now.has_ctxt) {
      AddGrowth(fold->primed, fold->last_truncated, prev.has_ctxt, prev.voluntary_switches,
                prev.involuntary_switches, has_prev, now.voluntary_switches,
                now.involuntary_switches, &fold->voluntary, &fold->involuntary);
    } else if (prev.has_ctxt) {
      keep.has_ctxt = true;
      keep.voluntary_switches = prev.voluntary_switches;
      keep.involuntary_switches = prev.involuntary_switches;
    }
    next.push_back(keep);
  }
  fold->last.swap(next);
  fold->last_truncated = sample.tasks_truncated;
  fold->primed = true;
}

HostWindow DiffPoints(uint32_t pid, const HostPoint& from, const HostPoint& to,
                      const HostReasons& why) {
  if (to.mono_ns <= from.mono_ns) return Unknown(pid, "the points are not in time order");
  HostWindow w;
  w.pid = pid;
  w.from_ns = from.mono_ns;
  w.to_ns = to.mono_ns;
  w.wall_s = static_cast<double>(to.mono_ns - from.mono_ns) / 1e9;
  w.state = to.state;
  w.threads = to.threads;
  w.tasks_truncated = to.tasks_truncated;
  const bool stat_both = (from.present & Bit(kFigStat)) != 0 && (to.present & Bit(kFigStat)) != 0;
  const std::string process_veto =
      stat_both && from.starttime_ticks != to.starttime_ticks
          ? "pid reused: the process's start time changed between the points"
          : "";
  const std::string cgroup_veto = from.cgroup_epoch != to.cgroup_epoch
                                      ? "the process moved to another cgroup between the points"
                                      : process_veto;
  const std::string none;
  TimeOf(from, to, kFigSched, from.cpu_ns, to.cpu_ns, 1, "CPU time", why, process_veto, &w.cpu);
  TimeOf(from, to, kFigSched, from.wait_ns, to.wait_ns, 1, "run-queue wait", why, process_veto,
         &w.run_queue_wait);
  CountOf(from, to, kFigSwitches, from.involuntary, to.involuntary, "involuntary switches", why,
          process_veto, &w.involuntary_switches);
  CountOf(from, to, kFigSwitches, from.voluntary, to.voluntary, "voluntary switches", why,
          process_veto, &w.voluntary_switches);
  CountOf(from, to, kFigStat, from.major_faults, to.major_faults, "majflt", why, process_veto,
          &w.major_faults);
  CountOf(from, to, kFigIo, from.io_chars, to.io_chars, "I/O bytes", why, process_veto,
          &w.io_chars);
  TimeOf(from, to, kFigThrottle, from.throttled_ns, to.throttled_ns, 1, "throttled time", why,
         cgroup_veto, &w.throttled);
  CountOf(from, to, kFigThrottle, from.nr_throttled, to.nr_throttled, "nr_throttled", why,
          cgroup_veto, &w.nr_throttled);
  CountOf(from, to, kFigThrottle, from.nr_periods, to.nr_periods, "nr_periods", why, cgroup_veto,
          &w.nr_periods);
  if ((to.present & Bit(kFigQuota)) != 0) {
    w.quota_known = true;
    w.quota_cpus = to.quota_cpus;
  } else {
    w.quota_why = Reason(why, kFigQuota);
  }
  for (int r = 0; r < kPsiResourceCount; ++r) {
    const size_t i = static_cast<size_t>(r);
    TimeOf(from, to, CgroupPsiFigure(r, false), from.cgroup_some_us[i], to.cgroup_some_us[i], 1e3,
           "cgroup PSI some total", why, cgroup_veto, &w.cgroup_psi[i].some);
    TimeOf(from, to, CgroupPsiFigure(r, true), from.cgroup_full_us[i], to.cgroup_full_us[i], 1e3,
           "cgroup PSI full total", why, cgroup_veto, &w.cgroup_psi[i].full);
    TimeOf(from, to, NodePsiFigure(r, false), from.node_some_us[i], to.node_some_us[i], 1e3,
           "node PSI some total", why, none, &w.node_psi[i].some);
    TimeOf(from, to, NodePsiFigure(r, true), from.node_full_us[i], to.node_full_us[i], 1e3,
           "node PSI full total", why, none, &w.node_psi[i].full);
  }
  return w;
}

HostSampler::HostSampler(HostSamplerOptions options) : options_(std::move(options)) {}

void HostSampler::Poll(const std::vector<uint32_t>& pids, int64_t mono_ns) {
  absl::MutexLock poll_lock(&poll_mu_);
  std::vector<uint32_t> unique = pids;  // a pid passed twice is read once
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  const std::array<PsiTotals, kPsiResourceCount> node = ReadNodePsi(options_.roots);
  // This poll's samples become the next poll's previous ones: only the pids polled now are kept
  // (a pid no longer polled gets a full read if it returns), at most max_pids of them.
  absl::flat_hash_map<uint32_t, ProcSample> polled;
  for (const uint32_t pid : unique) {
    // The reads (the slow part) run outside mu_, so Window never waits on the file system.
    const auto last = last_proc_.find(pid);
    ProcSample proc =
        ReadProcSample(options_.roots, pid, last != last_proc_.end() ? &last->second : nullptr);
    const CgroupSample cgroup =
        proc.gone ? CgroupSample{} : ReadCgroupSample(options_.roots, pid, mono_ns);
    {
      absl::MutexLock lock(&mu_);
      Fold(proc, cgroup, node, mono_ns);
    }
    if (!proc.gone && polled.size() < options_.max_pids) polled.emplace(pid, std::move(proc));
  }
  last_proc_ = std::move(polled);
  absl::MutexLock lock(&mu_);
  for (auto it = pids_.begin(); it != pids_.end();) {
    if (mono_ns - it->second.last_polled_ns > options_.forget_after_ns) {
      pids_.erase(it++);
    } else {
      ++it;
    }
  }
}

void HostSampler::Fold(const ProcSample& proc, const CgroupSample& cgroup,
                       const std::array<PsiTotals, kPsiResourceCount>& node, int64_t mono_ns) {
  auto it = pids_.find(proc.pid);
  if (it == pids_.end()) {
    if (options_.max_pids == 0) return;
    if (pids_.size() >= options_.max_pids) {
      // Evict the least recently polled pid, never one this poll has already read.
      auto oldest = pids_.end();
      for (auto p = pids_.begin(); p != pids_.end(); ++p) {
        if (p->second.last_polled_ns < mono_ns &&
            (oldest == pids_.end() || p->second.last_polled_ns < oldest->second.last_polled_ns)) {
          oldest = p;
        }
      }
      if (oldest == pids_.end()) {
        ++refused_;
        return;
      }
      pids_.erase(oldest);
    }
    it = pids_.emplace(proc.pid, PidState()).first;
    it->second.points.Reset(std::max<size_t>(options_.samples_per_pid, 2));
  }
  PidState* st = &it->second;
  // Points stay in time order: a poll stamped no later than the newest kept one is dropped.
  if (st->points.size() > 0 && mono_ns <= st->points.Newest().mono_ns) return;
  if (proc.has_stat && st->has_starttime && proc.starttime_ticks != st->starttime_ticks) {
    // Another process under the same pid: nothing of the old one may be diffed against it.
    *st = PidState();
    st->points.Reset(std::max<size_t>(options_.samples_per_pid, 2));
  }
  st->last_polled_ns = mono_ns;
  HostPoint p;
  p.mono_ns = mono_ns;
  if (proc.gone) {
    p.gone = true;
    st->gone_why = proc.gone_why;
    st->points.Push(p);
    return;
  }
  if (proc.has_stat) {
    st->has_starttime = true;
    st->starttime_ticks = proc.starttime_ticks;
  }
  auto set = [&](int figure, bool ok, const std::string& why) {
    if (ok) {
      p.present |= Bit(figure);
    } else {
      st->why[static_cast<size_t>(figure)] = why;
    }
  };
  set(kFigStat, proc.has_stat, proc.stat_why);
  p.state = proc.state;
  p.starttime_ticks = proc.starttime_ticks;
  p.major_faults = proc.major_faults;
  set(kFigIo, proc.has_io, proc.io_why);
  p.io_chars = proc.io_chars;
  p.threads = proc.threads;
  p.tasks_truncated = proc.tasks_truncated;
  FoldThreads(proc, &st->fold);
  set(kFigSched, proc.tasks_why.empty() && st->fold.primed, proc.tasks_why);
  set(kFigSwitches, proc.ctxt_why.empty() && st->fold.primed, proc.ctxt_why);
  p.cpu_ns = st->fold.cpu_ns;
  p.wait_ns = st->fold.wait_ns;
  p.voluntary = st->fold.voluntary;
  p.involuntary = st->fold.involuntary;

  // A transient failure to read the cgroup keeps the epoch: only a different directory moves it.
  if (cgroup.has_paths) {
    std::string key = absl::StrCat(cgroup.psi_dir, "\n", cgroup.throttle_dir);
    if (key != st->cgroup_key) {
      st->cgroup_key = std::move(key);
      ++st->cgroup_epoch;
    }
  }
  p.cgroup_epoch = st->cgroup_epoch;
  set(kFigQuota, cgroup.has_quota, cgroup.quota_why);
  p.quota_cpus = cgroup.quota_cpus;
  set(kFigThrottle, cgroup.has_throttle, cgroup.throttle_why);
  p.nr_periods = cgroup.nr_periods;
  p.nr_throttled = cgroup.nr_throttled;
  p.throttled_ns = cgroup.throttled_ns;
  for (int r = 0; r < kPsiResourceCount; ++r) {
    const size_t i = static_cast<size_t>(r);
    const PsiTotals& c = cgroup.psi[i];
    set(CgroupPsiFigure(r, false), c.has_some, c.some_why);
    set(CgroupPsiFigure(r, true), c.has_full, c.full_why);
    p.cgroup_some_us[i] = c.some_us;
    p.cgroup_full_us[i] = c.full_us;
    const PsiTotals& n = node[i];
    set(NodePsiFigure(r, false), n.has_some, n.some_why);
    set(NodePsiFigure(r, true), n.has_full, n.full_why);
    p.node_some_us[i] = n.some_us;
    p.node_full_us[i] = n.full_us;
  }
  st->points.Push(p);
}

std::optional<HostWindow> HostSampler::Window(uint32_t pid, int64_t from_ns, int64_t to_ns) const {
  if (to_ns < from_ns) std::swap(from_ns, to_ns);
  absl::MutexLock lock(&mu_);
  const auto it = pids_.find(pid);
  if (it == pids_.end()) return std::nullopt;
  const PidState& st = it->second;
  const Ring<HostPoint>& points = st.points;
  // The newest live point at or before from_ns, else the oldest live one.
  size_t from_i = points.size();
  for (size_t i = 0; i < points.size(); ++i) {
    if (points[i].gone) continue;
    if (points[i].mono_ns <= from_ns || from_i == points.size()) from_i = i;
    if (points[i].mono_ns > from_ns) break;
  }
  // The oldest live point after it at or after to_ns, else the newest live one.
  size_t to_i = points.size();
  for (size_t i = from_i + 1; from_i < points.size() && i < points.size(); ++i) {
    if (points[i].gone) continue;
    to_i = i;
    if (points[i].mono_ns >= to_ns) break;
  }
  bool gone = false;
  for (size_t i = 0; i < points.size(); ++i) {
    if (points[i].gone && points[i].mono_ns <= to_ns) gone = true;
  }
  HostWindow w;
  if (to_i == points.size()) {
    w = Unknown(pid, gone && from_i == points.size()
                         ? st.gone_why
                         : "one poll only: a window needs two polls of the process");
    if (from_i < points.size()) w.from_ns = w.to_ns = points[from_i].mono_ns;
  } else {
    w = DiffPoints(pid, points[from_i], points[to_i], st.why);
  }
  w.gone = gone;
  if (gone) w.gone_why = st.gone_why;
  return w;
}

size_t HostSampler::TrackedPids() const {
  absl::MutexLock lock(&mu_);
  return pids_.size();
}

uint64_t HostSampler::RefusedPids() const {
  absl::MutexLock lock(&mu_);
  return refused_;
}

}  // namespace sentinel::collector
