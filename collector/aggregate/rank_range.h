// The one check of a communicator size and a rank index a peer sends (records, CommInit,
// in-flight state, baseline results): the size is 1 .. kMaxCommRanks and the rank lies inside it.
// Everything that sizes state from these (join cells, budgets) relies on it.
#pragma once

#include <cstdint>

namespace sentinel::collector {

// Larger than any real communicator; bounds what a peer may claim.
inline constexpr int32_t kMaxCommRanks = int32_t{1} << 24;

constexpr bool ValidCommSize(int32_t nranks) { return nranks > 0 && nranks <= kMaxCommRanks; }

constexpr bool ValidRankIndex(int32_t rank, int32_t nranks) {
  return ValidCommSize(nranks) && rank >= 0 && rank < nranks;
}

}  // namespace sentinel::collector
