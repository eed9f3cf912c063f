// InFlightMonitor: the drainer's policy for SentinelWireInFlight records. Given the in-flight
// snapshot of every live communicator at each drain, it decides which records to send: every
// communicator at least once per period (1 s), and at once when the oldest incomplete collective
// has been in flight longer than the stuck threshold (then with kSentinelInFlightStuck).
//
// The threshold follows the job's own time scale: a multiple of the longest in-flight time
// (enqueue to completion) of recently completed collectives on that communicator, a maximum that
// decays with a half-life, never below a floor of a few drain intervals (the resolution at which
// the drainer sees completions). SENTINEL_INFLIGHT_STUCK_MS replaces it with a fixed value.
//
// Drainer thread only (not thread-safe); allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "plugin/core/in_flight.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {

// One live communicator context as the core reads it (SnapshotInFlight in profiler_core.h).
struct InFlightSample {
  uint64_t comm_hash = 0;
  int32_t rank = 0;
  int32_t nranks = 0;
  uint32_t pid = 0;
  bool kernel_ch = true;  // KernelCh is in the event mask (gpu_started is tracked)
  InFlightSnapshot snap;
};

struct InFlightMonitorOptions {
  int64_t period_ns = 1'000'000'000;      // every live communicator at least this often
  int64_t fixed_threshold_ns = 0;         // > 0: SENTINEL_INFLIGHT_STUCK_MS, no adaptation
  int64_t floor_ns = 100'000'000;         // adaptive threshold never below (4 drain intervals)
  int64_t multiple = 10;                  // adaptive threshold = multiple x recent in-flight time
  int64_t half_life_ns = 60'000'000'000;  // decay of the recent in-flight maximum
};

class InFlightMonitor {
 public:
  explicit InFlightMonitor(const InFlightMonitorOptions& options) : options_(options) {}

  // One drain. `force`: send every communicator now (final drain). Appends the records to send
  // to *out; forgets communicators absent from `samples` (finalized).
  void Observe(const InFlightSample* samples, size_t n, int64_t now_ns, bool force,
               std::vector<SentinelWireInFlight>* out);

  // The stuck threshold of one communicator at `now_ns` (its floor if unknown). For tests.
  int64_t ThresholdNs(uint64_t comm_hash, int32_t rank, int64_t now_ns) const;

 private:
  struct Track {
    int64_t last_sent_ns = 0;
    bool sent_once = false;
    uint64_t stuck_sent_for = 0;  // ordinal already sent promptly as stuck
    // The previous drain's view, to time completed collectives.
    bool have_prev = false;
    int64_t prev_now_ns = 0;
    uint64_t prev_completed = 0;
    int64_t prev_oldest_since_ns = 0;  // 0: nothing was in flight (or unknown)
    // The oldest incomplete collective as last read (kept if its ring entry is overwritten).
    uint64_t cached_ordinal = 0;
    int64_t cached_since_ns = 0;
    uint64_t cached_seq = 0;
    uint8_t cached_func = kSentinelFuncUnknown;
    InFlightSignature cached_sig;
    // Longest in-flight time of a completed collective, decaying from recent_at_ns.
    int64_t recent_ns = 0;
    int64_t recent_at_ns = 0;
    uint64_t epoch = 0;
  };

  int64_t Threshold(const Track& t, int64_t now_ns) const;
  static int64_t Decayed(const Track& t, int64_t now_ns, int64_t half_life_ns);

  InFlightMonitorOptions options_;
  std::map<std::pair<uint64_t, int32_t>, Track> tracks_;
  uint64_t epoch_ = 0;
};

}  // namespace sentinel::plugin
