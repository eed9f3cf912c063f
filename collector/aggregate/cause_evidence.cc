// See cause_evidence.h.
#include "collector/aggregate/cause_evidence.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/robust_stats.h"
#include "collector/aggregate/slow_span_text.h"
#include "collector/evidence/evidence_poller.h"

namespace sentinel::collector {
namespace {

struct Span {
  int64_t from_ns = 0;
  int64_t to_ns = 0;
  double interval_ms = -1;  // wall time per collective of the rank in the span
};

// Collectives of the rank that arrived in [from, to), and the wall time per collective.
double IntervalMs(const RankState& rs, int64_t from_ns, int64_t to_ns) {
  int64_t n = 0;
  int64_t first = 0;
  int64_t last = 0;
  for (size_t k = 0; k < rs.history.size(); ++k) {
    const int64_t t = rs.history[k].arrival_ns;
    if (t < from_ns || t >= to_ns) continue;
    if (n == 0) first = t;
    last = t;
    ++n;
  }
  if (n < 2 || last <= first) return -1;
  return static_cast<double>(last - first) / 1e6 / static_cast<double>(n - 1);
}

// The usual's spread over its polls or windows (robust_stats.h); -1 for fewer than 3 values.
double Spread(const std::vector<double>& v) {
  if (v.size() < 3) return -1;
  return RobustSpread(v, Median(v));
}

const ProcessState* ProcessOf(const State& state, const RankState& rs) {
  auto it = state.processes.find(rs.client);
  return it == state.processes.end() ? nullptr : it->second.get();
}

// A CUPTI figure of one process over [from, to): its share of the measured windows' time.
struct GpuShares {
  bool measured = false;
  double compute = 0;
  double idle = 0;
  std::vector<double> compute_each;  // per window (for the usual's spread)
  std::vector<double> idle_each;
};
GpuShares SharesOf(const GpuActivity& g, int64_t from_ns, int64_t to_ns) {
  GpuShares s;
  double wall = 0;
  double compute = 0;
  double idle = 0;
  for (size_t k = 0; k < g.windows.size(); ++k) {
    const SentinelWireGpuWindow& w = g.windows[k];
    if (w.status != 0 || w.end_ns <= from_ns || w.end_ns > to_ns || w.end_ns <= w.start_ns) {
      continue;
    }
    const double len = static_cast<double>(w.end_ns - w.start_ns);
    wall += len;
    compute += static_cast<double>(w.compute_ns);
    idle += static_cast<double>(w.idle_ns);
    s.compute_each.push_back(static_cast<double>(w.compute_ns) / len);
    s.idle_each.push_back(static_cast<double>(w.idle_ns) / len);
  }
  if (wall <= 0) return s;
  s.measured = true;
  s.compute = compute / wall;
  s.idle = idle / wall;
  return s;
}

SpanFigure ShareFigure(double now_share, double now_interval, double usual_share,
                       double usual_interval, const std::vector<double>& usual_each) {
  SpanFigure f;
  f.now = now_share * now_interval;
  f.usual = usual_share * usual_interval;
  std::vector<double> each;
  each.reserve(usual_each.size());
  for (double x : usual_each) each.push_back(x * usual_interval);
  f.spread = Spread(each);
  return f;
}

void GatherGpuKernels(const State& state, const CommState& comm, const RankState& rs,
                      const Span& now, const Span& usual, CauseEvidence* ev) {
  const ProcessState* p = ProcessOf(state, rs);
  if (p == nullptr || p->gpu.windows.size() == 0) {
    ev->missing.cupti = "no CUPTI windows from this process (the plugin's GPU activity is off)";
    return;
  }
  const GpuShares n = SharesOf(p->gpu, now.from_ns, now.to_ns);
  const GpuShares u = SharesOf(p->gpu, usual.from_ns, usual.to_ns);
  if (!n.measured || !u.measured) {
    ev->missing.cupti = "the process's CUPTI windows over the span were not measured";
    return;
  }
  ev->compute_ms =
      ShareFigure(n.compute, now.interval_ms, u.compute, usual.interval_ms, u.compute_each);
  ev->gpu_idle_ms = ShareFigure(n.idle, now.interval_ms, u.idle, usual.interval_ms, u.idle_each);
  std::vector<double> peer_compute;
  std::vector<double> peer_idle;
  for (const RankState* m : comm.members) {
    if (m == &rs || !m->active || m->client == rs.client) continue;
    const ProcessState* q = ProcessOf(state, *m);
    if (q == nullptr) continue;
    const GpuShares s = SharesOf(q->gpu, now.from_ns, now.to_ns);
    if (!s.measured) continue;
    // The ranks of one communicator take part in the same collectives: the same interval.
    peer_compute.push_back(s.compute * now.interval_ms);
    peer_idle.push_back(s.idle * now.interval_ms);
  }
  if (!peer_compute.empty()) {
    std::sort(peer_compute.begin(), peer_compute.end());
    std::sort(peer_idle.begin(), peer_idle.end());
    ev->peer_compute_ms = peer_compute[peer_compute.size() / 2];
    ev->peer_gpu_idle_ms = peer_idle[peer_idle.size() / 2];
  }
}

// The host windows a judgement reads, each diffed once: the late span, the usual span and the
// usual's single polls (for its spread). Every figure is read from these.
struct HostWindows {
  std::optional<HostWindow> now;
  std::optional<HostWindow> usual;
  std::vector<HostWindow> usual_polls;
};
HostWindows WindowsOf(const HostSampler& host, uint32_t pid, const Span& now, const Span& usual,
                      int64_t poll_ns) {
  HostWindows w;
  w.now = host.Window(pid, now.from_ns, now.to_ns);
  w.usual = host.Window(pid, usual.from_ns, usual.to_ns);
  for (int64_t t = usual.from_ns; poll_ns > 0 && t + poll_ns <= usual.to_ns; t += poll_ns) {
    std::optional<HostWindow> one = host.Window(pid, t, t + poll_ns);
    if (one) w.usual_polls.push_back(std::move(*one));
  }
  return w;
}

// A host figure per collective over both spans, with the usual's spread over its polls.
template <typename Get>
SpanFigure HostFigure(const HostWindows& w, const Span& now, const Span& usual, Get get) {
  SpanFigure f;
  double v = 0;
  if (w.now && w.now->wall_s > 0 && get(*w.now, &v)) {
    f.now = v / w.now->wall_s * now.interval_ms / 1e3;
  }
  if (w.usual && w.usual->wall_s > 0 && get(*w.usual, &v)) {
    f.usual = v / w.usual->wall_s * usual.interval_ms / 1e3;
  }
  std::vector<double> each;
  for (const HostWindow& one : w.usual_polls) {
    if (one.wall_s > 0 && get(one, &v)) each.push_back(v / one.wall_s * usual.interval_ms / 1e3);
  }
  f.spread = Spread(each);
  return f;
}

// Time figures are read in ms, counts as counts: both per wall second x 1000 in HostFigure, so a
// time's `v` is its ms and a count's its count.
bool TimeMs(const TimeFigure& t, double* v) {
  if (!t.known) return false;
  *v = t.ms;
  return true;
}
bool Count(const CountFigure& c, double* v) {
  if (!c.known) return false;
  *v = static_cast<double>(c.count);
  return true;
}

void GatherHost(const EvidencePoller& evidence, const RankState& rs, const Span& now,
                const Span& usual, int64_t poll_ns, CauseEvidence* ev) {
  const EvidenceAvailability avail = evidence.availability();
  if (!avail.host.empty()) {
    ev->missing.proc = avail.host;
    ev->missing.cgroup = avail.host;
    ev->missing.node_psi = avail.host;
    return;
  }
  const HostSampler& host = evidence.host();
  const HostWindows windows = WindowsOf(host, rs.pid, now, usual, poll_ns);
  const std::optional<HostWindow>& w = windows.now;
  if (!w) {
    ev->missing.proc = absl::StrCat("pid ", rs.pid, " not polled yet");
    ev->missing.cgroup = ev->missing.proc;
    return;
  }
  if (!w->run_queue_wait.known) ev->missing.proc = w->run_queue_wait.why;
  if (!w->throttled.known && !w->quota_why.empty()) ev->missing.cgroup = w->quota_why;
  if (!w->node_psi[kPsiCpu].some.known) ev->missing.node_psi = w->node_psi[kPsiCpu].some.why;
  ev->runq_wait_ms = HostFigure(windows, now, usual, [](const HostWindow& x, double* v) {
    return TimeMs(x.run_queue_wait, v);
  });
  ev->invol_switches = HostFigure(windows, now, usual, [](const HostWindow& x, double* v) {
    return Count(x.involuntary_switches, v);
  });
  ev->throttled_ms = HostFigure(
      windows, now, usual, [](const HostWindow& x, double* v) { return TimeMs(x.throttled, v); });
  ev->major_faults = HostFigure(
      windows, now, usual, [](const HostWindow& x, double* v) { return Count(x.major_faults, v); });
  ev->cpu_quota_cpus = !w->quota_known ? -1 : (w->quota_cpus < 0 ? 0 : w->quota_cpus);
  const struct {
    SpanFigure* cgroup;
    SpanFigure* node;
    int resource;
  } psi[] = {{&ev->cgroup_cpu_some_ms, &ev->node_cpu_some_ms, kPsiCpu},
             {&ev->cgroup_memory_some_ms, &ev->node_memory_some_ms, kPsiMemory},
             {&ev->cgroup_io_some_ms, &ev->node_io_some_ms, kPsiIo}};
  for (const auto& p : psi) {
    const int r = p.resource;
    *p.cgroup = HostFigure(windows, now, usual, [r](const HostWindow& x, double* v) {
      return TimeMs(x.cgroup_psi[r].some, v);
    });
    *p.node = HostFigure(windows, now, usual, [r](const HostWindow& x, double* v) {
      return TimeMs(x.node_psi[r].some, v);
    });
  }
}

void GatherGpuState(const EvidencePoller& evidence, const RankState& rs, const Span& now,
                    const Span& usual, CauseEvidence* ev) {
  GpuState& g = ev->gpu;
  const EvidenceAvailability avail = evidence.availability();
  if (!avail.nvml.empty()) {
    g.unknown_reason = avail.nvml;
    return;
  }
  const std::vector<GpuSample> samples =
      evidence.gpus().SamplesOfPid(rs.pid, usual.from_ns, now.to_ns);
  if (samples.empty()) {
    g.unknown_reason = absl::StrCat("NVML lists pid ", rs.pid,
                                    " on no GPU (another PID namespace, or no CUDA context)");
    return;
  }
  double clock_now = 0, clock_usual = 0, temp = 0, power = 0;
  int n_clock_now = 0, n_clock_usual = 0, n_temp = 0, n_power = 0;
  const GpuSample* first_now = nullptr;
  const GpuSample* last = nullptr;
  std::vector<double> clock_each;
  for (const GpuSample& s : samples) {
    if (s.gone) {
      g.unknown_reason = s.gone_reason;
      continue;
    }
    last = &s;
    const bool in_now = s.mono_ns >= now.from_ns;
    if (in_now && first_now == nullptr) first_now = &s;
    if (s.sm_clock_mhz.ok) {
      (in_now ? clock_now : clock_usual) += s.sm_clock_mhz.value;
      ++(in_now ? n_clock_now : n_clock_usual);
      if (!in_now) clock_each.push_back(s.sm_clock_mhz.value);
    }
    if (s.clocks_event_reasons.ok) {
      (in_now ? g.reasons_now : g.reasons_usual).Add(s.clocks_event_reasons.value);
    }
    if (in_now && s.temperature_c.ok) temp += s.temperature_c.value, ++n_temp;
    if (in_now && s.power_mw.ok) power += s.power_mw.value / 1000.0, ++n_power;
    if (in_now && s.xids.ok && !s.xids.value.empty()) {
      g.new_xids = std::max<int64_t>(g.new_xids, 0) + static_cast<int64_t>(s.xids.value.size());
      g.last_xid = static_cast<int64_t>(s.xids.value.back());
    }
  }
  if (last == nullptr || first_now == nullptr) {
    if (g.unknown_reason.empty()) g.unknown_reason = "no NVML sample over the late span";
    return;
  }
  g.known = true;
  g.unknown_reason.clear();
  if (n_clock_now > 0) g.sm_clock_mhz.now = clock_now / n_clock_now;
  if (n_clock_usual > 0) g.sm_clock_mhz.usual = clock_usual / n_clock_usual;
  g.sm_clock_mhz.spread = Spread(clock_each);
  if (last->sm_clock_max_mhz.ok) g.sm_clock_max_mhz = last->sm_clock_max_mhz.value;
  g.reasons_known = g.reasons_now.polls > 0;
  if (n_temp > 0) g.temperature_c = temp / n_temp;
  if (n_power > 0) g.power_w = power / n_power;
  if (last->power_limit_mw.ok) g.power_limit_w = last->power_limit_mw.value / 1000.0;
  if (g.new_xids < 0 && first_now->xids.ok) g.new_xids = 0;
  if (first_now->ecc_uncorrected.ok && last->ecc_uncorrected.ok &&
      last->ecc_uncorrected.value >= first_now->ecc_uncorrected.value) {
    g.new_uncorrected_ecc =
        static_cast<int64_t>(last->ecc_uncorrected.value - first_now->ecc_uncorrected.value);
  }
  if (last->pcie_gen.ok) g.pcie_gen = last->pcie_gen.value;
  if (last->pcie_gen_max.ok) g.pcie_gen_max = last->pcie_gen_max.value;
  if (last->pcie_width.ok) g.pcie_width = last->pcie_width.value;
  if (last->pcie_width_max.ok) g.pcie_width_max = last->pcie_width_max.value;
  if (first_now->pcie_replay.ok && last->pcie_replay.ok &&
      last->pcie_replay.value >= first_now->pcie_replay.value) {
    g.pcie_replay_delta = last->pcie_replay.value - first_now->pcie_replay.value;
  }
}

}  // namespace

LateSpan LateSpanSince(const RankState& rs, uint64_t since_seq, double late_ms,
                       double late_usual_ms, double step_ms, int64_t now_ns) {
  LateSpan s;
  s.to_ns = now_ns;
  s.from_ns = now_ns;
  for (size_t k = 0; k < rs.history.size(); ++k) {
    if (rs.history[k].seq >= since_seq) {
      s.from_ns = std::min(s.from_ns, rs.history[k].arrival_ns);
      break;
    }
  }
  s.late_ms = late_ms;
  s.late_usual_ms = late_usual_ms;
  s.step_ms = step_ms;
  return s;
}

CauseEvidence GatherCauseEvidence(const State& state, const CommState& comm, const RankState& rs,
                                  const LateSpan& span, const EvidencePoller* evidence) {
  CauseEvidence ev;
  ev.late_ms = span.late_ms;
  ev.late_usual_ms = span.late_usual_ms;
  ev.step_ms = span.step_ms;
  Span now{span.from_ns, span.to_ns, IntervalMs(rs, span.from_ns, span.to_ns)};
  const int64_t usual_len = std::max(kMinUsualSpanNs, span.to_ns - span.from_ns);
  Span usual{span.from_ns - usual_len, span.from_ns,
             IntervalMs(rs, span.from_ns - usual_len, span.from_ns)};
  for (size_t k = 0; k < rs.history.size(); ++k) {
    const int64_t t = rs.history[k].arrival_ns;
    if (t >= now.from_ns && t < now.to_ns) ++ev.steps;
  }
  // Without the usual span in the history (it wrapped), the usual collective is the step.
  if (usual.interval_ms <= 0) usual.interval_ms = span.step_ms;
  if (now.interval_ms <= 0) {
    ev.missing.cupti = ev.missing.proc = "fewer than two collectives in the late span";
    return ev;
  }
  // A host window widens to the polls enclosing it: the usual ends a poll before the late run, so
  // that its enclosing poll never reaches into it (the late run would inflate its own usual).
  Span usual_host = usual;
  if (evidence != nullptr && evidence->period_ns() > 0) {
    usual_host.to_ns = std::max(usual.from_ns, usual.to_ns - evidence->period_ns());
  }
  GatherGpuKernels(state, comm, rs, now, usual, &ev);
  if (evidence == nullptr) {
    ev.missing.proc = ev.missing.cgroup = ev.missing.node_psi = "the evidence poll is off";
    ev.gpu.unknown_reason = ev.missing.proc;
  } else {
    GatherHost(*evidence, rs, now, usual_host, evidence->period_ns(), &ev);
    GatherGpuState(*evidence, rs, now, usual_host, &ev);
  }
  const SlowSpan* net = state.slow.LastSettled(comm.key());
  if (net != nullptr && net->cause == SlowCauseKind::kNetwork && net->end_ns >= span.from_ns) {
    ev.network_named = true;
    ev.network_text = SlowSpanVerdict(*net);
  }
  return ev;
}

LateCauseParams CauseParamsFrom(const Config& config) {
  LateCauseParams p;
  p.min_late_share = config.straggler_rel / 2;
  return p;
}

void CauseCache::Trim(int64_t now_ns) {
  constexpr int64_t kForgetNs = 60LL * 1000000000;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (now_ns - it->second.asked_ns >= kForgetNs) {
      entries_.erase(it++);
    } else {
      ++it;
    }
  }
  // Still full: every entry was asked for within the minute; the oldest judgements go first.
  while (entries_.size() > kMaxEntries) {
    auto oldest = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.at_ns < oldest->second.at_ns) oldest = it;
    }
    entries_.erase(oldest);
  }
}

nlohmann::json CauseJson(const CauseVerdict& v) {
  auto finding = [](const CauseFinding& f) {
    return nlohmann::json{
        {"cause", LateCauseName(f.cause)}, {"detail", f.detail},   {"excess_ms", f.excess_ms},
        {"explained_share", f.share},      {"figures", f.figures}, {"support", f.support}};
  };
  nlohmann::json j = finding(v.named);
  j["what_to_do"] = v.what_to_do;
  j["late_ms"] = v.late_ms;
  j["also"] = v.also.cause == LateCause::kUnknown ? nlohmann::json(nullptr) : finding(v.also);
  j["unknown_reason"] = v.unknown_reason;
  j["not_judged"] = v.not_judged;
  return j;
}

}  // namespace sentinel::collector
