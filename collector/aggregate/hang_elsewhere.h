// Whether a rank's process is stuck inside another communicator's collective that waits for other
// nodes (hang_detector.h, role waiting_elsewhere). The aggregator fills InFlightView's
// inside_elsewhere_* fields from it before judging a communicator.
#pragma once

#include <cstdint>

#include "collector/aggregate/aggregator.h"

namespace sentinel::collector {

// Looks at the other communicators `m`'s own process (same connection) fed: one that has ranks on
// other nodes, where that process's latest in-flight state (live: reported within `silent_ns`)
// says its oldest incomplete collective's kernel started. Fills `view` with the longest such one;
// leaves it untouched when there is none.
void NoteInsideElsewhere(const State& state, const CommState& comm, const RankState& m,
                         int64_t now_ns, int64_t silent_ns, InFlightView* view);

}  // namespace sentinel::collector
