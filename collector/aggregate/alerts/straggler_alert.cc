// See straggler_alert.h.
#include "collector/aggregate/alerts/straggler_alert.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "collector/aggregate/alerts/alert_key.h"

namespace sentinel::collector {

Alert StragglerAlert(const State& state, const CommState& comm, const RankState& rs, int func,
                     int bucket, const Config& config, int64_t now_mono_ns, int64_t now_real_ns) {
  const StragglerDetector& det = *comm.straggler;
  const StragglerRankState& st = *det.rank(rs.local_index);
  const bool structural = st.pattern == StragglerPattern::kStructural;
  // Recent lateness and clock-free lateness of the rank, for the summary.
  std::vector<int64_t> recent;
  std::vector<int64_t> recent_cf;
  for (size_t k = rs.history.size(); k > 0 && recent.size() < 64; --k) {
    const RankSample& h = rs.history[k - 1];
    if (h.lateness_ns >= 0) recent.push_back(h.lateness_ns);
    if (h.clock_free_ns >= 0) recent_cf.push_back(h.clock_free_ns);
  }
  const double p50_ms = static_cast<double>(Percentile(&recent, 50)) / 1e6;
  const double rel = det.RelativeExcess(rs.local_index);
  const double seg_ms = st.mean_segment_ns / 1e6;
  Alert a;
  a.id = AlertKey::Straggler(comm.hash, rs.rank).Id();
  a.kind = AlertKind::kStraggler;
  a.severity = structural ? AlertSeverity::kWarning : AlertSeverity::kCritical;
  a.comm = CommLabel(comm.hash);
  a.ranks = {rs.rank};
  a.host = state.host;
  a.source = rs.client;
  if (structural) {
    a.summary = absl::StrFormat(
        "rank %d on comm %s has been late since the communicator started: %.0f%% of its compute "
        "between collectives (%.2f ms per %.2f ms segment) behind the other local ranks "
        "(structural: e.g. a last pipeline stage, or a placement that is always slower)",
        rs.rank, a.comm, rel * 100, rel * seg_ms, seg_ms);
  } else {
    a.summary = absl::StrFormat(
        "rank %d on comm %s newly degraded: %.0f%% of its compute between collectives "
        "(%.2f ms per %.2f ms segment) behind the other local ranks, after being on time (look "
        "for a throttled GPU, a noisy neighbour or a degraded link)",
        rs.rank, a.comm, rel * 100, rel * seg_ms, seg_ms);
  }
  a.evidence = {{"pattern", StragglerPatternName(st.pattern)},
                {"relative_excess", rel},
                {"segment_ms", seg_ms},
                {"lateness_p50_ms", p50_ms},
                {"evidence_ms", st.g_ns / 1e6},
                {"threshold_ms", det.threshold_ns() / 1e6},
                {"noise_sd_ms", std::sqrt(det.noise_var()) / 1e6},
                {"min_relative_slowdown", config.straggler_rel},
                {"size_bucket", SizeBucketLabel(bucket)},
                {"func", FuncName(static_cast<uint8_t>(func))},
                {"first_late_seq", st.onset_seq},
                {"collectives_observed", st.judged},
                {"clock_free_lateness_p50_ms",
                 recent_cf.empty() ? 0.0 : static_cast<double>(Percentile(&recent_cf, 50)) / 1e6}};
  // CUPTI (gpu_activity.h): the rank's exposed communication against its peers' over the window;
  // null when the process has no measured GPU window.
  a.evidence["exposed_comm"] = ExposedCommEvidence(state, rs.pid, now_mono_ns - config.window_ns);
  a.runbook = absl::StrCat(config.runbook_base, "alert-straggler");
  a.started_real_ns = now_real_ns;
  return a;
}

}  // namespace sentinel::collector
