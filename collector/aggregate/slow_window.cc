// Which windows are slow and which span each joins: see slow_window.h.
#include "collector/aggregate/slow_window.h"

#include <algorithm>

#include "collector/aggregate/robust_stats.h"
#include "collector/base/refresh_due.h"

namespace sentinel::collector {
namespace {

// The median of a ring's values; `values` receives them (reordered).
int64_t RingMedian(const Ring<int64_t>& r, std::vector<int64_t>* values) {
  values->assign(r.StorageData(), r.StorageData() + r.size());
  return MedianInPlace(values);
}

void MergeLateRank(std::vector<LateRank>* into, int32_t rank, int64_t late_ns) {
  for (LateRank& r : *into) {
    if (r.rank == rank) {
      r.late_ns += late_ns;
      ++r.windows;
      return;
    }
  }
  if (into->size() < SlowSpan::kMaxLateRanks) {
    into->push_back({rank, late_ns, 1});
    return;
  }
  // Full: the smallest entry gives way to a larger newcomer.
  auto smallest = std::min_element(into->begin(), into->end(), [](const auto& a, const auto& b) {
    return a.late_ns < b.late_ns;
  });
  if (smallest->late_ns < late_ns) *smallest = {rank, late_ns, 1};
}

}  // namespace

void WindowUsual::Start(uint8_t func, int bucket, int history, int64_t now_ns) {
  *this = WindowUsual();
  func_ = func;
  bucket_ = bucket;
  const size_t cap = static_cast<size_t>(std::max(history, 1));
  skew_.Reset(cap);
  transfer_.Reset(cap);
  total_.Reset(cap);
  last_used_ns_ = now_ns;
}

void WindowUsual::Learn(int64_t skew, int64_t transfer, int64_t total) {
  skew_.Push(skew);
  transfer_.Push(transfer);
  total_.Push(total);
  ++pushes_since_cache_;
}

void WindowUsual::RefreshUsual(int64_t now_ns) {
  // Scratch kept across calls (the aggregator's one thread): no allocation per refresh.
  static thread_local std::vector<int64_t> values;
  static thread_local std::vector<int64_t> dev;
  skew0_ = RingMedian(skew_, &values);
  transfer0_ = RingMedian(transfer_, &values);
  const int64_t total0 = RingMedian(total_, &values);
  spread_ = static_cast<int64_t>(kMadToSigma *
                                 static_cast<double>(MedianAbsDeviation(values, total0, &dev)));
  pushes_since_cache_ = 0;
  refreshed_at_ns_ = now_ns;
}

void WindowUsual::Relearn() {
  skew_.Reset(skew_.capacity());
  transfer_.Reset(transfer_.capacity());
  total_.Reset(total_.capacity());
  slow_fraction_ = 0;
  mostly_slow_since_ = INT64_MIN;
  pushes_since_cache_ = 1 << 30;
}

WindowVerdict WindowUsual::Judge(const WindowObservation& w, const SlowCauseParams& p) {
  WindowVerdict v;
  v.skew_ns = w.max_arrival_ns - w.min_arrival_ns;
  const int64_t transfer = w.max_end_ns - w.max_arrival_ns;
  v.total_ns = v.skew_ns + transfer;
  if (static_cast<int>(total_.size()) < p.min_history) {
    Learn(v.skew_ns, transfer, v.total_ns);
    return v;
  }
  if (RefreshDue(static_cast<uint64_t>(pushes_since_cache_), w.max_end_ns - refreshed_at_ns_,
                 {kRefreshMinPushes, kRefreshMaxPushes, kRefreshMinNs})) {
    RefreshUsual(w.max_end_ns);
  }
  v.usual_skew_ns = skew0_;
  v.usual_ns = skew0_ + transfer0_;
  v.excess_ns = v.total_ns - v.usual_ns;
  const double threshold = std::max(p.min_excess_share * static_cast<double>(v.usual_ns),
                                    p.spread_factor * static_cast<double>(spread_));
  v.slow = v.excess_ns > 0 && static_cast<double>(v.excess_ns) > threshold;
  slow_fraction_ = 0.98 * slow_fraction_ + (v.slow ? 0.02 : 0.0);
  if (!v.slow) {
    mostly_slow_since_ = INT64_MIN;
    Learn(v.skew_ns, transfer, v.total_ns);
    return v;
  }
  if (slow_fraction_ > 0.9) {
    if (mostly_slow_since_ == INT64_MIN) mostly_slow_since_ = w.max_end_ns;
    if (w.max_end_ns - mostly_slow_since_ >= p.relearn_after_ns) Relearn();
  } else {
    mostly_slow_since_ = INT64_MIN;
  }
  v.late_ns = std::clamp<int64_t>(v.skew_ns - skew0_, 0, v.excess_ns);
  v.transfer_ns = v.excess_ns - v.late_ns;
  return v;
}

WindowUsual* UsualFor(std::vector<WindowUsual>* usual, size_t max_keys, uint8_t func, int bucket,
                      int history, int64_t now_ns) {
  for (WindowUsual& u : *usual) {
    if (u.Is(func, bucket)) {
      u.Touch(now_ns);
      return &u;
    }
  }
  WindowUsual* u = nullptr;
  if (usual->size() < max_keys) {
    u = &usual->emplace_back();
  } else {
    u = &*std::min_element(usual->begin(), usual->end(),
                           [](const WindowUsual& a, const WindowUsual& b) {
                             return a.last_used_ns() < b.last_used_ns();
                           });
  }
  u->Start(func, bucket, history, now_ns);
  return u;
}

bool JoinsSpan(const SlowSpan& last, const WindowObservation& w, const WindowVerdict& v,
               const SlowCauseParams& p) {
  const bool last_late = last.late_ns >= last.transfer_ns;
  const bool late_dominant = v.late_ns >= v.transfer_ns;
  return !last.settled && last.func == w.func && last.bucket == w.bucket &&
         last_late == late_dominant && w.min_arrival_ns - last.end_ns <= p.coalesce_gap_ns &&
         w.max_end_ns - last.start_ns <= p.span_max_ns && w.max_end_ns >= last.end_ns;
}

SlowSpan OpenSpan(const WindowObservation& w, const WindowVerdict& v) {
  SlowSpan s;
  s.comm_hash = w.comm_hash;
  s.uid = w.uid;
  s.func = w.func;
  s.bucket = w.bucket;
  s.first_seq = w.seq;
  s.start_ns = w.min_arrival_ns;
  s.usual_ns = v.usual_ns;
  s.remote_ranks = w.nranks > w.local_ranks;
  return s;
}

void AddToSpan(const WindowObservation& w, const WindowVerdict& v, SlowSpan* span) {
  span->last_seq = w.seq;
  span->end_ns = w.max_end_ns;
  ++span->windows;
  span->duration_ns += v.total_ns;
  span->excess_ns += v.excess_ns;
  span->late_ns += v.late_ns;
  span->transfer_ns += v.transfer_ns;
  if (v.late_ns <= 0) return;
  const int64_t last_late = v.skew_ns - v.usual_skew_ns;
  for (size_t i = 0; i < w.nranks_seen; ++i) {
    const int64_t l = w.ranks[i].arrival_ns - w.min_arrival_ns - v.usual_skew_ns;
    if (l > 0 && 2 * l >= last_late) MergeLateRank(&span->late_ranks, w.ranks[i].rank, l);
  }
  std::sort(span->late_ranks.begin(), span->late_ranks.end(),
            [](const LateRank& a, const LateRank& b) { return a.late_ns > b.late_ns; });
}

}  // namespace sentinel::collector
