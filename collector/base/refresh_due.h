// When a statistic taken over a window of samples (a median, a quantile) is due to be taken
// again. Recomputed every few samples it costs a rank at thousands of collectives a second
// hundreds of sorts a second; so at least `min_new` samples must have come since it last was, and
// then `min_ns` must have passed too, unless `max_new` came (the statistic never stands for more
// than that many samples). The clock is the caller's: collector time or the job's.
#pragma once

#include <cstdint>

namespace sentinel::collector {

struct RefreshBound {
  uint64_t min_new = 1;
  uint64_t max_new = UINT64_MAX;
  int64_t min_ns = 0;
};

// `since`: samples since the last time; `elapsed_ns`: time since then.
inline bool RefreshDue(uint64_t since, int64_t elapsed_ns, const RefreshBound& bound) {
  return since >= bound.min_new && (since >= bound.max_new || elapsed_ns >= bound.min_ns);
}

}  // namespace sentinel::collector
