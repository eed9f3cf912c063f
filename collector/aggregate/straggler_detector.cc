// Straggler CUSUM: see straggler_detector.h.
#include "collector/aggregate/straggler_detector.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace sentinel::collector {
namespace {

// The order statistics a leave-one-out median reads (the median of the values with one occurrence
// of one of them removed): of n values, the (m/2)-th and (m/2+1)-th for odd m = n - 1, the
// (m/2-1)-th to (m/2+1)-th for even m, found by selection rather than a sort of all n (the join of
// every collective computes it).
struct MiddleOrder {
  size_t m = 0;   // n - 1
  size_t lo = 0;  // the first order statistic kept
  std::array<int64_t, 3> at{};
};

MiddleOrder SelectMiddle(std::vector<int64_t>* values) {
  MiddleOrder mid;
  const size_t n = values->size();
  if (n <= 1) return mid;
  mid.m = n - 1;
  mid.lo = mid.m % 2 == 1 ? mid.m / 2 : mid.m / 2 - 1;
  const size_t count = std::min<size_t>(3, n - mid.lo);
  auto first = values->begin() + static_cast<std::ptrdiff_t>(mid.lo);
  std::nth_element(values->begin(), first, values->end());
  // The next order statistics are the smallest of what lies after the selected one.
  if (count > 1)
    std::partial_sort(first + 1, first + static_cast<std::ptrdiff_t>(count), values->end());
  for (size_t k = 0; k < count; ++k) mid.at[k] = *(first + static_cast<std::ptrdiff_t>(k));
  return mid;
}

// The median of the values with one occurrence of `value` (one of them) removed: the j-th smallest
// of the rest is the j-th of all when that is below `value`, else the (j+1)-th.
int64_t LeaveOneOutMedian(const MiddleOrder& mid, int64_t value) {
  if (mid.m == 0) return value;
  auto at = [&](size_t j) {
    const int64_t here = mid.at[j - mid.lo];
    return here < value ? here : mid.at[j - mid.lo + 1];
  };
  const size_t m = mid.m;
  if (m % 2 == 1) return at(m / 2);
  return at(m / 2 - 1) + (at(m / 2) - at(m / 2 - 1)) / 2;
}

// A rank late by this share of its compute or more, over its whole late run, is beyond what ranks
// taking turns on a loaded host's CPUs showed (10-25 % for 0.6-3 s in the real-process soak): it
// needs no persistence in time.
constexpr double kBeyondHostTurns = 0.5;

// The median of chi-square(1): median(x^2) = 0.4549 sigma^2 for Gaussian x.
constexpr double kChi2Median = 0.4549;

}  // namespace

const char* StragglerPatternName(StragglerPattern pattern) {
  return pattern == StragglerPattern::kStructural ? "structural" : "degraded";
}

double StragglerDetector::noise_var() const {
  double v = std::max({var_, score_var_, host_block_var_});
  for (double b : block_var_) v = std::max(v, b);
  return v;
}

double StragglerDetector::threshold_ns() const {
  const double k = params_.rel / 2;
  const double seg = std::max(seg_, static_cast<double>(params_.floor_ns));
  return params_.noise_h * noise_var() / (k * seg) + params_.floor_h * seg;
}

double StragglerDetector::RelativeExcess(int member) const {
  const StragglerRankState* st = rank(member);
  if (st == nullptr) return 0;
  if (st->onset_segment_ns > 0) return st->onset_excess_ns / st->onset_segment_ns;
  return st->mean_excess_ns / std::max(st->mean_segment_ns, static_cast<double>(params_.floor_ns));
}

void StragglerDetector::Reset() {
  for (StragglerRankState& st : ranks_) {
    st.firing = false;
    st.g_ns = 0;
    st.d_ns = 0;
    st.clean_run = 0;
  }
}

void StragglerDetector::Observe(const std::vector<Observation>& obs, uint64_t seq,
                                std::vector<StragglerEvent>* events) {
  const size_t n = obs.size();
  if (n < 2) return;
  int max_member = 0;
  for (const Observation& o : obs) max_member = std::max(max_member, o.member);
  if (ranks_.size() <= static_cast<size_t>(max_member)) {
    ranks_.resize(static_cast<size_t>(max_member) + 1);
  }

  lateness_.clear();
  segments_.clear();
  for (const Observation& o : obs) {
    lateness_.push_back(o.lateness_ns);
    if (o.segment_ns >= 0) segments_.push_back(o.segment_ns);
  }
  const MiddleOrder middle = SelectMiddle(&lateness_);
  double s = static_cast<double>(params_.floor_ns);
  if (!segments_.empty()) {
    auto mid = segments_.begin() + static_cast<std::ptrdiff_t>(segments_.size() / 2);
    std::nth_element(segments_.begin(), mid, segments_.end());
    s = std::max(s, static_cast<double>(*mid));
  }
  // Excess over the median of the *other* ranks: with two ranks the late one is still measured
  // against an on-time peer, not against a median it drags up itself.
  excess_.resize(n);
  dev_.clear();
  for (size_t j = 0; j < n; ++j) {
    const int64_t e = obs[j].lateness_ns - LeaveOneOutMedian(middle, obs[j].lateness_ns);
    excess_[j] = static_cast<double>(e);
    // Noise is the excess's variation around each rank's own mean: a rank that is steadily late
    // does not widen the threshold that is to catch it. A rank's first excess has no mean yet.
    const StragglerRankState& st = ranks_[static_cast<size_t>(obs[j].member)];
    if (st.judged == 0) continue;
    const double d = excess_[j] - st.mean_excess_ns;
    dev_.push_back(d * d);
  }
  ++observed_;
  const bool learning = observed_ <= static_cast<uint64_t>(params_.learn);
  if (!dev_.empty()) {
    auto mid = dev_.begin() + static_cast<std::ptrdiff_t>(dev_.size() / 2);
    std::nth_element(dev_.begin(), mid, dev_.end());
    double v = *mid / kChi2Median;
    ++var_samples_;
    if (var_samples_ > static_cast<uint64_t>(params_.learn)) {
      // One outlier (a pause, a burst) moves the estimate, it does not reset it.
      v = std::min(v, 16 * var_ + static_cast<double>(params_.floor_ns) *
                                      static_cast<double>(params_.floor_ns));
    }
    var_ += std::max(1.0 / static_cast<double>(var_samples_), 1.0 / 256) * (v - var_);
  }
  const double s_upd = learning ? s : std::min(s, 8 * seg_);
  seg_ += std::max(1.0 / static_cast<double>(observed_), 1.0 / 256) * (s_upd - seg_);

  const double k = params_.rel / 2;
  const double h = threshold_ns();
  // Each collective's excess is winsorized at the noise scale or half the segment, and never above
  // 1/persist of the threshold: one heavy-tailed delay, even inside a whole-job pause (which
  // inflates the segment of every rank alike while their excess cancels), cannot fire alone.
  const double clip =
      std::min(std::max(params_.clip_sigmas * std::sqrt(var_), s / 2), h / params_.persist);
  // The block sums add each rank's excess over the other ranks' median (not the peer-centred score:
  // a straggler would shift every other rank's score by its excess / (n - 1)), clipped at the
  // ordinary scale (the usual segment, not this collective's: a whole-job pause makes every
  // segment seconds long, and its arrival spread would otherwise widen the threshold that then
  // widens the clip).
  const double block_clip =
      std::min(clip, std::max(params_.clip_sigmas * std::sqrt(var_),
                              std::max(seg_, static_cast<double>(params_.floor_ns)) / 2));
  // Delays are one-sided (scheduling, page faults, interrupts), so under noise alone a rank's
  // excess over the peers' median has a positive mean (mean > median of a right-skewed delay) that
  // can exceed the drift k*s on a loaded machine. The score is the clipped excess minus the mean
  // clipped excess of the other ranks: zero mean when every rank sees the same noise, whatever
  // its shape. (Two ranks: the excesses are antisymmetric, already centred.)
  double clipped_sum = 0;
  raw_excess_ = excess_;
  for (size_t j = 0; j < n; ++j) {
    excess_[j] = std::clamp(excess_[j], -clip, clip);
    clipped_sum += excess_[j];
  }
  // Ranks with evidence of their own (at least half the threshold), as the collective began.
  size_t with_evidence = 0;
  for (const Observation& o : obs) {
    if (ranks_[static_cast<size_t>(o.member)].g_ns > h / 2) ++with_evidence;
  }
  // A straggler stands out from its peers: when a quarter or more of the other ranks (at least
  // one) are late for a run of their own at the same time, the lateness is the host's (ranks
  // taking turns on too few CPUs, all of them flagged in turn), not one slow rank.
  const double shared_limit = std::max(1.0, static_cast<double>(n - 1) / 4);
  // Two ranks never measure the host-scale variance (their excesses mirror each other): no hold.
  const bool host_scale_ready = HostBlockNs(params_) <= 0 || n < 3 || HostScaleMeasured();
  double score_dev2 = 0;
  size_t score_n = 0;
  for (size_t j = 0; j < n; ++j) {
    StragglerRankState& st = ranks_[static_cast<size_t>(obs[j].member)];
    const double x =
        n >= 3 ? excess_[j] - (clipped_sum - excess_[j]) / static_cast<double>(n - 1) : excess_[j];
    ++st.judged;
    const double ar = std::max(1.0 / static_cast<double>(st.judged), 1.0 / 64);
    if (st.judged > 1) {
      score_dev2 += (x - st.mean_score_ns) * (x - st.mean_score_ns);
      ++score_n;
    }
    st.mean_score_ns += ar * (x - st.mean_score_ns);
    for (int b = 0; b < kStragglerBlockScales; ++b) {
      const uint64_t epoch = (observed_ - 1) >> (3 * (b + 1));  // blocks of 8 << 3b collectives
      if (st.block_epoch[b] != epoch) {
        // A block of this rank ended (it may have missed collectives: then it is not compared).
        st.has_prev_block[b] = st.block_epoch[b] + 1 == epoch;
        st.prev_block_sum_ns[b] = st.block_sum_ns[b];
        st.block_sum_ns[b] = 0;
        st.block_epoch[b] = epoch;
      }
      st.block_sum_ns[b] += std::clamp(excess_[j], -block_clip, block_clip);
    }
    if (st.host_block_epoch != host_block_epoch_) {
      st.has_prev_host_block = st.host_block_epoch + 1 == host_block_epoch_;
      st.prev_host_block_sum_ns = st.host_block_sum_ns;
      st.host_block_sum_ns = 0;
      st.host_block_epoch = host_block_epoch_;
    }
    st.host_block_sum_ns += std::clamp(excess_[j], -block_clip, block_clip);
    st.mean_excess_ns += ar * (raw_excess_[j] - st.mean_excess_ns);
    st.mean_segment_ns += ar * (s - st.mean_segment_ns);
    if (learning) continue;
    if (!st.firing) {
      if (st.g_ns == 0) {
        st.onset_seq = seq;
        st.onset_excess_ns = 0;
        st.onset_segment_ns = 0;
        st.onset_compute_ns = 0;
        st.onset_late_ns = 0;
      }
      st.g_ns = std::max(0.0, st.g_ns + x - k * s);
      st.onset_excess_ns += x;
      st.onset_segment_ns += s;
      st.onset_compute_ns += s_upd;
      // Each collective counts at most one segment late: one long stall is one late collective.
      st.onset_late_ns += std::clamp(raw_excess_[j], -s, s);
      if (st.g_ns < h / 2) {
        if (++st.clean_run >= params_.structural_clean) st.ever_clean = true;
      } else {
        st.clean_run = 0;
      }
      // Enough evidence, and of a slowdown near the smallest one worth an alert: its excess since
      // the evidence began is at least the resolution reference (3/4 rel). A rank a few percent
      // slower (a loaded machine's scheduling) would otherwise cross any threshold eventually.
      const double others_late =
          static_cast<double>(with_evidence) - (st.g_ns - std::max(0.0, x - k * s) > h / 2 ? 1 : 0);
      const bool beyond_host_turns = st.onset_late_ns >= kBeyondHostTurns * st.onset_segment_ns;
      if (st.g_ns > h && st.onset_excess_ns >= 1.5 * k * st.onset_segment_ns &&
          others_late < shared_limit && (host_scale_ready || beyond_host_turns) &&
          (st.onset_compute_ns >= static_cast<double>(params_.min_evidence_ns) ||
           beyond_host_turns)) {
        st.firing = true;
        st.d_ns = 0;
        st.pattern = st.ever_clean ? StragglerPattern::kDegraded : StragglerPattern::kStructural;
        events->push_back({obs[j].member, StragglerChange::kFired});
      }
    } else {
      // Resolution reference 3/4 rel (1.5 k): see the header.
      st.d_ns = std::max(0.0, st.d_ns + 1.5 * k * s - x);
      if (st.d_ns > h) {
        st.firing = false;
        st.g_ns = 0;
        st.clean_run = 0;
        events->push_back({obs[j].member, StragglerChange::kResolved});
      }
    }
  }
  // The long-run variance, at each block scale whose block ends with this collective.
  for (int b = 0; b < kStragglerBlockScales; ++b) {
    const uint64_t len = uint64_t{8} << (3 * b);
    if (observed_ % len != 0) continue;
    const uint64_t epoch = (observed_ - 1) >> (3 * (b + 1));
    block_dev_.clear();
    for (const Observation& o : obs) {
      const StragglerRankState& st = ranks_[static_cast<size_t>(o.member)];
      if (!st.has_prev_block[b] || st.block_epoch[b] != epoch) continue;
      const double d = st.block_sum_ns[b] - st.prev_block_sum_ns[b];
      block_dev_.push_back(d * d / (2.0 * static_cast<double>(len)));
    }
    // Two ranks' excesses mirror each other: a straggler's onset would read as noise on both.
    if (block_dev_.size() < 3) continue;
    auto mid = block_dev_.begin() + static_cast<std::ptrdiff_t>(block_dev_.size() / 2);
    std::nth_element(block_dev_.begin(), mid, block_dev_.end());
    const double v = *mid / kChi2Median;
    ++block_samples_[b];
    // Fast: a load that starts beside the job must widen the threshold within a few blocks (the
    // median over the ranks already ignores one straggler's onset).
    block_var_[b] +=
        std::max(1.0 / static_cast<double>(block_samples_[b]), 1.0 / 4) * (v - block_var_[b]);
  }
  // The host-scale block ends once it holds HostBlockNs of compute (usual segments, a pause capped
  // as for the evidence): the same wall of compute at 1 ms steps as at 200 ms ones.
  if (HostBlockNs(params_) > 0) {
    host_block_compute_ns_ += s_upd;
    ++host_block_len_;
    if (host_block_compute_ns_ >= static_cast<double>(HostBlockNs(params_))) {
      block_dev_.clear();
      const double len = static_cast<double>(host_block_len_ + prev_host_block_len_);
      for (const Observation& o : obs) {
        const StragglerRankState& st = ranks_[static_cast<size_t>(o.member)];
        if (!st.has_prev_host_block || st.host_block_epoch != host_block_epoch_) continue;
        const double d = st.host_block_sum_ns - st.prev_host_block_sum_ns;
        block_dev_.push_back(d * d / len);
      }
      if (block_dev_.size() >= 3) {
        auto mid = block_dev_.begin() + static_cast<std::ptrdiff_t>(block_dev_.size() / 2);
        std::nth_element(block_dev_.begin(), mid, block_dev_.end());
        const double v = *mid / kChi2Median;
        ++host_block_samples_;
        host_block_var_ += std::max(1.0 / static_cast<double>(host_block_samples_), 1.0 / 4) *
                           (v - host_block_var_);
      }
      prev_host_block_len_ = host_block_len_;
      host_block_len_ = 0;
      host_block_compute_ns_ = 0;
      ++host_block_epoch_;
    }
  }
  // The variance of what the CUSUM actually sums (clipped, centred scores, around each rank's own
  // mean so a steady straggler does not raise the bar that is to catch it): with heavy tails it
  // exceeds the median-based estimate, and the threshold follows it.
  if (score_n > 0) {
    ++score_samples_;
    const double v = score_dev2 / static_cast<double>(score_n);
    score_var_ += std::max(1.0 / static_cast<double>(score_samples_), 1.0 / 256) * (v - score_var_);
  }
}

}  // namespace sentinel::collector
