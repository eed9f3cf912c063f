// Plain-data snapshots of the aggregator's state, the only part of aggregate/ that export/ may
// include (scripts/check_collector_layering.py). The aggregator's reader fills one under
// the lock (TakeTraceSnapshot) and the renderer formats it after the lock is released, so a
// renderer never sees State and a slow rendering never holds the ingest thread back.
//
// /v1/trace renders from TraceSnapshot, /metrics from MetricsSnapshot (metrics_snapshot.h),
// /v1/healthz and /v1/alerts from HealthSnapshot and TakeAlerts, /v1/ranks and /v1/telemetry from
// RanksSnapshot and TelemetrySnapshot (api_snapshot.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collector/aggregate/alert_book.h"
#include "collector/aggregate/gpu_activity.h"
#include "collector/aggregate/stats.h"

namespace sentinel::collector {

struct State;

// A communicator's identity: its owner's kernel uid and its hash. Hashes are public and a split
// child's is computable, so two users' communicators never share state, whatever hashes they
// claim: each user's announcement makes that user's own communicator.
struct CommKey {
  uint32_t uid = 0;
  uint64_t hash = 0;
  bool operator==(const CommKey& o) const { return uid == o.uid && hash == o.hash; }
  bool operator!=(const CommKey& o) const { return !(*this == o); }
  bool operator<(const CommKey& o) const { return uid != o.uid ? uid < o.uid : hash < o.hash; }
  template <typename H>
  friend H AbslHashValue(H h, const CommKey& k) {
    return H::combine(std::move(h), k.uid, k.hash);
  }
};
// One rank of one communicator.
using RankKey = std::pair<CommKey, int32_t>;

// One rank's completed operation, kept for percentiles and traces.
struct RankSample {
  uint64_t seq = 0;
  uint64_t bytes = 0;
  int64_t arrival_ns = 0;      // gpu_start_ns when valid, else enqueue_ns
  int64_t duration_ns = -1;    // gpu_end - gpu_start, -1 unknown
  int64_t lateness_ns = -1;    // arrival - earliest local arrival, -1 unknown (p2p, unjoined)
  int64_t clock_free_ns = -1;  // (longest local duration) - own duration
  uint8_t func = 0;
  uint8_t algo = 0;
  uint8_t proto = 0;
  uint8_t nchannels = 0;
};

// A collective some local ranks reached and others did not, past the hang timeout.
struct HangSuspect {
  uint64_t comm_hash = 0;
  uint32_t uid = 0;  // the communicator's owner
  uint8_t func = 0;
  uint64_t seq = 0;
  std::vector<int> arrived;
  std::vector<int> missing;
  int64_t waiting_ns = 0;
};

std::string CommLabel(uint64_t comm_hash);  // "0x%016x"

// What the trace (/v1/trace, trace_json.h) shows.
struct TraceSnapshot {
  struct Rank {
    uint64_t comm_hash = 0;
    int32_t rank = 0;
    uint32_t pid = 0;
    uint32_t uid = 0;                 // its process's (and communicator's owner's) kernel uid
    std::vector<RankSample> samples;  // oldest first, only those that started in the window
  };
  struct Process {
    uint32_t pid = 0;
    uint32_t uid = 0;
    bool has_rank = false;  // it fed a rank still known
    int32_t rank = -1;      // its primary rank (state_order.h's PrimaryRank) when has_rank
    // Its CUPTI activity, copied only when a window or kernel ends inside the trace window:
    // nothing to draw otherwise, and the rings are ~80 KiB a process.
    std::unique_ptr<GpuActivity> gpu;
  };
  std::string host;
  int64_t start_real_ns = 0;
  int64_t start_mono_ns = 0;
  std::vector<Rank> ranks;         // by (communicator, rank)
  std::vector<Alert> alerts;       // straggler and hang alerts, in the alert book's order
  std::vector<HangSuspect> hangs;  // as of the last tick
  std::vector<Process> processes;  // by primary rank, then client id
};

// What /v1/healthz shows.
struct HealthSnapshot {
  std::string host;
  int64_t start_real_ns = 0;
  int64_t start_mono_ns = 0;
  uint64_t clients_connected = 0;
  uint64_t records = 0;
};

// Copies what /v1/healthz shows. Call with the aggregator's lock held.
HealthSnapshot TakeHealthSnapshot(const State& state);
// Copies every alert of the book (/v1/alerts), in the book's order. Call with the lock held.
std::vector<Alert> TakeAlerts(const State& state);

// Copies what the trace shows of `state`: the samples that started at or after `since_ns`. Call
// with the aggregator's lock held (inside Aggregator::Read).
TraceSnapshot TakeTraceSnapshot(const State& state, int64_t since_ns);

}  // namespace sentinel::collector
