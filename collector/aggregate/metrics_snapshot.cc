// The /metrics snapshot: see metrics_snapshot.h.
#include "collector/aggregate/metrics_snapshot.h"

#include <algorithm>

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/alerts/alert_key.h"
#include "collector/aggregate/op_signature.h"
#include "collector/aggregate/state_order.h"

namespace sentinel::collector {

BaselineSnapshot TakeBaselineSnapshot(const State& state, int64_t since_mono_ns) {
  BaselineSnapshot snap;
  for (size_t i = 0; i < state.collectives.size(); ++i) {
    const CollSummary& s = state.collectives[i];
    if (s.end_mono_ns < since_mono_ns || s.busbw_gbps < 0) continue;
    snap.busbw.push_back({s.func, s.bytes, s.busbw_gbps});
  }
  if (const BaselineStore::Run* run = state.baseline.latest()) snap.latest = *run;
  return snap;
}

namespace {

// The cause of the firing straggler alert (node-local or from the wait evidence) naming the rank,
// whose communicator `owner` owns.
std::string LateCauseOfRank(const State& state, const RankState& r, uint32_t owner) {
  for (const std::string& id : {AlertKey::Straggler(r.comm_hash, r.rank).Id(),
                                AlertKey::WaitRank(r.comm_hash, r.rank).Id()}) {
    const Alert* a = state.alerts.Find(owner, id);
    if (a == nullptr || !a->firing() || !a->evidence.is_object()) continue;
    const auto cause = a->evidence.find("cause");
    if (cause == a->evidence.end() || !cause->is_object()) continue;
    const auto name = cause->find("cause");
    if (name != cause->end() && name->is_string()) return name->get<std::string>();
  }
  return "";
}

// The collectives of other communicators `m`'s process is inside (kernel started, not completed;
// the oldest of each kind): among those wholly on this node (`local_since`; the node-spanning ones
// are the hang evaluation's, InFlightView::inside_elsewhere_*), and among all (`any_*`, for the
// job-wide wait-cycle rule, which needs the communicator whatever the hang evaluation judged).
struct InsideOthers {
  int64_t local_since = 0;
  int64_t any_since = 0;
  uint64_t any_comm = 0;
  uint64_t any_ordinal = 0;
};
InsideOthers FindInsideOthers(const State& state, const RankState& m) {
  InsideOthers out;
  if (m.client < 0) return out;
  auto p = state.processes.find(m.client);
  if (p == state.processes.end()) return out;
  const int64_t silent_ns = HangParams().silent_ns;
  for (const auto& key : p->second->ranks) {
    if (key.first == m.comm_key()) continue;
    auto r = state.ranks.find(key);
    auto c = state.comms.find(key.first);
    if (r == state.ranks.end() || c == state.comms.end() || r->second->client != m.client) {
      continue;
    }
    const InFlightView& o = r->second->inflight;
    if (!o.has_state || !o.connected || o.ended || o.enqueued <= o.completed ||
        o.gpu_started <= o.completed || o.oldest_since_ns <= 0 ||
        state.now_mono_ns - o.last_update_ns > silent_ns) {
      continue;
    }
    if (out.any_since == 0 || o.oldest_since_ns < out.any_since) {
      out.any_since = o.oldest_since_ns;
      out.any_comm = r->second->comm_hash;
      out.any_ordinal = o.oldest_seq;
    }
    if (static_cast<size_t>(c->second->nranks) > c->second->members.size()) continue;
    if (out.local_since == 0 || o.oldest_since_ns < out.local_since) {
      out.local_since = o.oldest_since_ns;
    }
  }
  return out;
}

}  // namespace

MetricsSnapshot TakeMetricsSnapshot(const State& state) {
  MetricsSnapshot snap;
  snap.host = state.host;
  snap.now_mono_ns = state.now_mono_ns;
  snap.counters = state.counters;
  snap.hang_suspects = state.hang_suspects.size();
  for (const auto& [id, a] : state.alerts.all()) {
    if (a.firing()) snap.firing.push_back(a.kind);
  }
  for (const auto& [key, p] : state.nic.ports) {
    snap.nic.push_back(
        {key.first, key.second, p.last.present, p.total, p.last.rate_gbps, p.last.active});
  }
  snap.comms.reserve(state.comms.size());
  for (const auto& [key, c] : state.comms) {
    MetricsSnapshot::Comm& out = snap.comms.emplace_back();
    out.hash = c->hash;
    out.uid = c->uid;
    out.nranks = c->nranks;
    out.name = c->name;
    out.local_ranks = c->members.size();
    out.active_count = c->active_count;
    out.last_activity_mono_ns = c->last_activity_mono_ns;
    out.ended_mono_ns = c->ended_mono_ns;
    out.joined_by_func_bucket = c->joined_by_func_bucket;
    out.skew = c->skew;
  }
  snap.ranks.reserve(state.ranks.size());
  for (const auto& [key, r] : state.ranks) {
    MetricsSnapshot::Rank& out = snap.ranks.emplace_back();
    out.comm_hash = r->comm_hash;
    out.uid = r->uid;
    out.rank = r->rank;
    out.nranks = r->nranks;
    out.active = r->active;
    out.has_seq = r->has_seq;
    out.last_seq = r->last_seq;
    out.count_by_func = r->count_by_func;
    out.inflight = r->inflight;
    const InsideOthers inside = FindInsideOthers(state, *r);
    out.inside_local_since_ns = inside.local_since;
    out.waiting_in_comm = inside.any_comm;
    out.waiting_in_ordinal = inside.any_ordinal;
    out.waiting_in_since_ns = inside.any_since;
    out.lateness = r->lateness;
    out.clock_free = r->clock_free;
    for (size_t b = 0; b < r->duration.size(); ++b) {
      if (r->duration[b]) out.duration[b] = *r->duration[b];
    }
    auto c = state.comms.find(r->comm_key());
    // Alerts are keyed by the communicator's owner.
    out.late_cause = LateCauseOfRank(state, *r, c != state.comms.end() ? c->second->uid : r->uid);
    if (c != state.comms.end() && c->second->wait) {
      const WaitRankState* w = c->second->wait->rank(r->local_index);
      if (w != nullptr && w->recent_n >= c->second->wait->params().min_recent) {
        out.recent_duration_p50_ns = w->duration_p50_ns;
        out.recent_segment_p50_ns = w->segment_p50_ns;
      }
    }
  }
  snap.processes.reserve(state.processes.size());
  for (const auto& [client, p] : state.processes) {
    MetricsSnapshot::Process& out = snap.processes.emplace_back();
    out.client = p->client;
    out.uid = p->uid;
    out.connected = p->connected;
    if (const RankState* primary = PrimaryRank(state, *p)) {
      out.has_rank = true;
      out.rank = primary->rank;
      out.primary_comm = primary->comm_hash;
    }
    for (const auto& key : p->ranks) {
      auto r = state.ranks.find(key);
      auto c = state.comms.find(key.first);
      if (r == state.ranks.end() || c == state.comms.end()) continue;
      out.ranks.push_back(
          {key.first.hash, key.first.uid, r->second->nranks, r->second->active, c->second->nnodes});
    }
    out.has_heartbeat = p->has_heartbeat;
    out.heartbeat = p->heartbeat;
    out.overhead_ratio = p->overhead_ratio;
    out.has_gpu_window = p->has_gpu_window;
    out.gpu_window = p->gpu_window;
    out.gpu = GpuPrometheusInputOf(p->gpu);
    out.time = TimeBreakdownInputOf(p->time, state.now_mono_ns);
  }
  snap.baseline = TakeBaselineSnapshot(state, INT64_MIN);
  snap.net = state.net;
  snap.slow = state.slow.Snapshot();
  return snap;
}

double InFlightAgeSeconds(int64_t now_mono_ns, const InFlightView& v) {
  if (v.oldest_since_ns <= 0 || v.enqueued <= v.completed) return 0;
  return std::max(0.0, static_cast<double>(now_mono_ns - v.oldest_since_ns) / 1e9);
}

bool InFlightWaitingElsewhere(int64_t now_mono_ns, const MetricsSnapshot::Rank& r) {
  const int64_t bar = HangParams().elsewhere_ns;
  const int64_t spanning = r.inflight.inside_elsewhere_since_ns;
  const int64_t local = r.inside_local_since_ns;
  return (spanning > 0 && now_mono_ns - spanning >= bar) ||
         (local > 0 && now_mono_ns - local >= bar) || InFlightWaitingIn(now_mono_ns, r);
}

bool InFlightStuck(int64_t now_mono_ns, const InFlightView& v) {
  return v.has_state && v.connected && !v.ended && v.enqueued > v.completed &&
         v.oldest_since_ns > 0 && now_mono_ns - v.oldest_since_ns >= HangParams().elsewhere_ns;
}

bool InFlightWaitingIn(int64_t now_mono_ns, const MetricsSnapshot::Rank& r) {
  return r.inflight.has_state && !r.inflight.ended && r.waiting_in_since_ns > 0 &&
         now_mono_ns - r.waiting_in_since_ns >= HangParams().elsewhere_ns;
}

StuckOpExport StuckOpOf(const InFlightView& v) {
  const OpSignature sig = InFlightSignature(v);
  StuckOpExport op;
  op.digest = SignatureDigest(sig);
  op.func = sig.func;
  if (sig.datatype != kSentinelDatatypeUnknown) op.datatype = ShortDatatypeName(sig.datatype);
  op.root = sig.root;
  op.bytes = sig.bytes.value_or(0);
  return op;
}

}  // namespace sentinel::collector
