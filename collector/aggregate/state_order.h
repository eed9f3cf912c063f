// The order ranks and processes are listed in, and the rank a process is best known by: one rule
// for every rendering, whether it reads State (render_common.h) or a snapshot (snapshot.h).
// Functions of State: call under the aggregator's lock.
#pragma once

#include <vector>

#include "collector/aggregate/aggregator.h"

namespace sentinel::collector {

// The rank a process is best known by: its rank in the largest communicator it joined.
const RankState* PrimaryRank(const State& state, const ProcessState& process);
// The age of a rank's oldest incomplete collective as of the last tick (0 when none).
double InFlightAgeSeconds(const State& state, const InFlightView& v);
// Ranks by (communicator, rank); processes by primary rank, then client id.
std::vector<const RankState*> SortedRanks(const State& state);
std::vector<const ProcessState*> SortedProcesses(const State& state);

}  // namespace sentinel::collector
