// Listing order and primary ranks: see state_order.h.
#include "collector/aggregate/state_order.h"

#include <algorithm>
#include <cstdint>

#include "collector/aggregate/metrics_snapshot.h"

namespace sentinel::collector {

std::vector<const RankState*> SortedRanks(const State& state) {
  std::vector<const RankState*> ranks;
  ranks.reserve(state.ranks.size());
  for (const auto& [key, r] : state.ranks) ranks.push_back(r.get());
  std::sort(ranks.begin(), ranks.end(), RankListedBefore<RankState>);
  return ranks;
}

std::vector<const ProcessState*> SortedProcesses(const State& state) {
  std::vector<const ProcessState*> out;
  for (const auto& [client, p] : state.processes) out.push_back(p.get());
  std::sort(out.begin(), out.end(), [&](const ProcessState* a, const ProcessState* b) {
    const RankState* ra = PrimaryRank(state, *a);
    const RankState* rb = PrimaryRank(state, *b);
    const int xa = ra ? ra->rank : INT32_MAX;
    const int xb = rb ? rb->rank : INT32_MAX;
    return xa != xb ? xa < xb : a->client < b->client;
  });
  return out;
}

const RankState* PrimaryRank(const State& state, const ProcessState& process) {
  const RankState* best = nullptr;
  for (const auto& key : process.ranks) {
    auto it = state.ranks.find(key);
    if (it == state.ranks.end()) continue;
    const RankState* r = it->second.get();
    if (best == nullptr || PrimaryRankBefore(*r, *best)) {
      best = r;
    }
  }
  return best;
}

double InFlightAgeSeconds(const State& state, const InFlightView& v) {
  return InFlightAgeSeconds(state.now_mono_ns, v);
}

}  // namespace sentinel::collector
