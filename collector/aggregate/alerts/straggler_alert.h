// The straggler alert: a local rank of a communicator that the straggler detector
// (straggler_detector.h) found late, with the figures that decided it. Built under the
// aggregator's lock from its State; the aggregator fires it (or resolves its key) as the detector
// says.
#pragma once

#include <cstdint>

#include "collector/aggregate/aggregator.h"

namespace sentinel::collector {

// The alert for rank `rs` of `comm`, whose detector has just fired on a collective of `func` in
// size bucket `bucket`. `now_mono_ns` bounds the CUPTI window quoted (config.window_ns back);
// `now_real_ns` is its start.
Alert StragglerAlert(const State& state, const CommState& comm, const RankState& rs, int func,
                     int bucket, const Config& config, int64_t now_mono_ns, int64_t now_real_ns);

}  // namespace sentinel::collector
