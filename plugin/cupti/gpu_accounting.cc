// Window, step and attribution accounting (see gpu_accounting.h).
#include "plugin/cupti/gpu_accounting.h"

#include <algorithm>
#include <cstdint>

namespace sentinel::plugin::cupti {
namespace {

constexpr uint8_t kBoundaryKind = 255;
constexpr uint8_t kNotMeasuredKind = 3;  // a not-measured span in the sweep
// A watermark this many windows ahead skips the gap instead of emitting thousands of windows
// (e.g. after a long stop): the skipped windows are simply not reported.
constexpr int64_t kMaxCatchUpWindows = 64;

int64_t FloorTo(int64_t t, int64_t w) {
  int64_t q = t / w;
  if (t % w != 0 && t < 0) --q;
  return q * w;
}

}  // namespace

GpuAccounting::GpuAccounting(int64_t window_ns) : window_ns_(window_ns > 0 ? window_ns : 1) {}

void GpuAccounting::Begin(int64_t start_ns) {
  // The first window starts at the next edge: the one before it was only partly observed.
  closed_until_ = FloorTo(start_ns, window_ns_);
  if (closed_until_ < start_ns) closed_until_ += window_ns_;
  begun_ = true;
}

void GpuAccounting::Add(const Interval& in) {
  if (in.end <= in.start) {
    ++dropped_;  // no usable timestamps (start = end = 0 when device buffers ran out)
    return;
  }
  if (!begun_) return;
  device_ = in.device;
  Interval iv = in;
  if (iv.start < closed_until_) {
    ++late_;
    ++late_total_;
    if (iv.end <= closed_until_) return;
    iv.start = closed_until_;  // the part before the closed edge is lost
  }
  if (iv.start < last_start_) pending_sorted_ = false;
  last_start_ = iv.start;
  pending_.push_back(iv);
  if (in.kind == Activity::kNccl) nccl_open_.push_back(in);
}

void GpuAccounting::AddStepBoundary(int64_t t) {
  if (begun_ && t > closed_until_) boundaries_.push_back(t);
}

void GpuAccounting::MarkNotMeasured(int64_t from, int64_t to, uint32_t reason) {
  if (to > from && to > closed_until_) not_measured_.push_back({from, to, reason});
}

void GpuAccounting::Advance(int64_t watermark, AccountingOutput* out) {
  if (!begun_) return;
  if (watermark - closed_until_ > kMaxCatchUpWindows * window_ns_) {
    int64_t jump = FloorTo(watermark, window_ns_) - kMaxCatchUpWindows * window_ns_;
    if (in_step_) step_.not_measured |= kReasonOff;
    closed_until_ = jump;
  }
  if (!pending_sorted_ && closed_until_ + window_ns_ <= watermark) {
    std::sort(pending_.begin(), pending_.end(),
              [](const Interval& x, const Interval& y) { return x.start < y.start; });
    pending_sorted_ = true;
    last_start_ = pending_.empty() ? INT64_MIN : pending_.back().start;
  }
  uint64_t closed = 0;
  while (closed_until_ + window_ns_ <= watermark) {
    CloseWindow(closed_until_, closed_until_ + window_ns_, out);
    closed_until_ += window_ns_;
    ++closed;
  }
  if (closed == 0) return;
  carry_.clear();
  for (const Interval& iv : pending_) {
    if (iv.end > closed_until_) carry_.push_back(iv);
  }
  pending_.swap(carry_);
  not_measured_.erase(std::remove_if(not_measured_.begin(), not_measured_.end(),
                                     [&](const Span& s) { return s.to <= closed_until_; }),
                      not_measured_.end());
  boundaries_.erase(std::remove_if(boundaries_.begin(), boundaries_.end(),
                                   [&](int64_t t) { return t <= closed_until_; }),
                    boundaries_.end());
  AttributeClosed(closed, out);
}

void GpuAccounting::CloseWindow(int64_t a, int64_t b, AccountingOutput* out) {
  WindowResult w;
  w.start_ns = a;
  w.end_ns = b;
  w.device = device_;
  // pending_ is in start order: start points come out sorted, end points nearly so, and the
  // few boundary/span points are sorted apart; three sorted runs merge in linear time. This is
  // what keeps the per-record cost flat (a comparison sort of every point was 3x slower).
  starts_.clear();
  ends_.clear();
  extra_.clear();
  for (const Interval& iv : pending_) {
    if (iv.start >= b) break;  // sorted by start: nothing after this reaches into [a, b)
    if (iv.end <= a) continue;
    uint8_t k = static_cast<uint8_t>(iv.kind);
    starts_.push_back({std::max(a, iv.start), +1, k});
    ends_.push_back({std::min(b, iv.end), -1, k});
    if (iv.start >= a && iv.kind != Activity::kMemcpy) {
      ++w.kernels;
      if (iv.kind == Activity::kNccl) ++w.nccl_kernels;
    }
  }
  for (int64_t t : boundaries_) {
    if (t >= a && t < b) extra_.push_back({t, 0, kBoundaryKind});
  }
  for (const Span& s : not_measured_) {
    if (s.from < b && s.to > a) {
      w.not_measured |= s.reason;
      extra_.push_back({std::max(a, s.from), +1, kNotMeasuredKind});
      extra_.push_back({std::min(b, s.to), -1, kNotMeasuredKind});
    }
  }
  auto by_time = [](const Point& x, const Point& y) { return x.t < y.t; };
  if (!std::is_sorted(ends_.begin(), ends_.end(), by_time)) {
    std::sort(ends_.begin(), ends_.end(), by_time);
  }
  std::sort(extra_.begin(), extra_.end(), by_time);
  merged_.resize(starts_.size() + ends_.size());
  std::merge(starts_.begin(), starts_.end(), ends_.begin(), ends_.end(), merged_.begin(), by_time);
  points_.resize(merged_.size() + extra_.size());
  std::merge(merged_.begin(), merged_.end(), extra_.begin(), extra_.end(), points_.begin(),
             by_time);
  int cnt[4] = {0, 0, 0, 0};
  int64_t busy = 0;
  int64_t prev = a;
  auto accumulate = [&](int64_t until) {
    int64_t dt = until - prev;
    if (dt <= 0) return;
    bool c = cnt[0] > 0, n = cnt[1] > 0, m = cnt[2] > 0;
    bool any = c || n || m;
    if (c) {
      w.compute_ns += dt;
      if (!compute_union_.empty() && compute_union_.back().second == prev) {
        compute_union_.back().second = until;
      } else {
        compute_union_.emplace_back(prev, until);
      }
    }
    if (n) w.nccl_ns += dt;
    if (c && n) w.overlap_ns += dt;
    if (m) w.memcpy_ns += dt;
    if (any) busy += dt;
    if (in_step_) {
      // Only the part of the step inside a not-measured span spoils it.
      if (cnt[kNotMeasuredKind] > 0) step_.not_measured |= w.not_measured;
      if (c) step_.compute_ns += dt;
      if (n) step_nccl_ += dt;
      if (c && n) step_overlap_ += dt;
      if (m && !c && !n) step_.memcpy_only_ns += dt;
      if (any) step_busy_ += dt;
    }
  };
  for (const Point& p : points_) {
    accumulate(p.t);
    prev = std::max(prev, p.t);
    if (p.kind == kBoundaryKind) {
      if (in_step_) {
        step_.end_ns = p.t;
        step_.exposed_comm_ns = step_nccl_ - step_overlap_;
        step_.idle_ns = (step_.end_ns - step_.start_ns) - step_busy_;
        if (step_.not_measured != 0) {
          step_.compute_ns = step_.exposed_comm_ns = step_.idle_ns = step_.memcpy_only_ns = 0;
        }
        out->steps.push_back(step_);
      }
      in_step_ = true;
      step_ = StepResult{};
      step_.start_ns = p.t;
      step_busy_ = step_nccl_ = step_overlap_ = 0;
    } else {
      cnt[p.kind] += p.delta;
    }
  }
  accumulate(b);
  w.idle_ns = (b - a) - busy;
  w.late = late_;
  w.dropped = dropped_;
  late_ = 0;
  dropped_ = 0;
  if (w.not_measured != 0) {
    w.compute_ns = w.nccl_ns = w.overlap_ns = w.memcpy_ns = w.idle_ns = 0;
  }
  out->windows.push_back(w);
}

void GpuAccounting::AttributeClosed(uint64_t windows_closed, AccountingOutput* out) {
  uint64_t budget = attributions_per_window_ == UINT32_MAX
                        ? UINT64_MAX
                        : static_cast<uint64_t>(attributions_per_window_) * windows_closed;
  size_t keep = 0;
  int64_t oldest_open = closed_until_;
  for (size_t i = 0; i < nccl_open_.size(); ++i) {
    const Interval& k = nccl_open_[i];
    if (k.end > closed_until_) {
      oldest_open = std::min(oldest_open, k.start);
      nccl_open_[keep++] = k;
      continue;
    }
    if (budget == 0) {
      ++attributions_suppressed_;  // over the per-window cap: not worth the overlap search
      continue;
    }
    --budget;
    Attribution at;
    at.kernel = k;
    auto it = std::upper_bound(
        compute_union_.begin(), compute_union_.end(), k.start,
        [](int64_t t, const std::pair<int64_t, int64_t>& seg) { return t < seg.second; });
    for (; it != compute_union_.end() && it->first < k.end; ++it) {
      at.overlap_ns += std::min(k.end, it->second) - std::max(k.start, it->first);
    }
    out->attributions.push_back(at);
  }
  nccl_open_.resize(keep);
  // Keep the compute union as far back as the oldest kernel still waiting, at most two windows.
  int64_t horizon = std::max(oldest_open, closed_until_ - 2 * window_ns_);
  auto first_kept = std::upper_bound(
      compute_union_.begin(), compute_union_.end(), horizon,
      [](int64_t t, const std::pair<int64_t, int64_t>& seg) { return t < seg.second; });
  compute_union_.erase(compute_union_.begin(), first_kept);
}

}  // namespace sentinel::plugin::cupti
