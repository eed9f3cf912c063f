// The node's job-wide straggler alerts from the wait evidence: see wait_alerts.h.
#include "collector/aggregate/wait_alerts.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/alerts/alert_key.h"
#include "collector/aggregate/cause_evidence.h"
#include "collector/aggregate/straggler_text.h"
#include "collector/aggregate/wait_evidence.h"

namespace sentinel::collector {
namespace {

nlohmann::json Figures(const WaitRankState& st, size_t window) {
  return {{"since_seq", st.since_seq},
          {"segment_p50_ms", st.segment_p50_ns / 1e6},
          {"usual_segment_ms", st.usual_segment_ns / 1e6},
          {"segment_growth",
           st.usual_segment_ns > 0 ? st.segment_p50_ns / st.usual_segment_ns - 1 : 0.0},
          {"remote_wait_p75_ms", st.remote_wait_p75_ns / 1e6},
          {"usual_remote_wait_ms", st.usual_wait_ns / 1e6},
          {"duration_p50_ms", st.duration_p50_ns / 1e6},
          {"window", window},
          {"recent", st.recent_n}};
}

// Why the rank is late (cause_evidence.h): its compute segment's growth over its usual, explained
// by the node's evidence of its process and GPU; judged at most once a second (CauseCache).
const CauseVerdict& WaitCause(const State& state, const CommState& comm, const RankState& rs,
                              const WaitRankState& st) {
  const double late_ms = (st.segment_p50_ns - st.usual_segment_ns) / 1e6;
  return state.causes.Get(
      {comm.uid, comm.hash, rs.rank, true}, st.since_seq, state.now_mono_ns, [&] {
        const LateSpan span = LateSpanSince(rs, st.since_seq, late_ms, -1,
                                            st.usual_segment_ns / 1e6, state.now_mono_ns);
        return JudgeLateCause(GatherCauseEvidence(state, comm, rs, span, state.evidence),
                              state.cause_params);
      });
}

}  // namespace

bool IsWaitAlert(const Alert& alert) {
  if (alert.kind != AlertKind::kStraggler) return false;
  const std::optional<AlertKey> key = ParseAlertKey(alert.id);
  return key && key->is_wait();
}

std::vector<Alert> WaitAlerts(const State& state, const std::string& runbook_base) {
  struct Ref {
    const CommState* comm;
    const RankState* rank;
    const WaitRankState* st;
  };
  std::vector<WaitRankRef> refs;
  std::vector<Ref> where;
  for (const auto& [key, comm] : state.comms) {
    if (!comm->wait || comm->active_count == 0 || comm->ended_resolved) continue;
    const bool spans = comm->nranks > static_cast<int32_t>(comm->members.size());
    for (const RankState* m : comm->members) {
      if (!m->active || m->client < 0) continue;
      const WaitRankState* st = comm->wait->rank(m->local_index);
      refs.push_back({comm->hash, m->rank, m->client, spans, comm->wait->Judged(m->local_index),
                      st != nullptr && st->flagged,
                      st != nullptr && Leaning(*st, comm->wait->params().rel)});
      where.push_back({comm.get(), m, st});
    }
  }
  const NodeVerdict v = JudgeNode(refs);
  std::vector<Alert> out;
  if (v.flagged.empty()) return out;
  if (v.slow_node) {
    Alert a;
    a.id = AlertKey::SlowNode(state.host).Id();
    a.kind = AlertKind::kStraggler;
    a.severity = AlertSeverity::kCritical;
    a.host = state.host;
    std::vector<SlowNodeRank> named;
    std::string named_cause;  // the first flagged rank's, quoted beside its figures
    nlohmann::json ranks = nlohmann::json::array();
    for (size_t i : v.flagged) {
      const Ref& r = where[i];
      named.push_back({CommLabel(r.comm->hash), r.rank->rank, r.st});
      nlohmann::json f = Figures(*r.st, r.comm->wait->params().window);
      f["comm"] = CommLabel(r.comm->hash);
      f["rank"] = r.rank->rank;
      const CauseVerdict& cause = WaitCause(state, *r.comm, *r.rank, *r.st);
      f["cause"] = CauseJson(cause);
      if (named_cause.empty()) named_cause = CauseSentence(cause);
      ranks.push_back(std::move(f));
      if (std::find(a.ranks.begin(), a.ranks.end(), r.rank->rank) == a.ranks.end()) {
        a.ranks.push_back(r.rank->rank);
      }
    }
    a.summary = SlowNodeSummary(state.host, v.processes, named);
    if (!named_cause.empty()) absl::StrAppend(&a.summary, "; first flagged rank's ", named_cause);
    a.evidence = {{"scope", "node"}, {"processes", v.processes}, {"flagged", ranks}};
    a.runbook = absl::StrCat(runbook_base, "alert-straggler");
    out.push_back(std::move(a));
    return out;
  }
  // Every process of the node flagged or slowing, and the first flag recent: a slow node is
  // forming, its verdict follows within seconds; naming its ranks one by one first would be wrong.
  // Held at most half the evidence's window (then the flagged ranks are named as they are).
  if (v.processes > 1) {
    absl::flat_hash_map<int, bool> slowing;  // process -> flagged or slowing in some judged comm
    int64_t first_flag = INT64_MAX;
    int64_t newest = INT64_MIN;
    int64_t hold_ns = 0;
    for (size_t i = 0; i < refs.size(); ++i) {
      if (!refs[i].spans_nodes || !refs[i].judged || where[i].st == nullptr) continue;
      const WaitRankState& st = *where[i].st;
      const WaitParams& params = where[i].comm->wait->params();
      bool& s = slowing[refs[i].process];
      s = s || SlowingOrFlagged(st, params.rel);
      if (st.flagged) first_flag = std::min(first_flag, st.flagged_at_ns);
      newest = std::max(newest, st.last_at_ns);
      hold_ns = std::max(hold_ns, params.window_ns / 2);
    }
    const bool forming =
        std::all_of(slowing.begin(), slowing.end(), [](const auto& p) { return p.second; });
    if (forming && first_flag != INT64_MAX && newest - first_flag < hold_ns) return out;
  }
  for (size_t i : v.flagged) {
    const Ref& r = where[i];
    // Where the local detector compares the rank with on-time local peers, it speaks for it.
    bool all_local_flagged = true;
    for (const RankState* m : r.comm->members) {
      const WaitRankState* st = r.comm->wait->rank(m->local_index);
      if (m->active && (st == nullptr || !st->flagged)) all_local_flagged = false;
    }
    if (r.comm->active_count > 1 && !all_local_flagged) continue;
    Alert a;
    a.id = AlertKey::WaitRank(r.comm->hash, r.rank->rank).Id();
    a.kind = AlertKind::kStraggler;
    a.severity = AlertSeverity::kCritical;
    a.comm = CommLabel(r.comm->hash);
    a.owner_uid = r.comm->uid;
    a.ranks = {r.rank->rank};
    a.host = state.host;
    a.source = r.rank->client;
    a.summary = WaitStragglerSummary(r.rank->rank, a.comm, r.comm->nnodes, *r.st);
    const CauseVerdict& cause = WaitCause(state, *r.comm, *r.rank, *r.st);
    absl::StrAppend(&a.summary, "; ", CauseSentence(cause));
    a.evidence = Figures(*r.st, r.comm->wait->params().window);
    a.evidence["cause"] = CauseJson(cause);
    a.evidence["scope"] = "rank";
    a.runbook = absl::StrCat(runbook_base, "alert-straggler");
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace sentinel::collector
