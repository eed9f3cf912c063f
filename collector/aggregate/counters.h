// The aggregator's running counters (sentinel_*_total on /metrics): plain data, kept in State and
// copied whole into MetricsSnapshot (metrics_snapshot.h), so export/ reads them without State.
#pragma once

#include <cstdint>

namespace sentinel::collector {

struct Counters {
  uint64_t clients_accepted = 0;
  uint64_t clients_connected = 0;
  uint64_t refused_uid = 0;
  uint64_t refused_major = 0;
  uint64_t refused_bad_hello = 0;
  uint64_t refused_too_many = 0;
  uint64_t refused_hello_timeout = 0;  // no hello in time, or evicted for a client that said it
  uint64_t refused_uid_share = 0;      // the uid held its share of --max-clients
  uint64_t refused_evicted = 0;        // closed for a uid below its fair share of a full table
  uint64_t malformed = 0;
  uint64_t frames = 0;
  uint64_t records = 0;
  uint64_t records_invalid = 0;
  uint64_t records_duplicate = 0;
  uint64_t unknown_skipped = 0;
  uint64_t joined = 0;
  uint64_t late_joins = 0;
  // Evictions, by what was evicted (sentinel_evicted_total{what}).
  uint64_t evicted_pending = 0;      // in-flight joins given up (window overrun, or ranks dropped)
  uint64_t evicted_too_old = 0;      // records for a seq whose slot was reused
  uint64_t evicted_samples = 0;      // per-rank history overwritten
  uint64_t evicted_collectives = 0;  // telemetry summaries overwritten
  uint64_t evicted_ranks = 0;
  uint64_t evicted_comms = 0;
  uint64_t evicted_processes = 0;
  uint64_t evicted_alerts = 0;
  uint64_t record_log_bytes = 0;
  uint64_t record_log_rotations = 0;
  // Frames refused for ownership and bounds (sentinel_frames_refused_total{reason}).
  uint64_t refused_not_owner = 0;   // a rank or communicator another client (or uid) owns
  uint64_t refused_rank_index = 0;  // a rank index or size that does not fit the communicator
  uint64_t refused_budget = 0;      // over the client's uid budget
  uint64_t alerts_refused = 0;      // over the firing-alert bounds (per client, in total)
  uint64_t alert_pushes = 0;
  uint64_t alert_push_failures = 0;
};

}  // namespace sentinel::collector
