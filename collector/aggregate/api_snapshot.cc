// The /v1/ranks and /v1/telemetry snapshots: see api_snapshot.h.
#include "collector/aggregate/api_snapshot.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/state_order.h"

namespace sentinel::collector {

RanksSnapshot TakeRanksSnapshot(const State& state) {
  RanksSnapshot snap;
  snap.host = state.host;
  snap.now_mono_ns = state.now_mono_ns;
  snap.processes.reserve(state.processes.size());
  for (const auto& [client, p] : state.processes) {
    RanksSnapshot::Process& out = snap.processes.emplace_back();
    out.client = p->client;
    out.pid = p->pid;
    out.uid = p->uid;
    out.claimed_pid = p->claimed_pid;
    out.host = p->host;
    out.job_id = p->job_id;
    out.connected = p->connected;
    for (const auto& key : p->ranks) {
      auto it = state.ranks.find(key);
      if (it == state.ranks.end()) continue;
      const RankState* r = it->second.get();
      if (r->client != p->client && r->client >= 0) continue;  // moved to a newer connection
      RanksSnapshot::Comm& c = out.comms.emplace_back();
      c.comm_hash = r->comm_hash;
      c.uid = r->uid;
      c.rank = r->rank;
      c.nranks = r->nranks;
      c.has_seq = r->has_seq;
      c.last_seq = r->last_seq;
      c.collectives = r->collectives;
      c.p2p = r->p2p;
      c.active = r->active;
      c.inflight = r->inflight;
      auto comm = state.comms.find(r->comm_key());
      if (comm != state.comms.end() && comm->second->wait) {
        const WaitEvidence& wait = *comm->second->wait;
        const WaitRankState* w = wait.rank(r->local_index);
        if (w != nullptr && w->recent_n >= wait.params().min_recent) {
          c.has_wait = true;
          c.duration_p50_ns = w->duration_p50_ns;
          c.segment_p50_ns = w->segment_p50_ns;
          c.usual_segment_ns = w->has_usual ? w->usual_segment_ns : 0;
          c.remote_wait_p75_ns = w->remote_wait_p75_ns;
          c.usual_remote_wait_ns = w->has_usual ? w->usual_wait_ns : 0;
          c.waited_for = w->flagged;
          c.since_seq = w->since_seq;
        }
      }
    }
    if (const RankState* primary = PrimaryRank(state, *p)) {
      out.has_rank = true;
      out.rank = primary->rank;
      out.nranks = primary->nranks;
      out.has_seq = primary->has_seq;
      out.last_seq = primary->last_seq;
      out.collectives = primary->collectives;
      out.straggler = primary->straggler_firing;
      out.primary_comm = primary->comm_hash;
      const size_t n = primary->history.size();
      out.samples.resize(n);
      for (size_t i = 0; i < n; ++i) {
        const RankSample& s = primary->history[i];
        out.samples[i] = {s.lateness_ns, s.clock_free_ns, s.duration_ns};
      }
    }
    out.has_gpu_window = p->has_gpu_window;
    out.gpu_window_overlap_ns = p->gpu_window.overlap_ns;
    out.gpu_window_nccl_ns = p->gpu_window.nccl_ns;
    out.gpu = GpuRankInputOf(p->gpu);
    out.time = TimeBreakdownInputOf(p->time, state.now_mono_ns);
    out.has_heartbeat = p->has_heartbeat;
    out.heartbeat = p->heartbeat;
    out.overhead_ratio = p->overhead_ratio;
  }
  return snap;
}

TelemetrySnapshot TakeTelemetrySnapshot(const State& state, int64_t window_ns,
                                        int64_t now_mono_ns) {
  TelemetrySnapshot snap;
  snap.host = state.host;
  snap.window_ns = window_ns;
  snap.since_mono_ns = now_mono_ns - window_ns;
  const int64_t since = snap.since_mono_ns;
  for (size_t i = 0; i < state.collectives.size(); ++i) {
    const CollSummary& s = state.collectives[i];
    if (s.end_mono_ns < since) continue;
    snap.collectives.push_back(
        {s.comm_hash, s.uid, s.skew_ns, s.duration_ns, s.latency_ns, s.busbw_gbps});
  }
  snap.gpu.reserve(state.processes.size());
  for (const auto& [client, p] : state.processes) {
    snap.gpu.push_back(GpuTelemetryInputOf(p->gpu, since));
    if (p->has_heartbeat) snap.plugin_dropped += HeartbeatDrops(p->heartbeat);
    if (p->has_gpu_window && p->gpu_window.end_ns >= since) {
      snap.gpu_window_overlap += p->gpu_window.overlap_ns;
      snap.gpu_window_nccl += p->gpu_window.nccl_ns;
    }
  }
  snap.hang_suspects = state.hang_suspects;
  snap.counters = state.counters;
  // A few figures per port from up to an hour of polls: cheaper to compute than to copy.
  snap.nic = ComputeNicWindow(state.nic, window_ns, now_mono_ns);
  snap.baseline = TakeBaselineSnapshot(state, since);
  snap.net = state.net;
  snap.slow = state.slow.Snapshot();
  return snap;
}

}  // namespace sentinel::collector
