// The fake NCCL's bandwidth model: what rate one operation's bytes cross the network at, given the
// scenario's link rate and an optional degraded rank or ring link (tests/fakes/README.md). Every
// rank computes the same figure, as a real ring runs at the pace of its slowest link.
#pragma once

#include "tests/fakes/fake_nccl/scenario.h"

namespace sentinel::testing {

// Network rate in Gb/s for an operation on a communicator of `nranks` issued by `rank`: a
// collective (`is_coll`, a ring through every rank) or a p2p with `peer`.
double ModelNetGbps(const Scenario& sc, int nranks, int rank, bool is_coll, int peer);

}  // namespace sentinel::testing
