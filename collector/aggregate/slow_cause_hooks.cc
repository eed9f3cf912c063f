// The aggregator's calls into SlowCause: see slow_cause_hooks.h.
#include "collector/aggregate/slow_cause_hooks.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/alerts/slow_network_alert.h"

namespace sentinel::collector {
namespace {

// A finding stays firing while its communicator's latest network span ended this recently.
constexpr int64_t kNetworkFindingRecentNs = 60LL * 1000000000;

}  // namespace

void SlowCauseObserveJoin(State* state, const CommState& comm, int func, const JoinSlot& js,
                          const JoinCell* cells) {
  std::vector<WindowRank>& ranks = state->slow.scratch();
  ranks.clear();
  WindowObservation w;
  w.min_arrival_ns = INT64_MAX;
  w.max_arrival_ns = INT64_MIN;
  w.max_end_ns = INT64_MIN;
  for (size_t li = 0; li < comm.members.size(); ++li) {
    const JoinCell& c = cells[li];
    if (c.arrival == kUnset) continue;
    if (c.duration < 0) return;  // no GPU times for a rank: the split needs them all
    ranks.push_back({comm.members[li]->rank, c.arrival, comm.members[li]->pid});
    w.min_arrival_ns = std::min(w.min_arrival_ns, c.arrival);
    w.max_arrival_ns = std::max(w.max_arrival_ns, c.arrival);
    w.max_end_ns = std::max(w.max_end_ns, c.arrival + c.duration);
  }
  if (ranks.empty()) return;
  w.comm_hash = comm.hash;
  w.uid = comm.uid;
  w.nranks = comm.nranks;
  w.local_ranks = static_cast<int32_t>(comm.members.size());
  w.func = static_cast<uint8_t>(func);
  w.bucket = SizeBucket(js.bytes);
  w.seq = js.seq;
  w.ranks = ranks.data();
  w.nranks_seen = ranks.size();
  state->slow.OnWindow(w, &state->nic);
}

void SlowCauseNoteLink(State* state, const SentinelWireNetConnStats& stats) {
  if (stats.is_send == 0) return;  // the send end times the link
  auto it = state->net.links().find(stats.link_id);
  if (it == state->net.links().end()) return;
  const NetLink& l = it->second;
  // The sending process as the kernel names it (SO_PEERCRED of the connection that reported the
  // send end), never the pid the record claims: it maps the link to the communicators of that
  // process.
  uint32_t pid = 0;
  const auto proc = state->processes.find(l.send.client);
  if (proc != state->processes.end() && proc->second) pid = proc->second->pid;
  state->slow.OnLinkSample(l.link_id, l.send.host, l.send.dev_name,
                           l.recv.present ? l.recv.host : std::string(),
                           {stats.now_ns, stats.requests, stats.latency_ns_sum}, pid);
}

void SlowCauseSettle(State* state, int64_t now_mono_ns, int64_t now_real_ns,
                     const std::string& runbook_base) {
  state->slow.Settle(state->nic, now_mono_ns);
  absl::flat_hash_set<AlertRef> firing;
  for (Alert& a :
       state->slow.NetworkAlerts(now_mono_ns, kNetworkFindingRecentNs, state->host, runbook_base)) {
    firing.insert(RefOf(a));
    a.started_real_ns = now_real_ns;
    state->alerts.Fire(std::move(a), now_real_ns);
  }
  state->alerts.ResolveIf(
      [&](const Alert& a) { return IsSlowNetworkAlert(a) && !firing.contains(RefOf(a)); },
      ResolveReason::kCleared, now_real_ns);
}

}  // namespace sentinel::collector
