// See hang_elsewhere.h.
#include "collector/aggregate/hang_elsewhere.h"

namespace sentinel::collector {

void NoteInsideElsewhere(const State& state, const CommState& comm, const RankState& m,
                         int64_t now_ns, int64_t silent_ns, InFlightView* view) {
  if (m.client < 0) return;
  auto p = state.processes.find(m.client);
  if (p == state.processes.end()) return;
  for (const auto& key : p->second->ranks) {
    if (key.first == comm.key()) continue;
    auto r = state.ranks.find(key);
    if (r == state.ranks.end() || r->second->client != m.client) continue;
    const InFlightView& o = r->second->inflight;
    if (!o.has_state || !o.connected || o.ended || o.enqueued <= o.completed ||
        o.gpu_started <= o.completed || o.oldest_since_ns <= 0 ||
        now_ns - o.last_update_ns > silent_ns) {
      continue;
    }
    auto c = state.comms.find(key.first);
    if (c == state.comms.end()) continue;
    const CommState& other = *c->second;
    // Wholly on this node: judged here by that communicator's own verdict.
    if (static_cast<size_t>(other.nranks) <= other.members.size()) continue;
    if (view->inside_elsewhere_since_ns == 0 ||
        o.oldest_since_ns < view->inside_elsewhere_since_ns) {
      view->inside_elsewhere_since_ns = o.oldest_since_ns;
      view->elsewhere_comm = other.hash;
      view->elsewhere_ordinal = o.completed + 1;
    }
  }
}

}  // namespace sentinel::collector
