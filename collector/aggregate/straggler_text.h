// What a straggler alert says: figures measured on the rank, never the detector's internal
// statistics (those stay in the alert's evidence).
//
// Local ranks (one clock): the rank's lateness p50 over its recent collectives, in ms and as a
// share of the compute segment between collectives (the same p50 that `sentinelctl ranks` shows
// over the rank's history), and since when: "since the communicator started" only when the late
// run begins at the first collective the rank was judged in and the history still holds that
// collective, otherwise "since collective #N".
//
// Ranks whose peers are on other nodes (no common clock; wait_evidence.h): the rank's compute
// segment against its usual, and its wait inside collectives against its usual.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collector/aggregate/wait_evidence.h"

namespace sentinel::collector {

// One of the rank's joined collectives, oldest first.
struct LateSample {
  uint64_t seq = 0;
  int64_t lateness_ns = -1;  // arrival - earliest local arrival; -1 unknown (not counted)
  int64_t segment_ns = -1;   // the communicator's compute segment then; -1 unknown
};

struct LateFigures {
  bool valid = false;  // some sample with a lateness
  size_t samples = 0;  // collectives in the recent window with a lateness
  double lateness_p50_ms = 0;
  double segment_p50_ms = 0;  // 0 when no segment was known
  double share = 0;           // lateness p50 / segment p50 (0 without a segment); back to back:
                              // lateness mean / compute per collective
  double lateness_mean_ms = 0;
  // Several collectives back to back in a step (the segment p50 under half the compute per
  // collective): the figures are the step's, the mean lateness over the compute per collective.
  bool back_to_back = false;
  double compute_per_coll_ms = 0;  // the compute-weighted segment (0: not given)
  uint64_t since_seq = 0;          // the first collective of the late run
  bool since_start = false;        // ... and it is the first collective the rank was judged in
};

// The figures over the last `window` samples of `samples` (oldest first). `history_complete`:
// samples[0] is the first collective the rank was judged in (its history has not wrapped).
// A sample is late when its lateness is at least half the window's p50; the late run starts at
// the oldest sample from which at least 3/4 of the samples up to the newest are late.
// `from_seq` (when not 0): the window holds only the samples from that collective on (the start of
// the detector's evidence, so that at the moment an alert fires its p50 is over the late samples,
// not the on-time ones before them), unless fewer than 8 are; then the last `window`.
// `compute_per_coll_ns` (when > 0): the compute per collective weighted by compute
// (WaitRankState::segment_mean_ns of the other local ranks); when the segment p50 is under half of
// it the rank's collectives run back to back and the share is the mean lateness over it (a rank
// late before the first of three collectives per step is late by the same share of the step).
LateFigures MeasureLateness(const std::vector<LateSample>& samples, size_t window,
                            bool history_complete, uint64_t from_seq = 0,
                            double compute_per_coll_ns = 0);

// What the detector judged the rank on: its excess over the median local arrival since its
// evidence began, as a share of its compute segment and per collective (the detector's
// RelativeExcess). On a busy host a rank can be late by much more on average than its p50 shows
// (a few long delays), so the alert quotes both.
struct JudgedExcess {
  double share = -1;  // < 0: not given
  double ms_per_collective = 0;
  uint64_t since_seq = 0;
};

// The summary of a straggler among the local ranks (the node path).
// `structural`: the alert's pattern (late from the start as far as the node can tell); it picks the
// hint, while "since ..." always says what the figures say. `judged`: quoted when given and when
// its share differs from the p50's share by more than a quarter (else the p50 figures say it).
std::string LocalStragglerSummary(int rank, const std::string& comm, const LateFigures& f,
                                  bool structural, const JudgedExcess& judged = {});

// The summary of a rank its peers on other nodes wait for (wait_evidence.h), `nnodes` the number
// of nodes of the communicator when known (0: unknown).
std::string WaitStragglerSummary(int rank, const std::string& comm, int nnodes,
                                 const WaitRankState& st);

// One flagged rank of a slow node.
struct SlowNodeRank {
  std::string comm;
  int rank = 0;
  const WaitRankState* state = nullptr;
};
// The summary of a slow node: every process of `host` with a rank in a communicator spanning
// other nodes waits less (flagged or leaning); `ranks` the flagged ones (the first few are quoted).
std::string SlowNodeSummary(const std::string& host, size_t processes,
                            const std::vector<SlowNodeRank>& ranks);

}  // namespace sentinel::collector
