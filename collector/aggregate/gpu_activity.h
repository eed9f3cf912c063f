// Per-process GPU activity from the plugin's CUPTI tracer: GpuWindow (type 4) and
// KernelAttribution (type 15) records, and every figure derived from them for the exporters
// (Prometheus, /v1/ranks, /v1/telemetry, the Perfetto trace, sentinelctl top) and for the
// straggler alert's evidence. Pure data + functions; the aggregator calls them under its lock.
//
// Figures of a window (all over its length L):
//   compute_ratio = compute / L, comm_ratio = nccl / L, idle_ratio = idle / L,
//   overlap_ratio = overlap / nccl (share of NCCL kernel time hidden under compute; null if no
//   NCCL time), exposed_comm_ratio = (nccl - overlap) / L.
// A window the plugin could not measure (status != 0) yields no figures (JSON null), never 0.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collector/aggregate/stats.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

struct RankSample;
struct State;

// One NCCL kernel as CUPTI saw it, matched (when possible) to the rank's collective record.
struct KernelAttributionSample {
  SentinelWireKernelAttribution kernel{};
  uint64_t comm_hash = 0;  // the matched collective; 0 = unmatched
  uint64_t seq = 0;
  uint8_t func = 0;
  int32_t rank = -1;
  // KernelCh GPU start (calibrated onto CLOCK_MONOTONIC by the plugin) minus CUPTI's start.
  int64_t kernelch_minus_cupti_ns = 0;
};

struct GpuActivity {
  Ring<SentinelWireGpuWindow> windows{300};  // newest last
  uint64_t windows_total = 0;
  uint64_t not_measured_total = 0;
  uint64_t records_dropped_total = 0;
  uint64_t records_late_total = 0;
  uint64_t invalid_total = 0;
  bool has_step = false;
  SentinelWireGpuWindow last_step{};  // the newest window that carried a step
  Ring<KernelAttributionSample> attributions{512};
  uint64_t attributions_total = 0;
  uint64_t attributions_matched = 0;
  Ring<int64_t> clock_disagreement{64};  // kernelch_minus_cupti_ns of matched kernels
};

struct GpuFigures {
  bool valid = false;     // a window exists
  bool measured = false;  // and it was measured
  uint32_t status = 0;
  int64_t length_ns = 0;
  double compute_ratio = 0;
  double comm_ratio = 0;
  double overlap_ratio = -1;  // -1: no NCCL time
  double exposed_comm_ratio = 0;
  double memcpy_ratio = 0;
  double idle_ratio = 0;
};

// A gone process's windows, moved into exactly the room they take (they stay for the API).
void ShrinkGpuActivity(GpuActivity* g);

// Sanity checks of an untrusted window (times ordered, figures within the window).
bool ValidGpuWindow(const SentinelWireGpuWindow& w);
// Returns false (and counts it) for an invalid window.
bool IngestGpuWindow(GpuActivity* g, const SentinelWireGpuWindow& w);
// Matches the kernel to the rank sample (one of `candidates`, each with its comm and rank) whose
// GPU span overlaps it most, and records it.
struct AttributionCandidate {
  const RankSample* sample;
  uint64_t comm_hash;
  int32_t rank;
};
void IngestAttribution(GpuActivity* g, const SentinelWireKernelAttribution& a,
                       const std::vector<AttributionCandidate>& candidates);

// The newest window's figures.
GpuFigures LatestGpuFigures(const GpuActivity& g);
// Time-weighted over the measured windows that ended at or after `since`; `measured` false when
// none was measured (but some existed).
GpuFigures GpuFiguresSince(const GpuActivity& g, int64_t since_ns);
// Median KernelCh-minus-CUPTI start offset of matched kernels; false when none.
bool ClockDisagreementNs(const GpuActivity& g, int64_t* out);

// "not measured" reasons of a status word, e.g. ["foreign_owner"].
nlohmann::json GpuStatusJson(uint32_t status);
// What the /v1/ranks "gpu" object reads of one process's GpuActivity: a few figures, copied under
// the aggregator's lock (api_snapshot.h) instead of the rings.
struct GpuRankInput {
  GpuFigures latest;  // LatestGpuFigures
  uint64_t windows_total = 0;
  uint64_t not_measured_total = 0;
  uint64_t records_dropped_total = 0;
  uint64_t records_late_total = 0;
  bool has_step = false;
  SentinelWireGpuWindow last_step{};
  bool has_clock_offset = false;  // a window exists: the newest one's clock_offset_ns
  int64_t clock_offset_ns = 0;
  bool has_clock_disagreement = false;  // ClockDisagreementNs
  int64_t clock_disagreement_ns = 0;
  uint64_t attributions_total = 0;
  uint64_t attributions_matched = 0;
};
GpuRankInput GpuRankInputOf(const GpuActivity& g);
// That object for one process (always an object; figures null when unknown).
nlohmann::json GpuRankJson(const GpuRankInput& g);

// Straggler evidence (for the straggler detector; see collector/README.md "GPU activity"):
// the exposed-communication ratio of each process over the window, and whether one is far above
// its peers'. `ratios` holds one (pid, exposed_comm_ratio) per measured process.
struct ExposedCommOutlier {
  bool far_above = false;
  double ratio = 0;        // this process's exposed_comm_ratio
  double peer_median = 0;  // the median of the others
};
// far_above = ratio >= max(2 x peer median, peer median + 0.10) with at least 2 peers measured.
ExposedCommOutlier EvaluateExposedComm(uint32_t pid,
                                       const std::vector<std::pair<uint32_t, double>>& ratios);
// The evidence object to attach to an alert: {"exposed_comm_ratio", "peer_median",
// "far_above"}; null when the process has no measured GPU window.
nlohmann::json ExposedCommEvidenceJson(uint32_t pid,
                                       const std::vector<std::pair<uint32_t, double>>& ratios);

// The accessor for the straggler detector: exposed_comm_ratio over the measured windows that
// ended at or after since_ns, one (pid, ratio) per connected process with such a window.
std::vector<std::pair<uint32_t, double>> ExposedCommRatios(const State& state, int64_t since_ns);
// ExposedCommEvidenceJson(pid, ExposedCommRatios(state, since_ns)).
nlohmann::json ExposedCommEvidence(const State& state, uint32_t pid, int64_t since_ns);

// What the Prometheus families read of one process's GpuActivity: a few figures, copied under the
// aggregator's lock (metrics_snapshot.h) instead of the ~80 KiB of rings.
struct GpuPrometheusInput {
  uint64_t windows_total = 0;
  GpuFigures latest;  // LatestGpuFigures
  bool has_step = false;
  SentinelWireGpuWindow last_step{};
  uint64_t not_measured_total = 0;
  uint64_t records_dropped_total = 0;
  bool has_clock_disagreement = false;  // ClockDisagreementNs
  int64_t clock_disagreement_ns = 0;
};
GpuPrometheusInput GpuPrometheusInputOf(const GpuActivity& g);
// What the /v1/telemetry "gpu" object reads of one process: its figures since the window start
// (GpuFiguresSince), computed under the aggregator's lock (api_snapshot.h), and its drop count.
struct GpuTelemetryInput {
  GpuFigures since;
  uint64_t records_dropped_total = 0;
};
GpuTelemetryInput GpuTelemetryInputOf(const GpuActivity& g, int64_t since_ns);
// That object: time-weighted over the measured windows of every process that ended at or after
// the window's start.
nlohmann::json GpuTelemetryJson(const std::vector<GpuTelemetryInput>& processes);

}  // namespace sentinel::collector
