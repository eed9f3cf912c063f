// GPU activity figures (see gpu_activity.h).
#include "collector/aggregate/gpu_activity.h"

#include <algorithm>
#include <cstdint>

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/ring_resize.h"

namespace sentinel::collector {
namespace {

constexpr int64_t kHourNs = 3600LL * 1000 * 1000 * 1000;

// end - start when it fits in int64 (timestamps come off the wire: anything is possible).
bool Span(int64_t start, int64_t end, int64_t* len) {
  return !__builtin_sub_overflow(end, start, len);
}

nlohmann::json Num(bool ok, double v) { return ok ? nlohmann::json(v) : nlohmann::json(); }

GpuFigures FromSums(int64_t len, int64_t compute, int64_t nccl, int64_t overlap, int64_t memcpy,
                    int64_t idle) {
  GpuFigures f;
  f.valid = true;
  f.measured = true;
  f.length_ns = len;
  if (len <= 0) return f;
  const double l = static_cast<double>(len);
  f.compute_ratio = static_cast<double>(compute) / l;
  f.comm_ratio = static_cast<double>(nccl) / l;
  f.overlap_ratio = nccl > 0 ? static_cast<double>(overlap) / static_cast<double>(nccl) : -1;
  f.exposed_comm_ratio = static_cast<double>(nccl - overlap) / l;
  f.memcpy_ratio = static_cast<double>(memcpy) / l;
  f.idle_ratio = static_cast<double>(idle) / l;
  return f;
}

nlohmann::json FiguresJson(const GpuFigures& f) {
  const bool m = f.valid && f.measured;
  return {{"compute_ratio", Num(m, f.compute_ratio)},
          {"comm_ratio", Num(m, f.comm_ratio)},
          {"overlap_ratio", Num(m && f.overlap_ratio >= 0, f.overlap_ratio)},
          {"exposed_comm_ratio", Num(m, f.exposed_comm_ratio)},
          {"memcpy_ratio", Num(m, f.memcpy_ratio)},
          {"idle_ratio", Num(m, f.idle_ratio)}};
}

}  // namespace

bool ValidGpuWindow(const SentinelWireGpuWindow& w) {
  int64_t len = 0;
  if (!Span(w.start_ns, w.end_ns, &len) || len <= 0 || len > kHourNs) return false;
  for (int64_t v : {w.compute_ns, w.nccl_ns, w.idle_ns, w.memcpy_ns}) {
    if (v < 0 || v > len) return false;
  }
  if (w.overlap_ns < 0 || w.overlap_ns > w.compute_ns || w.overlap_ns > w.nccl_ns) return false;
  int64_t step_len = 0;
  if (w.steps > 0 && (!Span(w.step_start_ns, w.step_end_ns, &step_len) || step_len < 0 ||
                      w.step_compute_ns < 0 || w.step_exposed_comm_ns < 0 || w.step_idle_ns < 0)) {
    return false;
  }
  return true;
}

void ShrinkGpuActivity(GpuActivity* g) {
  ResizeRing(&g->windows, g->windows.size());
  ResizeRing(&g->attributions, g->attributions.size());
  ResizeRing(&g->clock_disagreement, g->clock_disagreement.size());
}

bool IngestGpuWindow(GpuActivity* g, const SentinelWireGpuWindow& w) {
  if (!ValidGpuWindow(w)) {
    ++g->invalid_total;
    return false;
  }
  g->windows.Push(w);
  ++g->windows_total;
  if (w.status != 0) ++g->not_measured_total;
  g->records_dropped_total += w.records_dropped;
  g->records_late_total += w.records_late;
  if (w.steps > 0) {
    g->has_step = true;
    g->last_step = w;
  }
  return true;
}

void IngestAttribution(GpuActivity* g, const SentinelWireKernelAttribution& a,
                       const std::vector<AttributionCandidate>& candidates) {
  int64_t kernel_len = 0;
  if (!Span(a.start_ns, a.end_ns, &kernel_len) || kernel_len <= 0 || kernel_len > kHourNs ||
      a.overlap_ns < 0 || a.overlap_ns > kernel_len) {
    ++g->invalid_total;
    return;
  }
  KernelAttributionSample s;
  s.kernel = a;
  int64_t best = 0;
  for (const AttributionCandidate& c : candidates) {
    const RankSample& r = *c.sample;
    int64_t r_end = 0;
    if (r.duration_ns < 0 || __builtin_add_overflow(r.arrival_ns, r.duration_ns, &r_end)) continue;
    const int64_t lo = std::max(a.start_ns, r.arrival_ns);
    const int64_t hi = std::min(a.end_ns, r_end);
    // hi > lo: both lie inside the kernel's span, so hi - lo fits.
    if (hi > lo && hi - lo > best) {
      best = hi - lo;
      s.comm_hash = c.comm_hash;
      s.seq = r.seq;
      s.func = r.func;
      s.rank = c.rank;
      int64_t disagreement = 0;  // the arrival precedes hi <= a.end_ns: only underflow is possible
      s.kernelch_minus_cupti_ns = __builtin_sub_overflow(r.arrival_ns, a.start_ns, &disagreement)
                                      ? INT64_MIN
                                      : disagreement;
    }
  }
  ++g->attributions_total;
  if (s.comm_hash != 0) {
    ++g->attributions_matched;
    g->clock_disagreement.Push(s.kernelch_minus_cupti_ns);
  }
  g->attributions.Push(s);
}

GpuFigures LatestGpuFigures(const GpuActivity& g) {
  GpuFigures f;
  if (g.windows.size() == 0) return f;
  const SentinelWireGpuWindow& w = g.windows.Newest();
  if (w.status != 0) {
    f.valid = true;
    f.status = w.status;
    f.length_ns = w.end_ns - w.start_ns;
    return f;
  }
  return FromSums(w.end_ns - w.start_ns, w.compute_ns, w.nccl_ns, w.overlap_ns, w.memcpy_ns,
                  w.idle_ns);
}

GpuFigures GpuFiguresSince(const GpuActivity& g, int64_t since_ns) {
  int64_t len = 0, compute = 0, nccl = 0, overlap = 0, memcpy = 0, idle = 0;
  bool any = false;
  uint32_t status = 0;
  for (size_t i = 0; i < g.windows.size(); ++i) {
    const SentinelWireGpuWindow& w = g.windows[i];
    if (w.end_ns < since_ns) continue;
    any = true;
    if (w.status != 0) {
      status |= w.status;
      continue;
    }
    len += w.end_ns - w.start_ns;
    compute += w.compute_ns;
    nccl += w.nccl_ns;
    overlap += w.overlap_ns;
    memcpy += w.memcpy_ns;
    idle += w.idle_ns;
  }
  GpuFigures f;
  if (!any) return f;
  if (len == 0) {
    f.valid = true;
    f.status = status;
    return f;
  }
  f = FromSums(len, compute, nccl, overlap, memcpy, idle);
  f.status = status;
  return f;
}

bool ClockDisagreementNs(const GpuActivity& g, int64_t* out) {
  if (g.clock_disagreement.size() == 0) return false;
  std::vector<int64_t> v;
  for (size_t i = 0; i < g.clock_disagreement.size(); ++i) v.push_back(g.clock_disagreement[i]);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  *out = v[v.size() / 2];
  return true;
}

nlohmann::json GpuStatusJson(uint32_t status) {
  nlohmann::json out = nlohmann::json::array();
  if (status & kSentinelGpuWindowForeignOwner) out.push_back("foreign_owner");
  if (status & kSentinelGpuWindowForeignClock) out.push_back("foreign_clock");
  if (status & kSentinelGpuWindowOff) out.push_back("off");
  return out;
}

GpuRankInput GpuRankInputOf(const GpuActivity& g) {
  GpuRankInput in;
  in.latest = LatestGpuFigures(g);
  in.windows_total = g.windows_total;
  in.not_measured_total = g.not_measured_total;
  in.records_dropped_total = g.records_dropped_total;
  in.records_late_total = g.records_late_total;
  in.has_step = g.has_step;
  in.last_step = g.last_step;
  in.has_clock_offset = g.windows.size() > 0;
  if (in.has_clock_offset) in.clock_offset_ns = g.windows.Newest().clock_offset_ns;
  in.has_clock_disagreement = ClockDisagreementNs(g, &in.clock_disagreement_ns);
  in.attributions_total = g.attributions_total;
  in.attributions_matched = g.attributions_matched;
  return in;
}

nlohmann::json GpuRankJson(const GpuRankInput& g) {
  const GpuFigures& f = g.latest;
  nlohmann::json out = FiguresJson(f);
  out["measured"] = f.valid && f.measured;
  out["not_measured_reasons"] = GpuStatusJson(f.status);
  out["window_s"] = Num(f.valid, static_cast<double>(f.length_ns) / 1e9);
  out["windows"] = g.windows_total;
  out["windows_not_measured"] = g.not_measured_total;
  out["records_dropped"] = g.records_dropped_total;
  out["records_late"] = g.records_late_total;
  if (g.has_step && g.last_step.status == 0) {
    const SentinelWireGpuWindow& s = g.last_step;
    const double len = static_cast<double>(s.step_end_ns - s.step_start_ns);
    out["step"] = {{"duration_ms", len / 1e6},
                   {"compute_ms", static_cast<double>(s.step_compute_ns) / 1e6},
                   {"exposed_comm_ms", static_cast<double>(s.step_exposed_comm_ns) / 1e6},
                   {"idle_ms", static_cast<double>(s.step_idle_ns) / 1e6}};
  } else {
    out["step"] = nullptr;
  }
  out["cupti_clock_offset_ns"] =
      g.has_clock_offset ? nlohmann::json(g.clock_offset_ns) : nlohmann::json();
  out["kernelch_minus_cupti_ns"] =
      g.has_clock_disagreement ? nlohmann::json(g.clock_disagreement_ns) : nlohmann::json();
  out["kernels_attributed"] = g.attributions_total;
  out["kernels_matched"] = g.attributions_matched;
  return out;
}

ExposedCommOutlier EvaluateExposedComm(uint32_t pid,
                                       const std::vector<std::pair<uint32_t, double>>& ratios) {
  ExposedCommOutlier o;
  std::vector<double> peers;
  bool found = false;
  for (const auto& [p, r] : ratios) {
    if (p == pid) {
      o.ratio = r;
      found = true;
    } else {
      peers.push_back(r);
    }
  }
  if (!found || peers.size() < 2) return o;
  std::sort(peers.begin(), peers.end());
  const size_t n = peers.size();
  o.peer_median = n % 2 == 1 ? peers[n / 2] : (peers[n / 2 - 1] + peers[n / 2]) / 2;
  o.far_above = o.ratio >= std::max(2 * o.peer_median, o.peer_median + 0.10);
  return o;
}

nlohmann::json ExposedCommEvidenceJson(uint32_t pid,
                                       const std::vector<std::pair<uint32_t, double>>& ratios) {
  bool found = false;
  for (const auto& pr : ratios) found = found || pr.first == pid;
  if (!found) return nullptr;
  const ExposedCommOutlier o = EvaluateExposedComm(pid, ratios);
  return {
      {"exposed_comm_ratio", o.ratio}, {"peer_median", o.peer_median}, {"far_above", o.far_above}};
}

GpuPrometheusInput GpuPrometheusInputOf(const GpuActivity& g) {
  GpuPrometheusInput in;
  in.windows_total = g.windows_total;
  if (g.windows_total == 0) return in;  // nothing of it is rendered
  in.latest = LatestGpuFigures(g);
  in.has_step = g.has_step;
  in.last_step = g.last_step;
  in.not_measured_total = g.not_measured_total;
  in.records_dropped_total = g.records_dropped_total;
  in.has_clock_disagreement = ClockDisagreementNs(g, &in.clock_disagreement_ns);
  return in;
}

GpuTelemetryInput GpuTelemetryInputOf(const GpuActivity& g, int64_t since_ns) {
  return {GpuFiguresSince(g, since_ns), g.records_dropped_total};
}

nlohmann::json GpuTelemetryJson(const std::vector<GpuTelemetryInput>& processes) {
  int64_t len = 0;
  double compute = 0, comm = 0, exposed = 0, idle = 0, overlap_num = 0, overlap_den = 0;
  double exposed_max = -1;
  int measured = 0, not_measured = 0;
  uint64_t dropped = 0;
  for (const GpuTelemetryInput& g : processes) {
    const GpuFigures& f = g.since;
    if (!f.valid) continue;
    dropped += g.records_dropped_total;
    if (!f.measured) {
      ++not_measured;
      continue;
    }
    ++measured;
    const double l = static_cast<double>(f.length_ns);
    len += f.length_ns;
    compute += f.compute_ratio * l;
    comm += f.comm_ratio * l;
    exposed += f.exposed_comm_ratio * l;
    idle += f.idle_ratio * l;
    if (f.overlap_ratio >= 0) {
      overlap_num += f.overlap_ratio * f.comm_ratio * l;
      overlap_den += f.comm_ratio * l;
    }
    exposed_max = std::max(exposed_max, f.exposed_comm_ratio);
  }
  const bool m = len > 0;
  const double l = static_cast<double>(len);
  return {{"ranks_measured", measured},
          {"ranks_not_measured", not_measured},
          {"compute_ratio", Num(m, m ? compute / l : 0)},
          {"comm_ratio", Num(m, m ? comm / l : 0)},
          {"overlap_ratio", Num(overlap_den > 0, overlap_den > 0 ? overlap_num / overlap_den : 0)},
          {"exposed_comm_ratio", Num(m, m ? exposed / l : 0)},
          {"exposed_comm_ratio_max", Num(exposed_max >= 0, exposed_max)},
          {"idle_ratio", Num(m, m ? idle / l : 0)},
          {"records_dropped", dropped}};
}

std::vector<std::pair<uint32_t, double>> ExposedCommRatios(const State& state, int64_t since_ns) {
  std::vector<std::pair<uint32_t, double>> out;
  for (const auto& [client, p] : state.processes) {
    if (!p->connected) continue;
    const GpuFigures f = GpuFiguresSince(p->gpu, since_ns);
    if (f.valid && f.measured) out.emplace_back(p->pid, f.exposed_comm_ratio);
  }
  return out;
}

nlohmann::json ExposedCommEvidence(const State& state, uint32_t pid, int64_t since_ns) {
  return ExposedCommEvidenceJson(pid, ExposedCommRatios(state, since_ns));
}

}  // namespace sentinel::collector
