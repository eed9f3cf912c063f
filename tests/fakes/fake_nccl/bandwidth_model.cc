// The fake NCCL's bandwidth model; see bandwidth_model.h.
#include "tests/fakes/fake_nccl/bandwidth_model.h"

#include <algorithm>

namespace sentinel::testing {
namespace {

// Whether ranks a and b are neighbours in the ring 0 -> 1 -> ... -> n-1 -> 0.
bool RingNeighbours(int a, int b, int nranks) {
  if (a < 0 || b < 0 || a >= nranks || b >= nranks || a == b) return false;
  int d = a > b ? a - b : b - a;
  return d == 1 || d == nranks - 1;
}

}  // namespace

double ModelNetGbps(const Scenario& sc, int nranks, int rank, bool is_coll, int peer) {
  double gbps = sc.link_gbps;
  if (sc.degraded_gbps <= 0) return gbps;
  bool degraded = false;
  if (sc.degraded_rank >= 0 && sc.degraded_rank < nranks) {
    // A collective's ring crosses the degraded NIC; a p2p only when it is one of the two ends.
    degraded = is_coll || rank == sc.degraded_rank || peer == sc.degraded_rank;
  }
  if (sc.degraded_link_a >= 0 && RingNeighbours(sc.degraded_link_a, sc.degraded_link_b, nranks)) {
    bool pair = (rank == sc.degraded_link_a && peer == sc.degraded_link_b) ||
                (rank == sc.degraded_link_b && peer == sc.degraded_link_a);
    degraded = degraded || is_coll || pair;
  }
  return degraded ? std::min(gbps, sc.degraded_gbps) : gbps;
}

}  // namespace sentinel::testing
