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
  // Each process's sort key (ProcessListedBefore), looked up once rather than per comparison.
  struct Keyed {
    bool has_rank = false;
    int32_t rank = 0;
    int client = -1;
    const ProcessState* process = nullptr;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(state.processes.size());
  for (const auto& [client, p] : state.processes) {
    const RankState* primary = PrimaryRank(state, *p);
    keyed.push_back({primary != nullptr, primary ? primary->rank : 0, p->client, p.get()});
  }
  std::sort(keyed.begin(), keyed.end(), ProcessListedBefore<Keyed>);
  std::vector<const ProcessState*> out;
  out.reserve(keyed.size());
  for (const Keyed& k : keyed) out.push_back(k.process);
  return out;
}

const RankState* PrimaryRank(const State& state, const ProcessState& process) {
  const RankState* best = nullptr;
  PrimaryRankKey best_key;
  for (const auto& key : process.ranks) {
    auto it = state.ranks.find(key);
    if (it == state.ranks.end()) continue;
    const RankState* r = it->second.get();
    auto comm = state.comms.find(r->comm_key());
    const PrimaryRankKey k{comm != state.comms.end() ? comm->second->nnodes : 0, r->nranks,
                           r->comm_hash};
    if (best == nullptr || PrimaryRankBefore(k, best_key)) {
      best = r;
      best_key = k;
    }
  }
  return best;
}

}  // namespace sentinel::collector
