// The cause of a late rank from the node's evidence: see late_cause.h.
#include "collector/aggregate/late_cause.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "common/wire_text.h"

namespace sentinel::collector {
// Its own namespace: sentineld's library is compiled in unity batches, where anonymous namespaces
// of different files merge, and these helpers' short names would meet other files' ones.
namespace late_cause_internal {
namespace {

// Text from outside is cut to this many bytes before it is escaped: an alert stays one short line.
constexpr size_t kMaxOutsideText = 200;

// A measurement, or -1 when it is not one (negative, NaN, infinite, implausibly large).
double Clean(double x) { return std::isfinite(x) && x >= 0 && x <= kMaxCauseFigure ? x : -1; }

int64_t CleanCount(int64_t x) {
  return x >= 0 && static_cast<double>(x) <= kMaxCauseFigure ? x : -1;
}

struct Fig {
  double now = -1;
  double usual = -1;
  double spread = -1;
  bool Known() const { return now >= 0 && usual >= 0; }
  double Excess() const { return now - usual; }
};

Fig CleanFig(const SpanFigure& f) { return Fig{Clean(f.now), Clean(f.usual), Clean(f.spread)}; }

// A line from outside (a sysfs name in the NIC verdict, a reader's error text) made safe and short.
std::string OutsideText(const std::string& text) {
  const size_t n = std::min(text.size(), kMaxOutsideText);
  std::string out(n * 4 + 1, '\0');
  out.resize(rules::EscapeWireText(text.data(), n, out.data(), out.size()));
  if (text.size() > n) out += "...";
  return out;
}

// Three significant figures down to 0.01 ms: a figure just under a bar does not print as the bar.
std::string Ms(double ms) {
  if (ms < 9.995) return absl::StrFormat("%.2f ms", ms);
  if (ms < 99.95) return absl::StrFormat("%.1f ms", ms);
  return absl::StrFormat("%.0f ms", ms);
}

std::string Count(double n) {
  return n < 9.95 ? absl::StrFormat("%.1f", n) : absl::StrFormat("%.0f", n);
}

// Rounded down: 49.9 % of the lateness is not shown as the 50 % it did not reach.
std::string Pct(double share) { return absl::StrFormat("%.0f %%", std::floor(100 * share + 1e-9)); }

// A bar as the parameters give it: "2.5 %".
std::string BarPct(double share) { return absl::StrFormat("%g %%", 100 * share); }

// "run-queue wait 4.1 ms per step (usual 0.2 ms)"
std::string MsFigure(const char* name, const Fig& f) {
  return absl::StrCat(name, " ", Ms(f.now), " per step (usual ", Ms(f.usual), ")");
}

std::string CountFigure(const char* name, const Fig& f) {
  return absl::StrCat(name, " ", Count(f.now), " per step (usual ", Count(f.usual), ")");
}

// The larger of a figure's usual and its peers' (either may be unknown: -1).
double Reference(double usual, double peers) { return std::max(usual, peers); }

std::string PeersNote(const Fig& f, double peers) {
  std::string s = absl::StrCat(" per step (usual ", f.usual >= 0 ? Ms(f.usual) : "unknown");
  if (peers >= 0) absl::StrAppend(&s, ", peers ", Ms(peers));
  return s + ")";
}

// One candidate cause as judged from its own evidence.
struct Candidate {
  CauseFinding finding;
  bool judged = false;     // its evidence was read
  std::string not_judged;  // ... and if not, why
  double spread = -1;      // its figure's usual spread (-1: unknown)
  bool clears = false;     // every bar cleared
};

std::string Reason(const std::string& missing, const char* fallback) {
  return missing.empty() ? std::string(fallback) : OutsideText(missing);
}

// A PSI "some" figure of the process's cgroup, else the node's: which one was used, in its name.
Fig PsiFigure(const SpanFigure& cgroup, const SpanFigure& node, const char** scope) {
  const Fig c = CleanFig(cgroup);
  if (c.Known()) {
    *scope = "cgroup";
    return c;
  }
  *scope = "node";
  return CleanFig(node);
}

struct GpuReason {
  std::string detail;  // "power cap", or "why unknown: ..."
  std::string support;
  const char* what = "";
};

const char* ReasonName(uint64_t bit) {
  switch (bit) {
    case kNvmlReasonHwPowerBrake:
      return "HW power brake";
    case kNvmlReasonHwThermal:
      return "HW thermal slowdown";
    case kNvmlReasonHwSlowdown:
      return "HW slowdown";
    case kNvmlReasonSwThermal:
      return "SW thermal slowdown";
    case kNvmlReasonSwPowerCap:
      return "SW power cap";
    case kNvmlReasonSyncBoost:
      return "sync boost";
    case kNvmlReasonAppClocks:
      return "application clocks";
    default:
      return "";
  }
}

// Most telling first: when several bits are set, the first one here is the GPU's reason.
constexpr uint64_t kReasonOrder[] = {
    kNvmlReasonHwPowerBrake, kNvmlReasonHwThermal, kNvmlReasonHwSlowdown, kNvmlReasonSwThermal,
    kNvmlReasonSwPowerCap,   kNvmlReasonSyncBoost, kNvmlReasonAppClocks};

// The share of `c`'s polls with reason bit `i` set; -1 when the counts are not figures.
double BitShare(const ReasonCounts& c, size_t i) {
  if (c.polls <= 0 || c.set[i] < 0 || c.set[i] > c.polls) return -1;
  return static_cast<double>(c.set[i]) / static_cast<double>(c.polls);
}

// The reason bits set in at least half of the late run's polls (given enough of them) are quoted
// into `support`; returns the one among them whose share rose most over its usual share (ties: the
// most telling, kReasonOrder), 0 when none. `minority`: the bits set in fewer than half.
uint64_t ReasonBits(const GpuState& g, const LateCauseParams& p, std::vector<std::string>* support,
                    uint64_t* minority) {
  *minority = 0;
  if (!g.reasons_known || g.reasons_now.polls < p.min_reason_polls) return 0;
  uint64_t best = 0;
  double best_rise = 0;
  std::vector<std::string> seen;
  for (uint64_t b : kReasonOrder) {
    size_t i = 0;
    while (((b >> i) & 1) == 0) ++i;
    const double now = BitShare(g.reasons_now, i);
    if (now > 0 && now < 0.5) *minority |= b;
    if (now < 0.5) continue;
    const double usual = std::max(0.0, BitShare(g.reasons_usual, i));
    seen.push_back(
        absl::StrCat(ReasonName(b), " ", Pct(now), " of polls (usual ", Pct(usual), ")"));
    if (best == 0 || now - usual > best_rise) {
      best = b;
      best_rise = now - usual;
    }
  }
  if (!seen.empty()) {
    support->push_back(absl::StrCat("clock event reasons: ", absl::StrJoin(seen, ", ")));
  }
  return best;
}

// Why the GPU is slower, from NVML only. `slowdown`: the kernels' excess over their reference, as
// a share of the reference (0.15: 15 % longer).
GpuReason JudgeGpuReason(const GpuState& g, double slowdown, const LateCauseParams& p) {
  GpuReason r;
  r.what =
      "compare its kernels with a peer's in a profile and check the GPU's health (nvidia-smi -q, "
      "XID events in the kernel log)";
  if (!g.known) {
    r.detail = absl::StrCat("why unknown: ", Reason(g.unknown_reason, "NVML not read"));
    return r;
  }
  std::vector<std::string> support;
  const Fig clock = CleanFig(g.sm_clock_mhz);
  const double max_clock = Clean(g.sm_clock_max_mhz);
  const double base = clock.usual > 0 ? clock.usual : max_clock;
  const bool clock_known = clock.now > 0 && base > 0;
  const bool clock_low = clock_known && base / clock.now - 1 >= p.clock_explains_share * slowdown;
  if (clock.now > 0) {
    std::string s = absl::StrFormat("SM clock %.0f MHz", clock.now);
    std::vector<std::string> ref;
    if (clock.usual > 0) ref.push_back(absl::StrFormat("usual %.0f MHz", clock.usual));
    if (max_clock > 0) ref.push_back(absl::StrFormat("max %.0f MHz", max_clock));
    if (!ref.empty()) absl::StrAppend(&s, " (", absl::StrJoin(ref, ", "), ")");
    support.push_back(s);
  }
  uint64_t minority = 0;
  const uint64_t bits = ReasonBits(g, p, &support, &minority);
  const double temp = Clean(g.temperature_c);
  if (temp >= 0) support.push_back(absl::StrFormat("temperature %.0f C", temp));
  const double power = Clean(g.power_w);
  const double limit = Clean(g.power_limit_w);
  if (power >= 0 && limit > 0) {
    support.push_back(absl::StrFormat("power %.0f W of %.0f W limit", power, limit));
  }
  const int64_t xids = CleanCount(g.new_xids);
  if (xids > 0) {
    support.push_back(absl::StrFormat("%d new XID%s (last %d)", xids, xids == 1 ? "" : "s",
                                      std::max<int64_t>(CleanCount(g.last_xid), 0)));
  }
  const int64_t ecc = CleanCount(g.new_uncorrected_ecc);
  if (ecc > 0) support.push_back(absl::StrFormat("%d new uncorrected ECC errors", ecc));
  const int64_t gen = CleanCount(g.pcie_gen), gen_max = CleanCount(g.pcie_gen_max);
  const int64_t width = CleanCount(g.pcie_width), width_max = CleanCount(g.pcie_width_max);
  if (gen > 0 && width > 0 && gen_max > 0 && width_max > 0 &&
      (gen < gen_max || width < width_max)) {
    support.push_back(
        absl::StrFormat("PCIe gen%d x%d (max gen%d x%d)", gen, width, gen_max, width_max));
  }
  const int64_t replays = CleanCount(g.pcie_replay_delta);
  if (replays > 0) support.push_back(absl::StrFormat("PCIe replays +%d", replays));
  r.support = absl::StrJoin(support, ", ");

  // A reason bit is the reason only when the clock fell with it (or the clock is not known): a bit
  // set while the clock holds its usual does not explain slower kernels.
  const uint64_t reason = !clock_known || clock_low ? bits : 0;
  switch (reason) {
    case kNvmlReasonSwPowerCap:
    case kNvmlReasonHwPowerBrake:
      r.detail = reason == kNvmlReasonSwPowerCap ? "power cap" : "HW power brake";
      r.what =
          "check the GPU's power limit (nvidia-smi -q -d POWER) against its peers' and the node's "
          "power supply and cooling";
      return r;
    case kNvmlReasonHwThermal:
    case kNvmlReasonSwThermal:
      r.detail = "thermal slowdown";
      r.what =
          "check the GPU's cooling (fans, airflow, inlet temperature) and drain the node if it "
          "stays hot";
      return r;
    case kNvmlReasonHwSlowdown:
      r.detail = "HW slowdown";
      r.what =
          "check the node's power supply and the GPU's health (nvidia-smi -q -d PERFORMANCE); "
          "drain the node if it persists";
      return r;
    case kNvmlReasonSyncBoost:
      r.detail = "sync boost";
      r.what =
          "its sync-boost group holds it to the group's slowest GPU: check the group's other GPUs";
      return r;
    case kNvmlReasonAppClocks:
      r.detail = "application clocks";
      r.what = "reset the GPU's application clocks (nvidia-smi -rac) or align them with its peers'";
      return r;
    default:
      break;
  }
  if (g.reasons_known && g.reasons_now.polls < p.min_reason_polls) {
    // The clock may fall for a reason its few samples did not show yet.
    r.detail = absl::StrFormat("why unknown: %d NVML polls so far",
                               std::max<int64_t>(g.reasons_now.polls, 0));
    return r;
  }
  if (clock_low && minority != 0) {
    // A reason seen now and then may be the one: the clock is not known to be held.
    r.detail =
        absl::StrCat("why unknown: ", NvmlReasonsText(minority), " in under half of the polls");
    return r;
  }
  if (clock_low) {
    r.detail = "clock held low";
    r.what = "check the GPU's clock locks and application clocks (nvidia-smi -q -d CLOCK)";
    return r;
  }
  if (!clock_known) {
    r.detail = "why unknown: NVML gave no clock figure";
  } else if (bits != 0) {
    r.detail =
        absl::StrCat("why unknown: the SM clock holds its usual despite ", NvmlReasonsText(bits));
  } else {
    r.detail = "why unknown: no clock event reason and the SM clock at its usual";
  }
  return r;
}

std::string WhatToDo(LateCause cause) {
  switch (cause) {
    case LateCause::kHostCpu:
      return "pin the ranks away from the noisy process or give the job whole cores; check the "
             "node's other jobs and the rank's thread count (OMP_NUM_THREADS, loader workers)";
    case LateCause::kCpuQuota:
      return "raise the container's CPU limit or lower the rank's loader and OpenMP threads so it "
             "fits its quota";
    case LateCause::kHostWait:
      return "profile the input pipeline and storage (data-loader workers, prefetch, checkpoint "
             "writes, host code between steps)";
    case LateCause::kMemoryPressure:
      return "give the container more memory or lower the host's use (loader workers, pinned "
             "buffers, the data set's page cache); check the node for swap and other jobs";
    case LateCause::kNetwork:
      return "check the NIC or link named (port counters, cable, switch port); drain the node if "
             "it "
             "persists";
    default:
      return "";
  }
}

struct Judged {
  Candidate gpu, quota, cpu, memory, wait;
  bool wait_unresolved = false;  // GPU idle grew but the run-queue wait was not read
  double wait_potential = 0;     // ... by this much
};

void JudgeGpu(const CauseEvidence& ev, const LateCauseParams& p, Candidate* c) {
  c->finding.cause = LateCause::kGpuSlower;
  const Fig f = CleanFig(ev.compute_ms);
  const double peers = Clean(ev.peer_compute_ms);
  const double ref = Reference(f.usual, peers);
  if (f.now < 0 || ref < 0) {
    c->not_judged = absl::StrCat("GPU not judged: ", Reason(ev.missing.cupti, "no kernel times"));
    return;
  }
  c->judged = true;
  c->finding.excess_ms = f.now - ref;
  c->spread = f.spread;
  c->finding.figures = absl::StrCat("compute kernels ", Ms(f.now), PeersNote(f, peers));
  const GpuReason why = JudgeGpuReason(ev.gpu, ref > 0 ? c->finding.excess_ms / ref : 0, p);
  c->finding.detail = why.detail;
  c->finding.support = why.support;
}

void JudgeHost(const CauseEvidence& ev, Judged* j) {
  const Fig throttled = CleanFig(ev.throttled_ms);
  j->quota.finding.cause = LateCause::kCpuQuota;
  if (throttled.Known()) {
    j->quota.judged = true;
    j->quota.finding.excess_ms = throttled.Excess();
    j->quota.spread = throttled.spread;
    j->quota.finding.figures = MsFigure("throttled", throttled);
    const double quota = Clean(ev.cpu_quota_cpus);
    if (quota > 0) j->quota.finding.support = absl::StrFormat("quota %.2g CPUs", quota);
  } else {
    j->quota.not_judged =
        absl::StrCat("CPU quota not judged: ", Reason(ev.missing.cgroup, "no cpu.stat"));
  }

  const Fig runq = CleanFig(ev.runq_wait_ms);
  j->cpu.finding.cause = LateCause::kHostCpu;
  if (runq.Known()) {
    j->cpu.judged = true;
    // A throttled thread waits in its run queue: the run-queue wait beyond the throttled time is
    // what other processes took.
    j->cpu.finding.excess_ms = runq.Excess() - std::max(0.0, j->quota.finding.excess_ms);
    j->cpu.spread = runq.spread;
    j->cpu.finding.figures = MsFigure("run-queue wait", runq);
    std::vector<std::string> support;
    const Fig invol = CleanFig(ev.invol_switches);
    if (invol.Known()) support.push_back(CountFigure("involuntary switches", invol));
    const char* scope = "";
    const Fig psi = PsiFigure(ev.cgroup_cpu_some_ms, ev.node_cpu_some_ms, &scope);
    if (psi.Known()) {
      support.push_back(MsFigure(absl::StrCat(scope, " cpu stall").c_str(), psi));
    }
    j->cpu.finding.support = absl::StrJoin(support, ", ");
  } else {
    j->cpu.not_judged =
        absl::StrCat("host CPU not judged: ", Reason(ev.missing.proc, "no run-queue wait"));
  }

  const char* scope = "";
  const Fig mem = PsiFigure(ev.cgroup_memory_some_ms, ev.node_memory_some_ms, &scope);
  j->memory.finding.cause = LateCause::kMemoryPressure;
  if (mem.Known()) {
    j->memory.judged = true;
    j->memory.finding.excess_ms = mem.Excess();
    j->memory.spread = mem.spread;
    j->memory.finding.figures = MsFigure(absl::StrCat(scope, " memory stall").c_str(), mem);
    const Fig faults = CleanFig(ev.major_faults);
    if (faults.Known()) j->memory.finding.support = CountFigure("major faults", faults);
  } else {
    const std::string& why = !ev.missing.cgroup.empty() ? ev.missing.cgroup : ev.missing.node_psi;
    j->memory.not_judged =
        absl::StrCat("memory pressure not judged: ", Reason(why, "no memory.pressure"));
  }
}

// The GPU idle before the collective beyond its usual and its peers', less what the host's own
// waits (run queue, throttling, memory stalls) explain: the rest is the host's own work or sleep.
void JudgeHostWait(const CauseEvidence& ev, Judged* j) {
  Candidate* c = &j->wait;
  c->finding.cause = LateCause::kHostWait;
  const Fig idle = CleanFig(ev.gpu_idle_ms);
  const double peers = Clean(ev.peer_gpu_idle_ms);
  const double ref = Reference(idle.usual, peers);
  if (idle.now < 0 || ref < 0) {
    c->not_judged =
        absl::StrCat("host wait not judged: ", Reason(ev.missing.cupti, "no GPU idle times"));
    return;
  }
  const double idle_excess = idle.now - ref;
  if (!j->cpu.judged) {
    j->wait_unresolved = true;
    j->wait_potential = idle_excess;
    c->not_judged = absl::StrCat("host wait not judged: the run-queue wait was not read (",
                                 Reason(ev.missing.proc, "no schedstat"), ")");
    return;
  }
  c->judged = true;
  const Fig runq = CleanFig(ev.runq_wait_ms);
  double host_waits = runq.Excess();
  if (j->quota.judged) host_waits = std::max(host_waits, j->quota.finding.excess_ms);
  if (j->memory.judged) host_waits = std::max(host_waits, j->memory.finding.excess_ms);
  c->finding.excess_ms = idle_excess - std::max(0.0, host_waits);
  c->spread = idle.spread;
  c->finding.figures =
      absl::StrCat("GPU idle before the collective ", Ms(idle.now), PeersNote(idle, peers));
  std::vector<std::string> support;
  support.push_back(absl::StrCat("run-queue wait ", Ms(runq.now), " (usual ", Ms(runq.usual), ")"));
  const char* scope = "";
  const Fig io = PsiFigure(ev.cgroup_io_some_ms, ev.node_io_some_ms, &scope);
  c->finding.detail = "input pipeline or host code";
  if (io.Known()) {
    support.push_back(MsFigure(absl::StrCat(scope, " io stall").c_str(), io));
    if (io.Excess() >= 0.5 * c->finding.excess_ms) c->finding.detail = "storage (io pressure)";
  }
  c->finding.support = absl::StrJoin(support, ", ");
}

bool Clears(const Candidate& c, double late, double step, const LateCauseParams& p) {
  const double excess = c.finding.excess_ms;
  return c.judged && excess > 0 && excess >= p.min_explained_share * late &&
         excess >= p.noise_floor_share * step &&
         (c.spread < 0 || excess >= p.spread_factor * c.spread);
}

// Why the best candidate below the bars was not named.
std::string BelowTheBars(const Candidate& c, double late, double step, const LateCauseParams& p) {
  const std::string what =
      absl::StrCat(c.finding.figures, ": +", Ms(std::max(0.0, c.finding.excess_ms)));
  if (c.finding.excess_ms < p.min_explained_share * late) {
    return absl::StrCat("largest: ", what, ", ", Pct(std::max(0.0, c.finding.excess_ms) / late));
  }
  if (c.finding.excess_ms < p.noise_floor_share * step) {
    return absl::StrCat("largest: ", what, ", under the noise floor of ",
                        BarPct(p.noise_floor_share), " of the ", Ms(step), " step");
  }
  return absl::StrCat("largest: ", what, ", within its usual spread of ", Ms(c.spread));
}

CauseVerdict Unknown(double late, std::string reason) {
  CauseVerdict v;
  v.late_ms = late;
  v.unknown_reason = std::move(reason);
  return v;
}

CauseVerdict Judge(const CauseEvidence& ev, const LateCauseParams& p) {
  double late = Clean(ev.late_ms);
  const double late_usual = Clean(ev.late_usual_ms);
  if (late >= 0 && late_usual >= 0) late = std::max(0.0, late - late_usual);
  const double step = Clean(ev.step_ms);
  if (late < 0 || step <= 0) return Unknown(-1, "the lateness per step was not measured");
  if (ev.steps < p.min_steps) {
    return Unknown(late, absl::StrFormat("only %d steps in the late span: too few to judge",
                                         std::max<int64_t>(ev.steps, 0)));
  }
  if (late <= 0 || late < p.min_late_share * step) {
    return Unknown(late, absl::StrCat(Ms(late), " late per step is within noise (under ",
                                      BarPct(p.min_late_share), " of the ", Ms(step), " step)"));
  }

  Judged j;
  JudgeGpu(ev, p, &j.gpu);
  JudgeHost(ev, &j);
  JudgeHostWait(ev, &j);
  std::vector<Candidate*> all = {&j.gpu, &j.quota, &j.cpu, &j.memory, &j.wait};
  std::vector<Candidate*> cleared;
  std::vector<std::string> not_judged;
  for (Candidate* c : all) {
    c->finding.share = c->judged ? std::clamp(c->finding.excess_ms / late, 0.0, 1.0) : 0;
    c->clears = Clears(*c, late, step, p);
    if (c->clears) cleared.push_back(c);
    if (!c->judged) not_judged.push_back(c->not_judged);
  }
  // Most explained first; ties keep the order above (the GPU before the host's causes).
  std::stable_sort(cleared.begin(), cleared.end(), [](const Candidate* a, const Candidate* b) {
    return a->finding.excess_ms > b->finding.excess_ms;
  });

  const double floor = std::max(p.min_explained_share * late, p.noise_floor_share * step);
  if (j.wait_unresolved && j.wait_potential >= floor &&
      (cleared.empty() || j.wait_potential > cleared.front()->finding.excess_ms)) {
    return Unknown(late, absl::StrCat("the GPU idled ", Ms(j.wait_potential),
                                      " per step more before its collective but the run-queue "
                                      "wait was not read (",
                                      Reason(ev.missing.proc, "no schedstat"),
                                      "): waiting for the host and host CPU contention cannot be "
                                      "told apart"));
  }

  CauseVerdict v;
  v.late_ms = late;
  v.not_judged = absl::StrJoin(not_judged, "; ");
  if (!cleared.empty()) {
    v.named = cleared.front()->finding;
    if (cleared.size() > 1) v.also = cleared[1]->finding;
    if (v.named.cause == LateCause::kGpuSlower) {
      const double ref = Reference(Clean(ev.compute_ms.usual), Clean(ev.peer_compute_ms));
      v.what_to_do = JudgeGpuReason(ev.gpu, ref > 0 ? v.named.excess_ms / ref : 0, p).what;
    } else {
      v.what_to_do = WhatToDo(v.named.cause);
    }
    if (ev.network_named && v.also.cause == LateCause::kUnknown) {
      v.also.cause = LateCause::kNetwork;
      v.also.figures = OutsideText(ev.network_text);
    }
    return v;
  }
  if (ev.network_named) {
    v.named.cause = LateCause::kNetwork;
    v.named.figures = OutsideText(ev.network_text);
    v.what_to_do = WhatToDo(LateCause::kNetwork);
    return v;
  }

  const Candidate* best = nullptr;
  for (const Candidate* c : all) {
    if (c->judged && (best == nullptr || c->finding.excess_ms > best->finding.excess_ms)) best = c;
  }
  if (best == nullptr) {
    return Unknown(late, absl::StrCat("nothing could be judged: ", v.not_judged));
  }
  std::string reason =
      absl::StrCat("no evidence explains ", BarPct(p.min_explained_share), " or more of the ",
                   Ms(late), " late per step (", BelowTheBars(*best, late, step, p), ")");
  if (!v.not_judged.empty()) absl::StrAppend(&reason, "; ", v.not_judged);
  v.unknown_reason = std::move(reason);
  v.not_judged.clear();
  return v;
}

std::string Sentence(const CauseVerdict& v) {
  const CauseFinding& n = v.named;
  if (n.cause == LateCause::kUnknown) return absl::StrCat("cause: unknown: ", v.unknown_reason);
  std::string s = absl::StrCat("cause: ", LateCauseTitle(n.cause));
  if (!n.detail.empty()) absl::StrAppend(&s, " (", n.detail, ")");
  if (n.cause == LateCause::kNetwork) {
    absl::StrAppend(&s, ": ", n.figures, "; no host or GPU figure explains the ", Ms(v.late_ms),
                    " late per step");
  } else {
    absl::StrAppend(&s, ": ", n.figures, " explains ", Pct(n.share), " of ", Ms(v.late_ms),
                    " late per step");
    if (!n.support.empty()) absl::StrAppend(&s, " (", n.support, ")");
  }
  if (v.also.cause != LateCause::kUnknown) {
    absl::StrAppend(&s, "; also ", LateCauseTitle(v.also.cause));
    if (!v.also.detail.empty()) absl::StrAppend(&s, " (", v.also.detail, ")");
    absl::StrAppend(&s, ": ", v.also.figures);
    if (v.also.cause != LateCause::kNetwork) absl::StrAppend(&s, ", ", Pct(v.also.share));
  }
  if (!v.not_judged.empty()) absl::StrAppend(&s, "; ", v.not_judged);
  absl::StrAppend(&s, "; what to do: ", v.what_to_do);
  return s;
}

}  // namespace
}  // namespace late_cause_internal

const char* LateCauseName(LateCause cause) {
  switch (cause) {
    case LateCause::kGpuSlower:
      return "gpu_slower";
    case LateCause::kHostCpu:
      return "host_cpu";
    case LateCause::kCpuQuota:
      return "cpu_quota";
    case LateCause::kHostWait:
      return "host_wait";
    case LateCause::kMemoryPressure:
      return "memory_pressure";
    case LateCause::kNetwork:
      return "network";
    case LateCause::kUnknown:
      break;
  }
  return "unknown";
}

const char* LateCauseTitle(LateCause cause) {
  switch (cause) {
    case LateCause::kGpuSlower:
      return "GPU slower";
    case LateCause::kHostCpu:
      return "host CPU contention";
    case LateCause::kCpuQuota:
      return "CPU quota throttling";
    case LateCause::kHostWait:
      return "GPU waiting for the host";
    case LateCause::kMemoryPressure:
      return "memory pressure";
    case LateCause::kNetwork:
      return "network";
    case LateCause::kUnknown:
      break;
  }
  return "unknown";
}

std::string NvmlReasonsText(uint64_t reasons) {
  std::vector<std::string> names;
  for (uint64_t b : late_cause_internal::kReasonOrder) {
    if ((reasons & b) != 0) names.emplace_back(late_cause_internal::ReasonName(b));
  }
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

CauseVerdict JudgeLateCause(const CauseEvidence& ev, const LateCauseParams& params) {
  return late_cause_internal::Judge(ev, params);
}

std::string CauseSentence(const CauseVerdict& verdict) {
  return late_cause_internal::Sentence(verdict);
}

}  // namespace sentinel::collector
