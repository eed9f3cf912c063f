// The per-process /metrics families, the plugin's own figures and its CUPTI GPU activity
// (aggregate/gpu_activity.h): see prometheus_families.h.
#include <utility>

#include "absl/strings/str_cat.h"

#include "collector/export/prometheus_families.h"
#include "collector/export/prometheus_family.h"

namespace sentinel::collector {
namespace {

std::string ProcessRankLabel(const MetricsSnapshot::Process& p) {
  return PromLabels({{"rank", absl::StrCat(p.rank)}, {"uid", absl::StrCat(p.uid)}});
}

void AppendPluginDropped(const MetricsRows& rows, std::string* out) {
  PromFamily f(out, "sentinel_plugin_dropped_total", PromType::kCounter,
               "Records or events the plugin dropped, by reason (from heartbeats).");
  for (const MetricsSnapshot::Process* p : rows.processes) {
    if (!p->has_heartbeat) continue;
    const std::string rank = absl::StrCat(p->rank);
    const std::pair<const char*, uint64_t> reasons[] = {
        {"ring", p->heartbeat.records_dropped_ring},
        {"pool", p->heartbeat.events_dropped_pool},
        {"threads", p->heartbeat.events_dropped_threads},
        {"sink", p->heartbeat.records_dropped_sink}};
    for (const auto& [reason, n] : reasons) {
      f.Add(PromLabels({{"rank", rank}, {"uid", absl::StrCat(p->uid)}, {"reason", reason}}),
            static_cast<double>(n));
    }
  }
}

// The latest window's ratios; only a measured window has them.
void AppendGpuRatios(const MetricsRows& rows, std::string* out) {
  struct Ratio {
    const char* name;
    const char* help;
    double GpuFigures::*value;
  };
  static constexpr Ratio kRatios[] = {
      {"sentinel_gpu_compute_ratio",
       "Share of the last GPU window with a compute (non-NCCL) kernel running.",
       &GpuFigures::compute_ratio},
      {"sentinel_gpu_comm_ratio", "Share of the last GPU window with an NCCL kernel running.",
       &GpuFigures::comm_ratio},
      {"sentinel_gpu_exposed_comm_ratio",
       "Share of the last GPU window with NCCL running and no compute (exposed communication).",
       &GpuFigures::exposed_comm_ratio},
      {"sentinel_gpu_memcpy_ratio", "Share of the last GPU window in memcpy/memset.",
       &GpuFigures::memcpy_ratio},
      {"sentinel_gpu_idle_ratio", "Share of the last GPU window with nothing running.",
       &GpuFigures::idle_ratio},
  };
  for (const Ratio& ratio : kRatios) {
    PromFamily f(out, ratio.name, PromType::kGauge, ratio.help);
    for (const MetricsSnapshot::Process* p : rows.processes) {
      const GpuPrometheusInput& g = p->gpu;
      if (g.windows_total == 0 || !g.latest.measured) continue;
      f.Add(ProcessRankLabel(*p), g.latest.*ratio.value);
    }
  }
}

// The last step's split, from the newest window that carried a step (measured only).
void AppendGpuStep(const MetricsRows& rows, std::string* out) {
  PromFamily f(out, "sentinel_gpu_step_seconds", PromType::kGauge,
               "The last step's split (part=compute|exposed_comm|idle|total).");
  for (const MetricsSnapshot::Process* p : rows.processes) {
    const GpuPrometheusInput& g = p->gpu;
    if (g.windows_total == 0 || !g.has_step || g.last_step.status != 0) continue;
    const SentinelWireGpuWindow& s = g.last_step;
    const std::string rank = absl::StrCat(p->rank);
    const std::pair<const char*, int64_t> parts[] = {{"compute", s.step_compute_ns},
                                                     {"exposed_comm", s.step_exposed_comm_ns},
                                                     {"idle", s.step_idle_ns},
                                                     {"total", s.step_end_ns - s.step_start_ns}};
    for (const auto& [part, ns] : parts) {
      f.Add(PromLabels({{"rank", rank}, {"uid", absl::StrCat(p->uid)}, {"part", part}}),
            static_cast<double>(ns) / 1e9);
    }
  }
}

void AppendGpuHealth(const MetricsRows& rows, std::string* out) {
  PromFamily not_measured(
      out, "sentinel_gpu_windows_not_measured_total", PromType::kCounter,
      "GPU windows not measured (another tool owned CUPTI, or its clock was foreign).");
  for (const MetricsSnapshot::Process* p : rows.processes) {
    if (p->gpu.windows_total == 0) continue;
    not_measured.Add(ProcessRankLabel(*p), static_cast<double>(p->gpu.not_measured_total));
  }
  PromFamily dropped(out, "sentinel_gpu_records_dropped_total", PromType::kCounter,
                     "CUPTI activity records dropped or without timestamps.");
  for (const MetricsSnapshot::Process* p : rows.processes) {
    if (p->gpu.windows_total == 0) continue;
    dropped.Add(ProcessRankLabel(*p), static_cast<double>(p->gpu.records_dropped_total));
  }
  PromFamily disagreement(out, "sentinel_gpu_clock_disagreement_seconds", PromType::kGauge,
                          "Median KernelCh GPU start minus CUPTI start of matched NCCL kernels.");
  for (const MetricsSnapshot::Process* p : rows.processes) {
    if (p->gpu.windows_total == 0 || !p->gpu.has_clock_disagreement) continue;
    disagreement.Add(ProcessRankLabel(*p), static_cast<double>(p->gpu.clock_disagreement_ns) / 1e9);
  }
}

}  // namespace

void AppendProcessFamilies(const MetricsRows& rows, std::string* out) {
  AppendPluginDropped(rows, out);
  PromFamily overhead(out, "sentinel_plugin_overhead_ratio", PromType::kGauge,
                      "Time spent in the plugin's callbacks per wall-clock time.");
  for (const MetricsSnapshot::Process* p : rows.processes) {
    if (p->overhead_ratio >= 0) overhead.Add(ProcessRankLabel(*p), p->overhead_ratio);
  }
  // One series per process: which figures of this rank are thinned (wire_format.md: heartbeat
  // budget_level); at 2 and 3 its segment and duration p50s come from the sampled bursts only,
  // and are absent while those hold too few consecutive collectives ("not judged: sampled").
  PromFamily budget(out, "sentinel_plugin_budget_level", PromType::kGauge,
                    "The plugin's overhead-budget step: 0 full, 1 proxy events off, 2 KernelCh on "
                    "1 of 8 collectives, 3 records sampled 1 of 8 (both in bursts of 8 "
                    "consecutive).");
  for (const MetricsSnapshot::Process* p : rows.processes) {
    if (!p->has_heartbeat) continue;
    budget.Add(ProcessRankLabel(*p), static_cast<double>(p->heartbeat.budget_level));
  }
  PromFamily overlap(out, "sentinel_gpu_overlap_ratio", PromType::kGauge,
                     "Share of NCCL kernel time overlapped with compute in the last GPU window.");
  for (const MetricsSnapshot::Process* p : rows.processes) {
    if (!p->has_gpu_window || p->gpu_window.nccl_ns <= 0) continue;
    overlap.Add(ProcessRankLabel(*p), static_cast<double>(p->gpu_window.overlap_ns) /
                                          static_cast<double>(p->gpu_window.nccl_ns));
  }
}

// CUPTI GPU activity (aggregate/gpu_activity.h): a process with no window has no series.
void AppendGpuFamilies(const MetricsRows& rows, std::string* out) {
  AppendGpuRatios(rows, out);
  AppendGpuStep(rows, out);
  AppendGpuHealth(rows, out);
}

}  // namespace sentinel::collector
