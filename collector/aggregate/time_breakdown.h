// Where a rank's time went: compute, communication, wait and host, per process (one GPU, its
// ranks in every communicator), from its CUPTI windows (gpu_activity.h) and the collectives the
// node joined; and whether the waiting points at a few ranks or is spread over all of them.
// Pure data + functions; the aggregator calls the hooks under its lock, the snapshots copy
// TimeBreakdownInput, the exporters render it.
//
// The four parts, in ns, summed over time (collector/README.md "GPU activity" for the windows):
//   For each CUPTI window of the process that was measured (status 0) and does not overlap a
//   window already counted (a hostile or replayed window is counted once), of length L:
//     compute       += compute_ns: the union of non-NCCL kernels, including the time they ran
//                      under an NCCL kernel (compute the communication was hidden behind);
//     exposed        = nccl_ns - overlap_ns: NCCL kernels with no compute running;
//     communication += exposed - placed, where placed = min(exposed, the wait below whose
//                      collectives arrived inside the window): the communication the compute did
//                      not hide, less the part of it spent waiting for late peers;
//     host          += idle_ns: no kernel at all running (the GPU waited for its host: input
//                      pipeline, storage, a checkpoint, Python);
//     the rest of L (memcpy/memset only) is in no part.
//   For each collective every active local rank reported (past the straggler warm-up, not thinned
//   by a plugin's overhead budget), and each of its local ranks with GPU times, the rank's wait:
//     local  = latest local arrival - its own arrival (exact: one clock on the node);
//     remote = when the communicator spans other nodes and its transfer floor is known, its end
//              - the latest local arrival - the floor, at least 0: what the node waited for the
//              other nodes. The floor is the least the wait evidence's floor (wait_evidence.h: a
//              low quantile of the time the node's ranks spent in the collective after the last
//              local rank arrived, over its last 128) has been for that size bucket (CommTime):
//              that floor follows a lasting wait (another node late by about the same amount at
//              every collective becomes its floor within 64 collectives), and the wait would
//              vanish into the communication. One node cannot tell a transfer that got slower
//              from a wait for another node: both count as wait here;
//     wait  += min(local + remote, its duration) x weight, where weight = 8 when a rank of the
//              communicator thins its records (budget levels 2 and 3 keep 1 collective in 8,
//              plugin/README.md "Overhead budget"), else 1.
//   A process's wait is the sum over all its ranks (communicators): its GPU spends that time
//   inside collectives whoever it waits in. The parts sum to the counted windows' time less the
//   memcpy-only time, plus any wait that lay outside exposed NCCL time (hidden under compute, or
//   in a window that was not measured); shares are taken over the sum of the parts.
//
// Unknown is never 0: without a measured CUPTI window (CUPTI off, another tool owns it, a foreign
// clock) compute, communication and host are unknown (gpu_known false: no series, JSON null);
// they stay unknown while the newest window is not measured. Without a joined collective with GPU
// times (KernelCh off) the wait is unknown (wait_known false). CUPTI is not thinned by the
// overhead budget: at levels 2 and 3 the windows are whole and the wait is the kept bursts' times
// the weight above.
//
// Whether the waiting points at a few ranks (JudgeWaiting): per rank its wait share (wait / the
// parts' sum; without CUPTI, wait / the wall time of the span); the reference is the 0.75 quantile
// of the shares (what the waiting ranks lose: with one slow node of two, half the ranks barely
// wait and the median would sit between the groups). A rank waits "for nobody" when its share is
// under half the reference: the one the others wait for arrives last and barely waits. One such
// rank: one bad rank; a few (at most a quarter of the ranks): a few bad ranks (named); none, or
// more than a quarter: the distribution widened (every rank is late now and then; no culprit,
// the tail grew). Below a reference of 5 % of the time the waiting is too small to judge. The
// job-wide rules (examples/prometheus/sentinel_rules.yml) apply the same bars across nodes and
// add "one bad node" (every rank of one node, and no other).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collector/base/ring.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

struct CommState;
struct State;
struct WaitObservation;

// The four parts, their order in every listing and their names in /metrics and the API.
enum class TimePart : uint8_t { kCompute = 0, kCommunication = 1, kWait = 2, kHost = 3 };
inline constexpr int kTimeParts = 4;
const char* TimePartName(TimePart part);

// Cumulative figures of one process (ns), and what of them is known.
struct TimeTotals {
  int64_t compute_ns = 0;
  int64_t communication_ns = 0;
  int64_t wait_ns = 0;
  int64_t host_ns = 0;
  int64_t measured_ns = 0;  // the counted CUPTI windows' length
  uint64_t steps = 0;       // steps that ended in the counted windows
  int64_t Part(TimePart part) const;
};

// A process's breakdown state (ProcessState::time).
struct ProcessTime {
  // Wait whose collectives arrived in one bucket of kPendingBucketNs, not yet set against a
  // window's exposed communication.
  struct Pending {
    int64_t bucket_start_ns = 0;
    int64_t wait_ns = 0;
  };
  struct Checkpoint {
    int64_t at_ns = 0;  // collector time
    TimeTotals totals;
  };
  static constexpr int64_t kPendingBucketNs = 100'000'000;
  static constexpr size_t kPendingBuckets = 64;  // 6.4 s of collectives ahead of the windows
  static constexpr int64_t kCheckpointEveryNs = 10'000'000'000;
  static constexpr size_t kCheckpoints = 7;  // the recent window spans 60-70 s

  TimeTotals totals;
  bool gpu_ever = false;               // some window was counted
  bool gpu_measured = false;           // ... and the newest window was measured
  bool wait_known = false;             // some joined collective gave this process a wait
  int64_t counted_end_ns = INT64_MIN;  // end of the newest counted window
  uint64_t windows_overlapping = 0;    // refused: they overlap a counted window
  int64_t wait_unplaced_ns = 0;        // pending wait dropped (too far ahead, or behind)
  std::deque<Pending> pending;         // by bucket, oldest first
  Ring<Checkpoint> checkpoints{kCheckpoints};
  int64_t first_at_ns = 0;  // collector time of its first figure (0: none yet)
  int64_t last_at_ns = 0;   // ... and of its newest
};

// A communicator's part (CommState::time): the least transfer floor seen per size bucket (-1:
// none yet).
struct CommTime {
  std::vector<int64_t> least_floor_ns;
  std::vector<int64_t> join_waits;  // JoinWaits' output, kept: no allocation per join
};

// One CUPTI window (already validated by IngestGpuWindow), at collector time `now_ns`.
void TimeOnGpuWindow(ProcessTime* t, const SentinelWireGpuWindow& w, int64_t now_ns);
// One wait of the process: `wait_ns` (weighted) in a collective it reached at `arrival_ns` (the
// node's CLOCK_MONOTONIC, the windows' clock).
void TimeOnWait(ProcessTime* t, int64_t arrival_ns, int64_t wait_ns, int64_t now_ns);

// The waits of one joined collective's local ranks (see above), one per observation in the same
// order; all -1 when some rank has no GPU times (its arrival is then an enqueue time, not
// comparable with the others' kernel starts). `floor_ns` < 0: the transfer floor is not known (no
// remote wait counted). The weight is not applied.
void JoinWaits(const std::vector<WaitObservation>& obs, bool spans_nodes, int64_t floor_ns,
               std::vector<int64_t>* waits);
inline std::vector<int64_t> JoinWaits(const std::vector<WaitObservation>& obs, bool spans_nodes,
                                      int64_t floor_ns) {
  std::vector<int64_t> waits;
  JoinWaits(obs, spans_nodes, floor_ns, &waits);
  return waits;
}
// The aggregator's hook: the waits of a completed join (its measured local ranks in `obs`), each
// weighted and added to its process (RankState::process); the communicator's least floor follows
// its wait evidence's. Call with the aggregator's lock held.
void TimeObserveJoin(CommState* comm, const std::vector<WaitObservation>& obs, int bucket,
                     int64_t now_ns);

// What the snapshots copy of one process: its totals, and its figures over the recent window
// (the totals less the oldest checkpoint, spanning span_ns of collector time up to `now_ns`, or
// up to its newest figure when that is later: the tick that sets `now_ns` may lag the ingest).
struct TimeBreakdownInput {
  bool gpu_known = false;   // compute, communication and host known (the newest window measured)
  bool wait_known = false;  // wait known
  TimeTotals totals;
  TimeTotals recent;
  int64_t recent_span_ns = 0;
};
TimeBreakdownInput TimeBreakdownInputOf(const ProcessTime& t, int64_t now_ns);

// The rank's wait share over the recent window: wait / the parts' sum when gpu_known, else wait
// / the span; false when the wait is unknown or nothing was measured.
bool RecentWaitShare(const TimeBreakdownInput& in, double* share);

// The verdict over the ranks' wait shares (see above).
enum class WaitVerdictKind : uint8_t {
  kNotEnoughData,  // fewer than 2 ranks with a known wait share
  kLittleWaiting,  // the reference share is under kWaitMatters
  kOneRank,
  kFewRanks,
  kWidened,
};
const char* WaitVerdictName(WaitVerdictKind kind);
struct WaitVerdict {
  WaitVerdictKind kind = WaitVerdictKind::kNotEnoughData;
  double reference_share = -1;   // the 0.75 quantile of the shares (-1: not enough data)
  std::vector<size_t> culprits;  // indices into the input, share under half the reference
};
inline constexpr double kWaitMatters = 0.05;
inline constexpr double kWaitReferenceQuantile = 0.75;
inline constexpr double kCulpritShareOfReference = 0.5;
inline constexpr double kFewRanksShare = 0.25;
// `shares` holds one wait share per rank (negative: unknown, left out).
WaitVerdict JudgeWaiting(const std::vector<double>& shares);

// /v1/ranks: a process's "time" object (figures over the recent window; unknown as null).
nlohmann::json TimeRankJson(const TimeBreakdownInput& in);
// /v1/ranks "breakdown": one object per uid over its processes. `who` names each process as
// {"rank", "comm", "pid"} for the culprits; both vectors in the same order.
struct TimeBreakdownRow {
  uint32_t uid = 0;
  nlohmann::json who;
  TimeBreakdownInput in;
};
nlohmann::json TimeBreakdownJson(const std::vector<TimeBreakdownRow>& rows);

}  // namespace sentinel::collector
