// Straggler alert texts from measured figures: see straggler_text.h.
#include "collector/aggregate/straggler_text.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "collector/aggregate/stats.h"

namespace sentinel::collector {

LateFigures MeasureLateness(const std::vector<LateSample>& samples, size_t window,
                            bool history_complete, uint64_t from_seq, double compute_per_coll_ns) {
  LateFigures f;
  std::vector<int64_t> late;
  std::vector<int64_t> segments;
  size_t since_from = 0;
  for (const LateSample& s : samples) since_from += s.lateness_ns >= 0 && s.seq >= from_seq ? 1 : 0;
  const uint64_t floor_seq = from_seq != 0 && since_from >= 8 ? from_seq : 0;
  size_t first = 0;  // the oldest sample of the window
  size_t counted = 0;
  for (size_t k = samples.size(); k > 0 && counted < window; --k) {
    const LateSample& s = samples[k - 1];
    if (s.lateness_ns < 0 || s.seq < floor_seq) continue;
    ++counted;
    first = k - 1;
    late.push_back(s.lateness_ns);
    if (s.segment_ns > 0) segments.push_back(s.segment_ns);
  }
  if (late.empty()) return f;
  f.valid = true;
  f.samples = late.size();
  // Percentile of stats.h: the same p50 as /v1/ranks (sentinelctl ranks) over the same samples.
  double late_sum = 0;
  for (int64_t l : late) late_sum += static_cast<double>(l);
  f.lateness_mean_ms = late_sum / static_cast<double>(late.size()) / 1e6;
  const int64_t p50 = Percentile(&late, 50);
  f.lateness_p50_ms = static_cast<double>(p50) / 1e6;
  if (!segments.empty()) {
    const int64_t seg = Percentile(&segments, 50);
    f.segment_p50_ms = static_cast<double>(seg) / 1e6;
    if (seg > 0) f.share = static_cast<double>(p50) / static_cast<double>(seg);
    f.compute_per_coll_ms = compute_per_coll_ns / 1e6;
    if (compute_per_coll_ns > 0 && 2 * static_cast<double>(seg) < compute_per_coll_ns) {
      f.back_to_back = true;
      f.share = f.lateness_mean_ms / f.compute_per_coll_ms;
    }
  }
  // The late run, over every sample held (it may have begun before the window).
  const double cut = static_cast<double>(p50) / 2;
  size_t seen = 0;
  size_t slow = 0;
  size_t run_start = samples.size();
  for (size_t k = samples.size(); k > 0; --k) {
    const LateSample& s = samples[k - 1];
    if (s.lateness_ns < 0) continue;
    ++seen;
    const bool is_late = static_cast<double>(s.lateness_ns) >= cut;
    if (is_late) ++slow;
    if (is_late && 4 * slow >= 3 * seen) run_start = k - 1;
  }
  if (run_start == samples.size()) run_start = first;
  f.since_seq = samples[run_start].seq;
  size_t first_known = 0;
  while (first_known < samples.size() && samples[first_known].lateness_ns < 0) ++first_known;
  f.since_start = history_complete && run_start == first_known;
  return f;
}

std::string LocalStragglerSummary(int rank, const std::string& comm, const LateFigures& f,
                                  bool structural, const JudgedExcess& judged) {
  const std::string since = f.since_start ? std::string("since the communicator started")
                                          : absl::StrCat("since collective #", f.since_seq);
  std::string figures = absl::StrFormat("%.2f ms late (p50 of its last %d collectives)",
                                        f.lateness_p50_ms, f.samples);
  if (f.back_to_back) {
    absl::StrAppend(&figures,
                    absl::StrFormat("; with several collectives back to back in a step, it is "
                                    "%.2f ms late on average, %.0f%% of the %.2f ms of compute per "
                                    "collective",
                                    f.lateness_mean_ms, f.share * 100, f.compute_per_coll_ms));
  } else if (f.segment_p50_ms > 0) {
    absl::StrAppend(&figures,
                    absl::StrFormat(", %.0f%% of the %.2f ms compute segment between collectives",
                                    f.share * 100, f.segment_p50_ms));
  }
  const bool judged_differs = judged.share >= 0 && (f.share <= 0 || judged.share > 1.25 * f.share ||
                                                    judged.share < 0.8 * f.share);
  if (judged_differs) {
    absl::StrAppend(
        &figures, absl::StrFormat("; judged on its excess over the median local "
                                  "arrival since collective #%d: %.0f%% of its "
                                  "compute, about %.2f ms per collective on average",
                                  judged.since_seq, judged.share * 100, judged.ms_per_collective));
  }
  const char* hint = structural
                         ? "structural: e.g. a last pipeline stage, or a placement that is always "
                           "slower"
                         : "newly degraded: look for a throttled GPU, a noisy neighbour or a "
                           "degraded link";
  return absl::StrFormat("rank %d on comm %s is late %s: %s, behind the other local ranks (%s)",
                         rank, comm, since, figures, hint);
}

namespace {

std::string WaitFigures(const WaitRankState& st) {
  const double grew = st.usual_segment_ns > 0 ? st.segment_p50_ns / st.usual_segment_ns - 1 : 0.0;
  return absl::StrFormat(
      "it computes %.2f ms between collectives (p50 of its last %d), %.0f%% over its usual "
      "%.2f ms, and its node waits %.2f ms inside them for the other nodes against its usual "
      "%.2f ms",
      st.segment_p50_ns / 1e6, st.recent_n, grew * 100, st.usual_segment_ns / 1e6,
      st.remote_wait_p75_ns / 1e6, st.usual_wait_ns / 1e6);
}

}  // namespace

std::string WaitStragglerSummary(int rank, const std::string& comm, int nnodes,
                                 const WaitRankState& st) {
  const std::string span =
      nnodes > 1 ? absl::StrFormat(" (%d nodes)", nnodes) : std::string(" (ranks on other nodes)");
  return absl::StrFormat(
      "rank %d on comm %s%s is the one its peers wait for since collective #%d: %s (slow rank: "
      "look for a throttled GPU, a data-loader stall or a noisy neighbour of this process)",
      rank, comm, span, st.since_seq, WaitFigures(st));
}

std::string SlowNodeSummary(const std::string& host, size_t processes,
                            const std::vector<SlowNodeRank>& ranks) {
  std::string text = absl::StrFormat(
      "node %s is slow: all %d of its processes with ranks in communicators spanning other nodes "
      "compute longer and wait less inside collectives than they used to (the other nodes wait "
      "for this one)",
      host, processes);
  if (!ranks.empty() && ranks.front().state != nullptr) {
    const SlowNodeRank& r = ranks.front();
    absl::StrAppend(&text, absl::StrFormat("; rank %d on comm %s since collective #%d: %s", r.rank,
                                           r.comm, r.state->since_seq, WaitFigures(*r.state)));
  }
  if (ranks.size() > 1) {
    absl::StrAppend(&text, absl::StrFormat(" (%d flagged ranks in all)", ranks.size()));
  }
  absl::StrAppend(&text,
                  " (look for CPU contention, a data-loader or storage stall, or a host fault on "
                  "this node)");
  return text;
}

}  // namespace sentinel::collector
