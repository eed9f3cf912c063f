// See straggler_alert.h.
#include "collector/aggregate/alerts/straggler_alert.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "collector/aggregate/alerts/alert_key.h"
#include "collector/aggregate/cause_evidence.h"
#include "collector/aggregate/straggler_text.h"

namespace sentinel::collector {

Alert StragglerAlert(const State& state, const CommState& comm, const RankState& rs, int func,
                     int bucket, const Config& config, int64_t now_mono_ns, int64_t now_real_ns) {
  const StragglerDetector& det = *comm.straggler;
  const StragglerRankState& st = *det.rank(rs.local_index);
  // The figures quoted are measured on the rank (straggler_text.h): its lateness p50 over its last
  // 64 collectives, the compute segment of the other local ranks over their recent window, and the
  // start of its late run ("since the communicator started" only when that is what the samples
  // show). The detector's own statistics stay in the evidence.
  std::vector<LateSample> samples;
  samples.reserve(rs.history.size());
  std::vector<int64_t> recent_cf;
  for (size_t k = 0; k < rs.history.size(); ++k) {
    const RankSample& h = rs.history[k];
    samples.push_back({h.seq, h.lateness_ns, -1});
  }
  for (size_t k = rs.history.size(); k > 0 && recent_cf.size() < 64; --k) {
    if (rs.history[k - 1].clock_free_ns >= 0) recent_cf.push_back(rs.history[k - 1].clock_free_ns);
  }
  std::vector<int64_t> segments;  // the other local ranks' recent segment p50s ...
  std::vector<int64_t> computes;  // ... and compute per collective (compute-weighted)
  if (comm.wait) {
    for (const RankState* m : comm.members) {
      if (m == &rs || !m->active) continue;
      const WaitRankState* w = comm.wait->rank(m->local_index);
      if (w != nullptr && w->recent_n > 0) {
        segments.push_back(static_cast<int64_t>(w->segment_p50_ns));
        computes.push_back(static_cast<int64_t>(w->segment_mean_ns));
      }
    }
  }
  const int64_t segment =
      segments.empty() ? static_cast<int64_t>(st.mean_segment_ns) : Percentile(&segments, 50);
  const double compute_per_coll =
      computes.empty() ? 0.0 : static_cast<double>(Percentile(&computes, 50));
  if (!samples.empty()) samples.back().segment_ns = segment;
  const bool complete = rs.history.size() < rs.history.capacity();
  const LateFigures f = MeasureLateness(samples, 64, complete, st.onset_seq, compute_per_coll);
  // Structural when the rank's late run began before the detector could have judged anything (the
  // warm-up and learning collectives from the start of its history): late from the start, as far as
  // the node can tell. Once the history has wrapped its start is gone, and the detector's own
  // judgement (late from its first judged collective) stands in.
  const uint64_t judged_from =
      samples.empty() ? 0
                      : samples.front().seq + static_cast<uint64_t>(config.straggler_warmup) +
                            static_cast<uint64_t>(config.straggler_learn);
  const bool structural = complete ? f.valid && (f.since_start || f.since_seq <= judged_from)
                                   : st.pattern == StragglerPattern::kStructural;
  const double rel = det.RelativeExcess(rs.local_index);
  Alert a;
  a.id = AlertKey::Straggler(comm.hash, rs.rank).Id();
  a.kind = AlertKind::kStraggler;
  a.severity = structural ? AlertSeverity::kWarning : AlertSeverity::kCritical;
  a.comm = CommLabel(comm.hash);
  a.owner_uid = comm.uid;
  a.ranks = {rs.rank};
  a.host = state.host;
  a.source = rs.client;
  JudgedExcess judged;
  judged.share = rel;
  judged.ms_per_collective = rel * st.mean_segment_ns / 1e6;
  judged.since_seq = st.onset_seq;
  a.summary = LocalStragglerSummary(rs.rank, a.comm, f, structural, judged);
  // Why (cause_evidence.h): the lateness per collective over the late run against the rank's own
  // lateness before it, explained by the node's evidence of its process and GPU.
  // The late run starts at the detector's onset when that is earlier than the window's own start
  // (f.since_seq follows the recent window: with a bursty cause, a CPU quota's throttled periods,
  // it moves on while the onset stays, and the rank's "usual" would be taken from the late run
  // itself); the lateness over it is then its mean since the onset.
  const uint64_t from_seq =
      st.onset_seq > 0 && st.onset_seq < f.since_seq ? st.onset_seq : f.since_seq;
  // The history is walked only when the cause is (re)judged: the verdict is cached per late run.
  const CauseVerdict& cause =
      state.causes.Get({comm.uid, comm.hash, rs.rank, false}, from_seq, now_mono_ns, [&] {
        double usual_late_ns = 0;
        int usual_n = 0;
        double late_sum_ns = 0;
        int late_n = 0;
        for (size_t k = rs.history.size(); k > 0; --k) {
          const RankSample& h = rs.history[k - 1];
          if (h.lateness_ns < 0) continue;
          if (h.seq >= from_seq) {
            late_sum_ns += static_cast<double>(h.lateness_ns);
            ++late_n;
          } else if (usual_n < 64) {
            usual_late_ns += static_cast<double>(h.lateness_ns);
            ++usual_n;
          } else {
            break;
          }
        }
        const double late_ms =
            from_seq != f.since_seq && late_n > 0 ? late_sum_ns / late_n / 1e6 : f.lateness_mean_ms;
        const double step_ms = f.back_to_back ? f.compute_per_coll_ms : f.segment_p50_ms;
        const LateSpan span =
            LateSpanSince(rs, from_seq, late_ms, usual_n > 0 ? usual_late_ns / usual_n / 1e6 : -1,
                          step_ms, now_mono_ns);
        return JudgeLateCause(GatherCauseEvidence(state, comm, rs, span, state.evidence),
                              state.cause_params);
      });
  absl::StrAppend(&a.summary, "; ", CauseSentence(cause));
  a.evidence = {{"pattern", structural ? "structural" : "degraded"},
                {"lateness_p50_ms", f.lateness_p50_ms},
                {"lateness_share", f.share},
                {"segment_p50_ms", f.segment_p50_ms},
                {"lateness_mean_ms", f.lateness_mean_ms},
                {"compute_per_collective_ms", f.compute_per_coll_ms},
                {"since_seq", f.since_seq},
                {"since_start", f.since_start},
                {"window", f.samples},
                {"detector_pattern", StragglerPatternName(st.pattern)},
                {"relative_excess", rel},
                {"segment_ms", st.mean_segment_ns / 1e6},
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
  // The communicator's slow collectives split into waiting for late ranks vs slower transfer
  // (network when a NIC or link moved): seconds by cause and the latest span (slow_cause.h).
  a.evidence["slow_cause"] = state.slow.EvidenceFor(comm.key());
  a.evidence["cause"] = CauseJson(cause);
  a.runbook = absl::StrCat(config.runbook_base, "alert-straggler");
  a.started_real_ns = now_real_ns;
  return a;
}

}  // namespace sentinel::collector
