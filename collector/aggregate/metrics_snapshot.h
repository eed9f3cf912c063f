// What /metrics renders (prometheus_text.h), as plain data: the aggregator's reader copies it
// under the lock (TakeMetricsSnapshot) and the series budget (metrics_select.h) and the text are
// computed from it after the lock is released, so a scrape holds ingest back only for the copy.
// Like snapshot.h, one of the few aggregate/ headers export/ may include.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collector/aggregate/baseline_store.h"
#include "collector/aggregate/counters.h"
#include "collector/aggregate/gpu_activity.h"
#include "collector/aggregate/hang_detector.h"
#include "collector/aggregate/net_links.h"
#include "collector/aggregate/slow_cause.h"
#include "collector/aggregate/stats.h"
#include "collector/aggregate/time_breakdown.h"
#include "collector/base/alert_kind.h"
#include "collector/nic/nic_counters.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

struct State;

// The job's collectives beside the latest fabric baseline (baseline_export.h).
struct BaselineSnapshot {
  struct Busbw {  // one joined collective with a known bus bandwidth
    uint8_t func = 0;
    uint64_t bytes = 0;
    double busbw_gbps = 0;
  };
  std::vector<Busbw> busbw;                  // those that ended in the window, oldest first
  std::optional<BaselineStore::Run> latest;  // BaselineStore::latest()
};

// The collectives that ended at or after `since_mono_ns` and the latest baseline run. Call with
// the aggregator's lock held.
BaselineSnapshot TakeBaselineSnapshot(const State& state, int64_t since_mono_ns);

struct MetricsSnapshot {
  struct Comm {
    uint64_t hash = 0;
    uint32_t uid = 0;  // its owner's kernel uid: (uid, hash) names it (CommKey)
    int32_t nranks = 0;
    std::string name;
    size_t local_ranks = 0;  // CommState::members
    int active_count = 0;
    int64_t last_activity_mono_ns = 0;
    int64_t ended_mono_ns = 0;
    std::array<std::array<uint64_t, kSizeBuckets>, kFuncSlots> joined_by_func_bucket{};
    std::array<Histogram, kSizeBuckets> skew;
  };
  struct Rank {
    uint64_t comm_hash = 0;
    uint32_t uid = 0;  // its communicator's owner
    int32_t rank = 0;
    int32_t nranks = 0;
    bool active = true;
    bool has_seq = false;
    uint64_t last_seq = 0;
    std::array<uint64_t, kFuncSlots> count_by_func{};
    InFlightView inflight;
    // Since when its process has been inside a started, incomplete collective of another
    // communicator wholly on this node (0: not); the node-spanning ones are in `inflight`.
    int64_t inside_local_since_ns = 0;
    // The collective of another communicator, on this node or spanning nodes, its process has been
    // inside the longest (kernel started, not completed): the communicator, the collective's
    // ordinal and since when (all 0: none). Exported for the job-wide wait-cycle rule.
    uint64_t waiting_in_comm = 0;
    uint64_t waiting_in_ordinal = 0;
    int64_t waiting_in_since_ns = 0;
    Histogram lateness;
    Histogram clock_free;
    std::array<std::optional<Histogram>, kSizeBuckets> duration;  // the buckets it has
    // Over its recent window (wait_evidence.h): p50 of its collectives' duration and of its
    // compute segment, in ns; -1 while the window holds too few collectives.
    double recent_duration_p50_ns = -1;
    double recent_segment_p50_ns = -1;
    // While a straggler alert names the rank late: the cause judged (LateCauseName), else empty.
    std::string late_cause;
  };
  // A rank a process fed, as the series budget weighs it (metrics_select.h).
  struct RankRef {
    uint64_t comm_hash = 0;
    uint32_t uid = 0;
    int32_t nranks = 0;
    bool active = false;
    int32_t nnodes = 0;  // its communicator's nodes (CommState::nnodes, from the init record)
  };
  struct Process {
    int client = -1;
    uint32_t uid = 0;  // its kernel uid (SO_PEERCRED)
    bool connected = false;
    bool has_rank = false;       // PrimaryRank (state_order.h) found one
    int32_t rank = 0;            // its primary rank when has_rank
    std::vector<RankRef> ranks;  // the ranks it fed that are still known, with their comm
    bool has_heartbeat = false;
    SentinelWireHeartbeat heartbeat{};
    double overhead_ratio = -1;
    bool has_gpu_window = false;
    SentinelWireGpuWindow gpu_window{};
    GpuPrometheusInput gpu;
    // Where its time went (time_breakdown.h), under its primary rank's communicator.
    uint64_t primary_comm = 0;
    TimeBreakdownInput time;
  };
  struct NicPort {
    std::string device;
    int port = 0;
    uint32_t present = 0;  // NicPortReading::present
    std::array<uint64_t, kNicCounterCount> total{};
    double rate_gbps = 0;
    bool active = false;
  };

  std::string host;
  int64_t now_mono_ns = 0;  // as of the last tick
  Counters counters;
  size_t hang_suspects = 0;
  std::vector<AlertKind> firing;  // the kind of every firing alert
  std::vector<NicPort> nic;       // by (device, port)
  // In the aggregator's hash-map order: the renderers sort (after the lock).
  std::vector<Comm> comms;
  std::vector<Rank> ranks;
  std::vector<Process> processes;
  BaselineSnapshot baseline;  // over the whole kept window
  NetLinks net;
  SlowCauseSnapshot slow;  // why collectives were slow (slow_cause.h)
};

// Copies what /metrics shows of `state`. Call with the aggregator's lock held (inside
// Aggregator::Read); everything else happens after.
MetricsSnapshot TakeMetricsSnapshot(const State& state);

// Orders shared by the State listings (state_order.h) and the snapshot renderers.
// A process's primary rank (PrimaryRank; the /metrics series budget), over any type with
// `nnodes` (its communicator's node count, 0 when not known), `nranks` and `comm_hash`
// (PrimaryRankKey, MetricsSnapshot::RankRef): a communicator spanning more than one node first,
// then the largest, then the lowest communicator hash. Spanning first because the job-wide rules
// judge only the ranks /metrics carries, and only such a communicator's ranks wait for peers on
// other nodes: with 8 GPUs per node and tensor parallel inside it, the node-local TP communicator
// is often the largest, and by size alone no data- or pipeline-parallel rank would be exported.
template <typename R>
bool PrimaryRankBefore(const R& a, const R& b) {
  const bool a_spans = a.nnodes > 1;
  const bool b_spans = b.nnodes > 1;
  if (a_spans != b_spans) return a_spans;
  return a.nranks > b.nranks || (a.nranks == b.nranks && a.comm_hash < b.comm_hash);
}
// What PrimaryRankBefore weighs of a rank held in State (RankState has no node count: it is its
// communicator's).
struct PrimaryRankKey {
  int32_t nnodes = 0;
  int32_t nranks = 0;
  uint64_t comm_hash = 0;
};
// The listing order of ranks (SortedRanks; /metrics): by communicator hash, its owner's uid, then
// rank.
template <typename R>
bool RankListedBefore(const R* a, const R* b) {
  if (a->comm_hash != b->comm_hash) return a->comm_hash < b->comm_hash;
  return a->uid != b->uid ? a->uid < b->uid : a->rank < b->rank;
}

// The listing order of processes (SortedProcesses; /metrics, /v1/ranks), over any type with
// `has_rank` (a primary rank exists), `rank` (that rank) and `client`: by primary rank, those
// without one last, then client id.
template <typename P>
bool ProcessListedBefore(const P& a, const P& b) {
  const int32_t xa = a.has_rank ? a.rank : INT32_MAX;
  const int32_t xb = b.has_rank ? b.rank : INT32_MAX;
  return xa != xb ? xa < xb : a.client < b.client;
}

// The age of a rank's oldest incomplete collective at `now_mono_ns` (0 when none).
double InFlightAgeSeconds(int64_t now_mono_ns, const InFlightView& v);

// Whether the rank's process has been inside another communicator's collective (its kernel
// started, not completed) for at least HangParams::elsewhere_ns at `now_mono_ns`: a node-spanning
// one as the last hang evaluation found it (hang role waiting_elsewhere; the aggregator keeps
// InFlightView's inside_elsewhere_* on the rank), or one wholly on this node (stuck there, it
// waits for that communicator's own culprit, which its hang alert names), or any other one its
// in-flight states show it inside (InFlightWaitingIn: a node-spanning one no hang evaluation of
// this node has judged, as in a wait cycle across nodes). Either way a hang on this communicator
// is not its doing; the job-wide hang rule skips it (a cycle is named by its own rule).
bool InFlightWaitingElsewhere(int64_t now_mono_ns, const MetricsSnapshot::Rank& r);

// Whether the rank's oldest incomplete collective has been in flight for HangParams::elsewhere_ns
// (5 s) or more at `now_mono_ns`: far past any step's collective. Only then are its signature and
// position exported (sentinel_inflight_stuck_*): no series while the job runs.
bool InFlightStuck(int64_t now_mono_ns, const InFlightView& v);

// Whether the rank's process has sat in another communicator's collective (kernel started, not
// completed) for HangParams::elsewhere_ns or more (waiting_in_*): exported for the job-wide
// wait-cycle rule (sentinel_inflight_waiting_in).
bool InFlightWaitingIn(int64_t now_mono_ns, const MetricsSnapshot::Rank& r);

// The stuck collective as /metrics exports it (sentinel_inflight_stuck_signature and _op_bytes),
// as plain values: export/ renders them and never computes a signature itself.
struct StuckOpExport {
  uint64_t digest = 0;  // SignatureDigest (op_signature.h): equal on every node for one operation
  uint8_t func = kSentinelFuncUnknown;
  std::string datatype;         // "bf16" (ShortDatatypeName); empty when unknown
  std::optional<int32_t> root;  // -1 or absent: not a rooted operation
  uint64_t bytes = 0;           // 0 when unknown
};
StuckOpExport StuckOpOf(const InFlightView& v);

}  // namespace sentinel::collector
