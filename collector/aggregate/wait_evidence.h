// Clock-free evidence of who the job waits for, computed by one node from its own ranks alone,
// in every communicator whatever its number of local ranks (one rank per node included).
//
// A collective ends at nearly the same instant on every rank, so the time a rank spends inside it
// is (the wait for the last rank to arrive) + (the transfer). The rank the others wait for barely
// waits; the others wait for it. Per communicator and message-size bucket the transfer floor is a
// low quantile of what the node's ranks measured; a rank's *wait* in a collective is its duration
// above that floor. Its *remote wait* is the part after the last local rank arrived (the local
// ranks share one clock, so that part is exact): what the node waited for the other nodes, the
// same for every local rank. Its *compute segment* is the time from the end of its previous
// collective on the communicator to its arrival at this one (its own clock), less the time its
// process spent inside its other communicators' collectives in between (InsideOtherCollectives):
// a rank of a data-parallel communicator also waits in the pipeline and tensor-parallel
// collectives between two of its all-reduces, and a node behind a slow pipeline peer would
// otherwise look as if it computed more slowly while it only waited.
//
// Per rank, over a short recent window (the last `window` collectives, none older than
// `window_ns`), the p50 of the duration, the wait, the segment and the wait as a share of the
// segment, and the p75 of the remote wait (with two nodes a node is the last one to arrive half the
// time, so its median wait is 0 even while it usually waits for the other). The floor is this
// node's: it cannot tell a transfer from a wait that never varies (a peer always late by the same
// amount), so across nodes the job-wide rules compare the raw duration p50s instead (the rank the
// others wait for has the shortest). Also the mean and standard deviation of the remote wait (each
// capped at 4 times the window's p75). After `learn` collectives these figures are the rank's
// *usual* (then an EWMA of them: below).
//
// The usual is *held* (does not move) while the segment p50 is over it by more than rel / 2 (more
// than the noise of a p50: the bar SlowingOrFlagged and the onset use): a *spell*. During a spell
// the remote waits of its collectives are summed (each capped at 4 times the usual p75), so the
// evidence of the spell grows as it lasts. A rank is flagged a *non-waiter* (one its communicator
// waits for) when
//   - its compute segment p50 grew by at least `rel` over its usual (it computes more slowly), and
//   - the node waits less: the mean remote wait over the spell (at least `min_recent` collectives)
//     fell below the usual mean by more than `fall_z` (3) standard errors (the usual standard
//     deviation over the root of the spell's length), and by at least `fall_share` (a quarter) of
//     what the growth can take off it (the growth, or the whole usual mean where that is smaller),
//     or its p75 collapsed to a quarter of the usual (a node many others wait for); or, early in
//     the spell, the p75 collapsed and the recent window's mean fell by `fall_z` standard errors
//     (its older collectives may predate the slowdown, which only dilutes the fall). The wait need
//     not collapse: with two nodes and jitter of the order of the slowdown the slow node still
//     waits now and then, and the transfer's own spread above the floor stays in the figure (a
//     live +10 % node waited 2.32 ms p75, then 0.90 ms: never a quarter), and
//   - its usual remote wait p75 was at least rel / 16 of its usual segment (the node usually waits
//     for peers: a node that never waited cannot wait less, and then only the job-wide rules,
//     which compare the nodes, can tell; it flags nothing rather than guess).
// A job-wide slowdown (every rank computes longer) leaves the waits as they were or longer (the
// jitter grows with the compute); another node slowing makes this one wait more, its compute
// unchanged; a one-off hiccup or a whole-job pause moves one collective, not a p50; a local rank
// whose local peers slowed waits longer, its compute unchanged. All thresholds are shares of the
// rank's own figures, never absolute times. It clears when the segment is back within rel / 2 of
// the usual or the window's mean wait is back at the usual mean (hysteresis). `since_seq` is the
// first collective of the slow run (the oldest point from which at least 3/4 of the recent
// collectives look slow), so alerts say "since collective #N".
//
// Outside spells and flags the usual follows slow changes of the job as an EWMA of the window's
// figures (rate `usual_rate` per refresh); the usual wait p75 rises 16 times more slowly than it
// falls (a spell of waiting more, a slow link or another node's hiccups, must not teach the node
// that it usually waits, or its end would read as "waits less"). A held usual never absorbs a
// slowdown while the evidence is undecided (the EWMA used to: it followed a live +10 % node within
// a minute while its wait, down by 60 %, had not reached the old bar of a quarter). A spell ends
// when the segment comes back within rel / 2 (the EWMA resumes), with a flag, or by re-learning the
// usual from the window's figures at once when
//   - after at least a window's worth of the spell the node waits more than it used to, by a
//     standard error of the spell's mean (the whole communicator moved together: a new phase of
//     the job, every node slower, its jitter and so the waits growing with the step), or
//   - the spell has lasted `relearn` collectives of the rank without a verdict (a legitimate change
//     of the step whose wait evidence stays undecided, e.g. a new phase with less jitter): the new
//     step is the usual and the node says nothing of it (`relearned` counts these).
//
// The node-level judgement (JudgeNode) says "slow node" when every process of the node that has a
// judged rank in a communicator spanning other nodes is flagged in one of them, or at least one is
// and every other one *leans* (Leaning: its compute grew by rel and it waits less than usual over
// its spell, not yet beyond the noise): the evidence of one process, beyond its noise, and the same
// direction in all the others. The communicators of one node decide at different instants (each
// has its own noise); waiting for the last one to clear its bar alone named the node seconds late,
// its flagged ranks first as slow ranks. Otherwise it names the flagged ranks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sentinel::collector {

struct WaitParams {
  double rel = 0.05;                   // smallest relative slowdown worth naming
  size_t window = 64;                  // recent collectives per rank (the p50s)
  int64_t window_ns = 10'000'000'000;  // ... none older than this (collector time)
  size_t min_recent = 8;               // judged only with this many recent collectives
  int learn = 64;                      // collectives per rank that only learn its usual
  size_t floor_samples = 128;          // durations per size bucket kept for the transfer floor
  double floor_quantile = 0.1;         // the floor: this quantile of them
  int64_t floor_ns = 50'000;           // smallest segment counted (clock noise, straggler-min)
  double usual_rate = 1.0 / 64;        // EWMA rate of the usual, per refresh of the p50s
  int refresh_every = 4;               // the p50s are recomputed every this many collectives
  // ... and at most once per this much collector time (0: no bound): a rank at thousands of
  // collectives a second would otherwise sort its window hundreds of times a second. The usual's
  // EWMA then takes the collectives since the last refresh as that many refresh_every steps, so
  // it follows the job per collective as before; only the judgement waits up to this long.
  // The transfer floor is bounded the same way: recomputed once 8 durations came since and this
  // much collector time passed, or floor_samples came (a whole ring's worth).
  int64_t refresh_min_ns = 0;
  int relearn = 512;  // a usual held (undecided) this many collectives re-learns from the p50s
  double fall_share = 0.25;  // the wait fell by at least this share of what the growth takes off
  double fall_z = 3;         // ... and by this many standard errors of its spell's mean
  // The host's time scale (sentineld's straggler-evidence): the usual is learned over at least
  // this much compute, and a spell is judged (flagged, or re-learned) only once it spans this
  // much, unless the segment grew by half or more: a loaded host's turns at short steps last
  // seconds. 0: counted in collectives only.
  int64_t min_spell_ns = 0;
};

// One rank in one joined collective.
struct WaitObservation {
  int member = 0;            // local index in the communicator
  int64_t arrival_ns = -1;   // GPU start (the node's clock); -1 unknown (not judged)
  int64_t duration_ns = -1;  // GPU start to end; -1 unknown (not judged)
  int64_t segment_ns = -1;   // arrival - end of its previous collective here; -1 unknown
};

struct WaitRankState {
  struct Entry {
    int64_t at_ns = 0;  // collector time of the collective's join
    uint64_t seq = 0;
    int64_t duration_ns = 0;
    int64_t wait_ns = 0;
    int64_t remote_wait_ns = 0;
    int64_t segment_ns = 0;
  };
  std::vector<Entry> ring;  // the last `window` collectives, oldest at `head` once full
  size_t head = 0;
  uint64_t observed = 0;            // collectives with a duration and a segment
  uint64_t refreshed_observed = 0;  // `observed` at the last refresh of the p50s
  int64_t refreshed_at_ns = 0;      // collector time of that refresh
  double refresh_steps = 1;         // refresh_every steps the last refresh stood for (the EWMA's)
  uint64_t first_seq = 0;
  // The p50s over the recent window (valid when recent_n >= min_recent).
  size_t recent_n = 0;
  double duration_p50_ns = 0;  // the raw duration (comparable across nodes: job-wide rules)
  double wait_p50_ns = 0;
  double remote_wait_p75_ns = 0;  // p75, see above
  // The remote wait's mean and standard deviation over the window, each wait capped at 4 times the
  // window's p75 (a peer's one-off hiccup is not a usual wait).
  double remote_wait_mean_ns = 0;
  double remote_wait_sd_ns = 0;
  double segment_p50_ns = 0;
  // The compute per collective, weighted by compute (the mean segment, each capped at 8 times the
  // median of the window's compute segments so that a whole-job pause counts as a few steps):
  // with several collectives back to back in a step the p50 is the floor, this is the step's
  // compute over its collectives.
  double segment_mean_ns = 0;
  double wait_share_p50 = 0;
  // The usual (learned, then an EWMA of the p50s while not flagged and not held).
  bool has_usual = false;
  double usual_wait_ns = 0;  // the remote wait's
  double usual_segment_ns = 0;
  double usual_wait_mean_ns = 0;  // the remote wait's mean and standard deviation
  double usual_wait_sd_ns = 0;
  bool held = false;       // the usual is held (undecided: see above)
  uint64_t held_from = 0;  // `observed` when it was first held in the current spell
  uint64_t relearned = 0;  // times a held usual re-learned from the p50s
  // The remote waits (each capped at 4 times the usual p75) of the collectives since the usual was
  // held: the evidence of the spell, whose standard error shrinks as it lasts.
  uint64_t spell_n = 0;
  double spell_wait_sum_ns = 0;
  double spell_compute_ns = 0;    // the segments of the spell, each at most 8 usual ones
  uint64_t spell_onset_seq = 0;   // the slowdown's first collective, found as the spell began
  double learned_compute_ns = 0;  // the segments seen before the usual was learned
  // The judgement.
  bool flagged = false;
  uint64_t since_seq = 0;     // first collective of the slow run (when flagged)
  int64_t flagged_at_ns = 0;  // collector time it was flagged (when flagged)
  int64_t last_at_ns = 0;     // collector time of its newest collective
  bool changed = false;       // flagged or cleared at the last Observe
};

// One communicator's evidence on this node.
class WaitEvidence {
 public:
  explicit WaitEvidence(const WaitParams& params) : params_(params) {}

  // One joined collective: its sequence number, size bucket (any small integer), the collector
  // time `now_ns` and the local ranks' figures. Ranks with an unknown duration or segment are
  // skipped.
  void Observe(const std::vector<WaitObservation>& obs, uint64_t seq, int bucket, int64_t now_ns);
  // Forgets the judgements (the communicator ended); the usual stays.
  void Reset();

  const WaitRankState* rank(int member) const {
    return member >= 0 && static_cast<size_t>(member) < ranks_.size()
               ? &ranks_[static_cast<size_t>(member)]
               : nullptr;
  }
  size_t size() const { return ranks_.size(); }
  // True when the rank has a usual and a full enough recent window to be judged.
  bool Judged(int member) const;
  // The transfer floor of `bucket` (ns); -1 before any duration.
  int64_t floor_ns(int bucket) const;
  const WaitParams& params() const { return params_; }

 private:
  struct Floor {
    std::vector<int64_t> ring;
    size_t head = 0;
    uint64_t added = 0;
    uint64_t computed_at = 0;    // `added` when `value` was last computed
    int64_t computed_at_ns = 0;  // ... and the collector time then
    int64_t value = -1;
  };
  void Refresh(WaitRankState* st, int64_t now_ns);
  void Judge(WaitRankState* st);
  void Relearn(WaitRankState* st) const;
  uint64_t Onset(const WaitRankState& st) const;

  WaitParams params_;
  std::vector<WaitRankState> ranks_;
  std::vector<Floor> floors_;  // by size bucket
  std::vector<int64_t> scratch_;
  std::vector<int64_t> scratch_seg_;
  std::vector<int64_t> scratch_remote_;
  std::vector<int64_t> scratch_dur_;
  std::vector<double> scratch_d_;
};

// The time within [from_ns, to_ns) that a rank's collectives in `history` (one communicator's,
// joined in order) cover, on the node's clock: for the compute segment of the same process in
// another communicator. Reads from the newest sample back, and stops at the first that ended
// before `from_ns` or after `max_samples` samples (the collectives of one segment are few).
// `History` is a Ring<RankSample> (its size(), operator[] with 0 the oldest, and the samples'
// arrival_ns and duration_ns, -1 unknown).
template <typename History>
int64_t InsideOtherCollectives(const History& history, int64_t from_ns, int64_t to_ns,
                               size_t max_samples = 64) {
  if (to_ns <= from_ns) return 0;
  int64_t inside = 0;
  const size_t n = std::min(history.size(), max_samples);
  for (size_t k = 0; k < n; ++k) {
    const auto& s = history[history.size() - 1 - k];
    if (s.duration_ns < 0) continue;
    const int64_t end = s.arrival_ns + s.duration_ns;
    if (end <= from_ns) break;
    const int64_t lo = std::max(s.arrival_ns, from_ns);
    const int64_t hi = std::min(end, to_ns);
    if (hi > lo) inside += hi - lo;
  }
  return std::min(inside, to_ns - from_ns);
}

// The node's judgement over its ranks in every communicator.
struct WaitRankRef {
  uint64_t comm = 0;
  int rank = 0;
  int process = 0;           // any id of the rank's process (the client)
  bool spans_nodes = false;  // the communicator has ranks on other nodes
  bool judged = false;
  bool flagged = false;
  bool leaning = false;  // not flagged, but Leaning (below)
};

struct NodeVerdict {
  bool slow_node = false;       // every judged process of the node is flagged (or leaning)
  std::vector<size_t> flagged;  // indices (into the input) of the flagged ranks
  size_t processes = 0;         // processes with a judged cross-node rank
};

NodeVerdict JudgeNode(const std::vector<WaitRankRef>& ranks);

// True when the rank is flagged or on its way: its compute segment is already rel / 2 over its
// usual. While every process of a node is, a whole slow node is forming (its ranks cross the bars
// one after another) and the node verdict, not a slow rank, is the one to expect.
bool SlowingOrFlagged(const WaitRankState& st, double rel);

// True when the rank is not flagged but its evidence leans that way: its usual is held, its
// segment is at least rel over it, and its mean remote wait over the spell is below its usual mean.
bool Leaning(const WaitRankState& st, double rel);

}  // namespace sentinel::collector
