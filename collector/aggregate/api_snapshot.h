// What /v1/ranks and /v1/telemetry render (api_json.h), as plain data: the aggregator's reader
// copies it under the lock (TakeRanksSnapshot, TakeTelemetrySnapshot) and percentiles, sorting
// and JSON are computed from it after the lock is released, so a request holds ingest back only
// for the copy. Like snapshot.h, one of the few aggregate/ headers export/ may include.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collector/aggregate/counters.h"
#include "collector/aggregate/gpu_activity.h"
#include "collector/aggregate/hang_detector.h"
#include "collector/aggregate/metrics_snapshot.h"
#include "collector/aggregate/net_links.h"
#include "collector/aggregate/snapshot.h"
#include "collector/aggregate/time_breakdown.h"
#include "collector/nic/nic_counters.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

struct State;

// What /v1/ranks shows: one entry per process.
struct RanksSnapshot {
  struct Comm {  // a rank the process feeds (not one a newer connection took over)
    uint64_t comm_hash = 0;
    uint32_t uid = 0;  // the communicator's owner (its process's uid)
    int32_t rank = 0;
    int32_t nranks = 0;
    bool has_seq = false;
    uint64_t last_seq = 0;
    uint64_t collectives = 0;
    uint64_t p2p = 0;
    bool active = true;
    InFlightView inflight;
    // Its wait evidence over the recent window (wait_evidence.h); has_wait false while too few.
    bool has_wait = false;
    double duration_p50_ns = 0;
    double segment_p50_ns = 0;
    double usual_segment_ns = 0;  // 0 while not learned
    double remote_wait_p75_ns = 0;
    double usual_remote_wait_ns = 0;
    bool waited_for = false;  // flagged: the communicator waits for it
    uint64_t since_seq = 0;   // when flagged
  };
  struct SampleTimes {  // of one RankSample; -1 unknown
    int64_t lateness_ns = -1;
    int64_t clock_free_ns = -1;
    int64_t duration_ns = -1;
  };
  struct Process {
    int client = -1;
    uint32_t pid = 0;          // the kernel's (SO_PEERCRED)
    uint32_t uid = 0;          // the kernel's (SO_PEERCRED): whose job it is
    uint32_t claimed_pid = 0;  // what its hello said
    std::string host;
    std::string job_id;
    bool connected = false;
    std::vector<Comm> comms;  // in the order it fed them
    // Its primary rank (PrimaryRank, state_order.h), when it has one.
    bool has_rank = false;
    int32_t rank = 0;
    int32_t nranks = 0;
    bool has_seq = false;
    uint64_t last_seq = 0;
    uint64_t collectives = 0;
    bool straggler = false;
    // The primary rank's kept samples, oldest first, as copied: one allocation under the lock;
    // the unknown values are dropped and the percentiles taken after it.
    std::vector<SampleTimes> samples;
    bool has_gpu_window = false;
    int64_t gpu_window_overlap_ns = 0;
    int64_t gpu_window_nccl_ns = 0;
    GpuRankInput gpu;
    bool has_heartbeat = false;
    SentinelWireHeartbeat heartbeat{};
    double overhead_ratio = -1;
    // Where its time went (time_breakdown.h); its primary rank's communicator names it.
    uint64_t primary_comm = 0;
    TimeBreakdownInput time;
  };
  std::string host;
  int64_t now_mono_ns = 0;         // as of the last tick (in-flight ages)
  std::vector<Process> processes;  // in the aggregator's hash-map order: RanksJson sorts
};

// What /v1/telemetry shows over one window.
struct TelemetrySnapshot {
  struct Coll {  // a joined collective that ended in the window (CollSummary)
    uint64_t comm_hash = 0;
    uint32_t uid = 0;  // the communicator's owner
    int64_t skew_ns = 0;
    int64_t duration_ns = -1;
    int64_t latency_ns = -1;
    double busbw_gbps = -1;
  };
  std::string host;
  int64_t window_ns = 0;
  int64_t since_mono_ns = 0;      // now - window
  std::vector<Coll> collectives;  // oldest first
  // Per process, in the aggregator's hash-map order (the sums are order-sensitive doubles).
  std::vector<GpuTelemetryInput> gpu;
  uint64_t plugin_dropped = 0;     // heartbeat drops over every process
  int64_t gpu_window_overlap = 0;  // over the processes whose last window ended in the window
  int64_t gpu_window_nccl = 0;
  std::vector<HangSuspect> hang_suspects;
  Counters counters;
  NicWindow nic;
  BaselineSnapshot baseline;
  NetLinks net;
  SlowCauseSnapshot slow;  // why collectives were slow (slow_cause.h); spans since since_mono_ns
};

// What the plugin dropped, as a heartbeat counts it (every reason).
inline uint64_t HeartbeatDrops(const SentinelWireHeartbeat& hb) {
  return hb.records_dropped_ring + hb.events_dropped_pool + hb.events_dropped_threads +
         hb.records_dropped_sink;
}

// Copies what /v1/ranks shows of `state`. Call with the aggregator's lock held.
RanksSnapshot TakeRanksSnapshot(const State& state);
// Copies what /v1/telemetry shows over `window_ns` before `now_mono_ns`. Call with the lock held.
TelemetrySnapshot TakeTelemetrySnapshot(const State& state, int64_t window_ns, int64_t now_mono_ns);

}  // namespace sentinel::collector
