// Helpers the Prometheus text, API JSON and trace renderings share (one rule each): the order
// ranks and processes are listed in, the rank a process is best known by, time formatting.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collector/aggregate/aggregator.h"
#include "collector/base/real_time.h"

namespace sentinel::collector {

inline constexpr const char* kSentinelVersion = "0.1.0";

// The rank a process is best known by: its rank in the largest communicator it joined.
const RankState* PrimaryRank(const State& state, const ProcessState& process);
// The age of a rank's oldest incomplete collective as of the last tick (0 when none).
double InFlightAgeSeconds(const State& state, const InFlightView& v);
// Ranks by (communicator, rank); processes by primary rank, then client id.
std::vector<const RankState*> SortedRanks(const State& state);
std::vector<const ProcessState*> SortedProcesses(const State& state);

}  // namespace sentinel::collector
