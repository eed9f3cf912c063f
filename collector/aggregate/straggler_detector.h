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
};

enum class StragglerPattern : uint8_t {
  kStructural,  // slow since the communicator started (last pipeline stage, placement)
  kDegraded,    // on time first, then slow (throttling, noisy neighbour, degraded link)
};
const char* StragglerPatternName(StragglerPattern pattern);

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
  double mean_excess_ns = 0;   // EWMA of the excess (noise centring, evidence)
  double mean_score_ns = 0;    // EWMA of the clipped, peer-centred score (its variance)
  double mean_segment_ns = 0;  // EWMA of the segment seen with it
  StragglerPattern pattern = StragglerPattern::kDegraded;
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
  double noise_var() const { return var_; }
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
  std::vector<int64_t> sorted_;
  std::vector<int64_t> segments_;
  std::vector<double> dev_;
  std::vector<double> excess_;
  std::vector<double> raw_excess_;
};

}  // namespace sentinel::collector
