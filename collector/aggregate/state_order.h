// The order ranks and processes are listed in, and the rank a process is best known by: one rule
// for every snapshot taken of State (snapshot.h, metrics_snapshot.h, api_snapshot.h).
// Functions of State: call under the aggregator's lock.
#pragma once

#include <vector>

#include "collector/aggregate/aggregator.h"

namespace sentinel::collector {

// The rank a process is best known by: its rank in the communicator PrimaryRankBefore
// (metrics_snapshot.h) puts first (one spanning other nodes, then the largest).
const RankState* PrimaryRank(const State& state, const ProcessState& process);
// Ranks by (communicator, rank); processes by primary rank, then client id.
std::vector<const RankState*> SortedRanks(const State& state);
std::vector<const ProcessState*> SortedProcesses(const State& state);

}  // namespace sentinel::collector
