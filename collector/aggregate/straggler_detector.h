// Straggler detection for one communicator, independent of the time scale.
//
// For every joined collective, each local rank's *excess* is its lateness minus the median
// lateness of the other local ranks, and the collective's *compute segment* is the median, over
// the ranks, of the time from the end of each rank's previous collective on this communicator to
// its arrival at this one (what the ranks computed in between). A rank slowed by p % arrives
// p % of the segment late, whatever the segment's length.
//
// Evidence accumulates in a one-sided CUSUM per rank, in nanoseconds:
//   G = max(0, G + clip(excess) - k * segment),   k = rel / 2
// so that the sum over a step is (p - k) x (the step's compute) whatever the number of
// collectives in the step: a rank late at one collective of each step and on time at the others
// drifts up exactly like a rank late everywhere. The alarm threshold scales with the measured
// noise: for a random walk with drift -k*s and variance v per collective, P(G > h) ~
// exp(-2 k s h / v), so h = noise_h * v / (k * s) + floor_h * s keeps false alarms at
// exp(-2 noise_h) per rank and collective, and floor_h segments of pure excess are needed even
// without noise. Resolution runs the mirror CUSUM (evidence that excess < k * segment) to the
// same threshold with reference 3/4 rel, which is the hysteresis: a rank slowed by rel or more
// has a downward drift there, so the alert does not flap while the slowdown persists.
//
// Correlated noise: the threshold above holds for independent collectives. On a loaded host a
// rank that loses its CPU stays late for many consecutive collectives (a scheduler time slice, a
// load burst: tens of milliseconds to seconds, thousands of collectives at 1 ms steps), the ranks
// take turns, and the sum of a rank's scores over a run of collectives varies far more than the
// per-collective variance says: a noise-only rank then climbs any threshold built on v alone (the
// real-process soak, scripts/noise_soak.py, saw hundreds of false alerts per hour at 1-3 ms steps
// on a 2-core host). So v is also measured at the scale of runs: every rank's scores are summed
// over aligned blocks of B consecutive collectives (B = 8, 64, 512, 4096), and the squared
// difference of two consecutive block sums, over 2B, estimates the long-run variance per
// collective at that scale (a steady offset, a structural straggler, cancels in the difference).
// The median over the ranks (a straggler is one rank) enters an EWMA per scale, and the threshold
// uses the largest of the per-collective and per-scale estimates: for independent noise they
// agree, for correlated noise the CUSUM's random walk is as wide as its long-run variance.
// The scales above count collectives, so the one spanning a host's time scale (a second) is
// measured after anything from 2 to 16 s; a fifth scale counts compute instead (blocks of
// min_evidence_ns / 2), and until it has been measured twice (3 s of compute) a rank late by less
// than half its compute does not fire: the turns a loaded host takes in a job's first seconds.
// That estimate follows a load that starts beside the job only after a few blocks, so two more
// rules hold a rank back. It does not fire while a quarter or more of the other ranks (at least
// one) have half the threshold of evidence of their own: lateness spread over the ranks is the
// host's. And its late run must span min_evidence_ns of compute (the host's time scale, not the
// job's: longer than the soak saw a host keep one rank off its CPU), unless it was late by half
// its compute or more over the whole run (beyond the 10-25 % of ranks taking turns on a loaded
// host; a stall counts as at most one segment late), which a loaded host did not produce.
//
// Robustness (measured with detection_eval and on a loaded 2-core machine): clip() winsorizes at
// min(max(4 sigma, segment / 2), h / persist), and the summed score is the clipped excess minus
// the other ranks' mean clipped excess (one-sided delays have mean > median; this cancels it when
// the ranks share the noise). v is at least the variance of that score. A rank fires only when
// its excess since the evidence began is at least 3/4 rel of its compute.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sentinel::collector {

struct StragglerParams {
  double rel = 0.05;          // smallest relative slowdown worth an alert (k = rel / 2)
  double noise_h = 12.0;      // threshold in units of v / (k s)
  double floor_h = 2.0;       // ... plus this many compute segments
  int64_t floor_ns = 50000;   // clock-noise floor of a segment and of the clip
  double clip_sigmas = 4.0;   // excess clipped at max(clip_sigmas * sqrt(v), segment / 2) ...
  double persist = 4.0;       // ... and at threshold / persist: evidence from >= persist colls
  int learn = 32;             // judged collectives that only train the noise estimate
  int structural_clean = 64;  // this many consecutive quiet collectives make a rank "was clean"
  // The evidence must span this much compute (the segments since it began, a pause counted as at
  // most 8 usual segments) unless the rank is late by half its compute or more: see above.
  int64_t min_evidence_ns = 2'000'000'000;
};

// The long-run noise is also measured over blocks of the host's time scale: half of
// min_evidence_ns of compute per block, whatever the step (see "A loaded host" in
// collector/README.md). 0 when min_evidence_ns is 0 (no persistence asked for: no such scale).
inline int64_t HostBlockNs(const StragglerParams& p) { return p.min_evidence_ns / 2; }

enum class StragglerPattern : uint8_t {
  kStructural,  // slow since the communicator started (last pipeline stage, placement)
  kDegraded,    // on time first, then slow (throttling, noisy neighbour, degraded link)
};
const char* StragglerPatternName(StragglerPattern pattern);

inline constexpr int kStragglerBlockScales = 4;  // blocks of 8, 64, 512, 4096 collectives

struct StragglerRankState {
  double g_ns = 0;  // evidence of lateness
  double d_ns = 0;  // evidence of being on time (while firing)
  bool firing = false;
  bool ever_clean = false;
  int clean_run = 0;
  uint64_t judged = 0;
  uint64_t onset_seq = 0;      // seq at which G last left 0 (the start of the evidence)
  double onset_excess_ns = 0;  // excess and segments summed since onset (the evidence window)
  double onset_segment_ns = 0;
  double onset_compute_ns = 0;  // the segments since onset, pauses capped (persistence)
  double onset_late_ns = 0;     // the raw excess since onset, at most a segment per collective
  double mean_excess_ns = 0;    // EWMA of the excess (noise centring, evidence)
  double mean_score_ns = 0;     // EWMA of the clipped, peer-centred score (its variance)
  double mean_segment_ns = 0;   // EWMA of the segment seen with it
  StragglerPattern pattern = StragglerPattern::kDegraded;
  // Sums of the score over the current and the previous block of each scale (correlated noise).
  double block_sum_ns[kStragglerBlockScales] = {};
  double prev_block_sum_ns[kStragglerBlockScales] = {};
  bool has_prev_block[kStragglerBlockScales] = {};
  uint64_t block_epoch[kStragglerBlockScales] = {};  // the block its sum belongs to
  // The same over blocks of HostBlockNs of compute (the host's time scale).
  double host_block_sum_ns = 0;
  double prev_host_block_sum_ns = 0;
  bool has_prev_host_block = false;
  uint64_t host_block_epoch = 0;
};

enum class StragglerChange : uint8_t { kFired, kResolved };

struct StragglerEvent {
  int member = 0;  // local index in the communicator
  StragglerChange change = StragglerChange::kFired;
};

class StragglerDetector {
 public:
  explicit StragglerDetector(const StragglerParams& params) : params_(params) {}

  struct Observation {
    int member = 0;           // local index
    int64_t lateness_ns = 0;  // arrival - earliest local arrival
    int64_t segment_ns = -1;  // arrival - end of its previous collective here; -1 unknown
  };
  // One joined collective (>= 2 ranks). Appends fire/resolve transitions to `events`.
  void Observe(const std::vector<Observation>& obs, uint64_t seq,
               std::vector<StragglerEvent>* events);
  // Resolves every firing rank without evidence (the communicator ended).
  void Reset();

  const StragglerRankState* rank(int member) const {
    return member >= 0 && static_cast<size_t>(member) < ranks_.size()
               ? &ranks_[static_cast<size_t>(member)]
               : nullptr;
  }
  double threshold_ns() const;
  // The noise variance per collective that the threshold uses: the largest of the per-collective
  // estimates and the long-run ones (blocks of consecutive collectives).
  double noise_var() const;
  // The long-run variance per collective measured over blocks of 8 << (3 * scale) collectives;
  // 0 until measured.
  double block_var(int scale) const {
    return scale >= 0 && scale < kStragglerBlockScales ? block_var_[scale] : 0;
  }
  // The long-run variance per collective over blocks of HostBlockNs of compute; 0 until measured.
  double host_block_var() const { return host_block_var_; }
  // Until the host-scale variance is measured (two blocks of HostBlockNs, three or more ranks), a
  // rank late by less than half its compute does not fire: a loaded host's turns in a job's first
  // seconds are not yet in the threshold.
  bool HostScaleMeasured() const { return host_block_samples_ >= 2; }
  double mean_segment_ns() const { return seg_; }
  uint64_t observed() const { return observed_; }
  // The rank's excess as a fraction of its compute since the evidence began.
  double RelativeExcess(int member) const;

 private:
  StragglerParams params_;
  std::vector<StragglerRankState> ranks_;
  double var_ = 0;  // EWMA of the per-collective excess variance (ns^2)
  double seg_ = 0;  // EWMA of the compute segment (ns)
  uint64_t observed_ = 0;
  uint64_t var_samples_ = 0;
  double score_var_ = 0;  // EWMA of the variance of the clipped, peer-centred score (ns^2)
  uint64_t score_samples_ = 0;
  std::vector<int64_t> lateness_;  // scratch: this collective's lateness, partly ordered
  std::vector<int64_t> segments_;
  std::vector<double> dev_;
  std::vector<double> excess_;
  std::vector<double> raw_excess_;
  double block_var_[kStragglerBlockScales] = {};
  uint64_t block_samples_[kStragglerBlockScales] = {};
  std::vector<double> block_dev_;
  // Blocks of HostBlockNs of compute: the current block's compute and collectives, the previous
  // block's collectives, its number, and the variance measured over them.
  double host_block_compute_ns_ = 0;
  uint64_t host_block_len_ = 0;
  uint64_t prev_host_block_len_ = 0;
  uint64_t host_block_epoch_ = 0;
  double host_block_var_ = 0;
  uint64_t host_block_samples_ = 0;
};

}  // namespace sentinel::collector
