// Window, step and attribution accounting (see gpu_accounting.h).
#include "plugin/cupti/gpu_accounting.h"

#include <algorithm>
#include <cstdint>

namespace sentinel::plugin::cupti {
namespace {

// An out-of-order insert this close to the end of a union is merged in place (a short move);
// further back it goes to the side list.
constexpr size_t kInPlaceTail = 64;
// Far-future kernel records (a bad timestamp within the clock tolerance) must not grow the
// per-window counts without bound: beyond this many open windows they are not counted.
constexpr size_t kMaxCountedWindows = 1024;
// A watermark this many windows ahead skips the gap instead of emitting thousands of windows
// (e.g. after a long stop): the skipped windows are simply not reported.
constexpr int64_t kMaxCatchUpWindows = 64;

int64_t FloorTo(int64_t t, int64_t w) {
  int64_t q = t / w;
  if (t % w != 0 && t < 0) --q;
  return q * w;
}

}  // namespace

void GpuAccounting::Union::InsertSlow(int64_t s, int64_t e) {
  // First segment that ends at or after s: it may touch [s, e].
  auto first = std::partition_point(v_.begin(), v_.end(), [s](const Seg& g) { return g.e < s; });
  if (static_cast<size_t>(v_.end() - first) > kInPlaceTail) {
    side_.push_back({s, e});
    return;
  }
  auto last = first;
  while (last != v_.end() && last->s <= e) ++last;
  if (first == last) {
    v_.insert(first, Seg{s, e});  // within capacity in steady state: a short move, no allocation
    return;
  }
  first->s = std::min(first->s, s);
  first->e = std::max((last - 1)->e, e);
  v_.erase(first + 1, last);
}

void GpuAccounting::Union::Normalize() {
  if (side_.empty()) return;
  std::sort(side_.begin(), side_.end(), [](const Seg& x, const Seg& y) { return x.s < y.s; });
  // Only the tail from the first segment the side list can touch is rebuilt.
  const int64_t from = side_.front().s;
  auto keep =
      std::partition_point(v_.begin(), v_.end(), [from](const Seg& g) { return g.e < from; });
  scratch_.clear();
  auto a = keep;
  auto b = side_.begin();
  while (a != v_.end() || b != side_.end()) {
    const Seg& g = (b == side_.end() || (a != v_.end() && a->s <= b->s)) ? *a++ : *b++;
    if (!scratch_.empty() && g.s <= scratch_.back().e) {
      scratch_.back().e = std::max(scratch_.back().e, g.e);
    } else {
      scratch_.push_back(g);
    }
  }
  v_.erase(keep, v_.end());
  v_.insert(v_.end(), scratch_.begin(), scratch_.end());
  side_.clear();
}

int64_t GpuAccounting::Union::Measure(int64_t lo, int64_t hi) const {
  int64_t sum = 0;
  auto it = std::partition_point(v_.begin(), v_.end(), [lo](const Seg& g) { return g.e <= lo; });
  for (; it != v_.end() && it->s < hi; ++it) sum += std::min(hi, it->e) - std::max(lo, it->s);
  return sum;
}

void GpuAccounting::Union::PruneBefore(int64_t t) {
  auto it = std::partition_point(v_.begin(), v_.end(), [t](const Seg& g) { return g.e <= t; });
  v_.erase(v_.begin(), it);
}

std::pair<const GpuAccounting::Seg*, const GpuAccounting::Seg*> GpuAccounting::Union::Range(
    int64_t lo, int64_t hi) const {
  auto first = std::partition_point(v_.begin(), v_.end(), [lo](const Seg& g) { return g.e <= lo; });
  auto last = std::partition_point(first, v_.end(), [hi](const Seg& g) { return g.s < hi; });
  return {v_.data() + (first - v_.begin()), v_.data() + (last - v_.begin())};
}

size_t GpuAccounting::Union::CountReaching(int64_t t) const {
  auto it = std::partition_point(v_.begin(), v_.end(), [t](const Seg& g) { return g.e <= t; });
  size_t n = static_cast<size_t>(v_.end() - it);
  for (const Seg& g : side_) n += g.e > t ? 1 : 0;
  return n;
}

GpuAccounting::GpuAccounting(int64_t window_ns) : window_ns_(window_ns > 0 ? window_ns : 1) {}

void GpuAccounting::Begin(int64_t start_ns) {
  // The first window starts at the next edge: the one before it was only partly observed.
  closed_until_ = FloorTo(start_ns, window_ns_);
  if (closed_until_ < start_ns) closed_until_ += window_ns_;
  begun_ = true;
}

size_t GpuAccounting::pending() const {
  return compute_.CountReaching(closed_until_) + nccl_.CountReaching(closed_until_) +
         memcpy_.CountReaching(closed_until_) + nccl_open_.size();
}

size_t GpuAccounting::memory_bytes() const {
  return compute_.capacity_bytes() + nccl_.capacity_bytes() + memcpy_.capacity_bytes() +
         counts_.capacity() * sizeof(WindowCount) + not_measured_.capacity() * sizeof(Span) +
         boundaries_.capacity() * sizeof(int64_t) + nccl_open_.capacity() * sizeof(Interval);
}

GpuAccounting::WindowCount* GpuAccounting::CountFor(int64_t t) {
  if (t >= count_from_ && t < count_to_) return &counts_[count_i_];
  // Another window than the last lookup's: find or add its entry (counts_ is short).
  const int64_t ws = FloorTo(t, window_ns_);
  auto it = std::lower_bound(counts_.begin(), counts_.end(), ws,
                             [](const WindowCount& c, int64_t x) { return c.start < x; });
  if (it == counts_.end() || it->start != ws) {
    if (counts_.size() >= kMaxCountedWindows) return nullptr;
    it = counts_.insert(it, WindowCount{ws, 0, 0, 0});
  }
  count_i_ = static_cast<size_t>(it - counts_.begin());
  count_from_ = ws;
  count_to_ = ws + window_ns_;
  return &*it;
}

void GpuAccounting::Add(const Interval& in) {
  if (in.end <= in.start) {
    ++dropped_;  // no usable timestamps (start = end = 0 when device buffers ran out)
    return;
  }
  if (!begun_) return;
  device_ = in.device;
  int64_t s = in.start;
  if (s < closed_until_) {
    ++late_;
    ++late_total_;
    if (in.end <= closed_until_) return;
    s = closed_until_;  // the part before the closed edge is lost
  }
  if (in.kind == Activity::kMemcpy) {
    memcpy_.Insert(s, in.end);
    return;
  }
  const bool nccl = in.kind == Activity::kNccl;
  (nccl ? nccl_ : compute_).Insert(s, in.end);
  if (WindowCount* c = CountFor(s)) {
    ++c->kernels;
    if (nccl) ++c->nccl;
  }
  if (nccl) {
    // Kept for attribution only within the cap of the window it ends in.
    WindowCount* c = CountFor(in.end - 1);
    if (c != nullptr && c->attributable < attributions_per_window_) {
      ++c->attributable;
      nccl_open_.push_back(in);
    } else {
      ++attributions_suppressed_;
    }
  }
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
  if (closed_until_ + window_ns_ > watermark) return;
  for (Union* u : {&compute_, &nccl_, &memcpy_}) u->Normalize();
  std::sort(boundaries_.begin(), boundaries_.end());
  while (closed_until_ + window_ns_ <= watermark) {
    CloseWindow(closed_until_, closed_until_ + window_ns_, out);
    closed_until_ += window_ns_;
  }
  nccl_.PruneBefore(closed_until_);
  memcpy_.PruneBefore(closed_until_);
  counts_.erase(counts_.begin(),
                std::lower_bound(counts_.begin(), counts_.end(), closed_until_,
                                 [](const WindowCount& c, int64_t t) { return c.start < t; }));
  count_from_ = count_to_ = 0;  // the cached index moved
  not_measured_.erase(std::remove_if(not_measured_.begin(), not_measured_.end(),
                                     [&](const Span& s) { return s.to <= closed_until_; }),
                      not_measured_.end());
  boundaries_.erase(boundaries_.begin(),
                    std::upper_bound(boundaries_.begin(), boundaries_.end(), closed_until_));
  AttributeClosed(out);
}

GpuAccounting::Figures GpuAccounting::Measure(int64_t lo, int64_t hi) const {
  // One walk over the three unions in start order, clipped to [lo, hi), keeping the running
  // segment of C ∪ N and of C ∪ N ∪ M.
  Figures f;
  auto [c, c_end] = compute_.Range(lo, hi);
  auto [n, n_end] = nccl_.Range(lo, hi);
  auto [m, m_end] = memcpy_.Range(lo, hi);
  int64_t ks = lo, ke = lo, as = lo, ae = lo;  // running segments (empty)
  for (;;) {
    const Seg* g;
    int which;
    if (c != c_end && (n == n_end || c->s <= n->s)) {
      g = c;
      which = 0;
    } else if (n != n_end) {
      g = n;
      which = 1;
    } else if (m != m_end) {
      g = m;
      which = 2;
    } else {
      break;
    }
    if (m != m_end && m->s < g->s) {
      g = m;
      which = 2;
    }
    const int64_t s = std::max(lo, g->s);
    const int64_t e = std::min(hi, g->e);
    if (which == 0) {
      f.c += e - s;
      ++c;
    } else if (which == 1) {
      f.n += e - s;
      ++n;
    } else {
      f.m += e - s;
      ++m;
    }
    if (which != 2) {
      if (s > ke) {
        f.k += ke - ks;
        ks = s;
        ke = e;
      } else if (e > ke) {
        ke = e;
      }
    }
    if (s > ae) {
      f.all += ae - as;
      as = s;
      ae = e;
    } else if (e > ae) {
      ae = e;
    }
  }
  f.k += ke - ks;
  f.all += ae - as;
  return f;
}

void GpuAccounting::CloseWindow(int64_t a, int64_t b, AccountingOutput* out) {
  WindowResult w;
  w.start_ns = a;
  w.end_ns = b;
  w.device = device_;
  for (const WindowCount& c : counts_) {
    if (c.start == a) {
      w.kernels = c.kernels;
      w.nccl_kernels = c.nccl;
    }
  }
  for (const Span& s : not_measured_) {
    if (s.from < b && s.to > a) w.not_measured |= s.reason;
  }
  // The window is cut at the step boundaries inside it; each part is measured on the unions
  // (sums of clipped segments: linear in the segments, no sort) and counts for the window and
  // for the step it belongs to.
  int64_t busy = 0;
  auto part = [&](int64_t lo, int64_t hi) {
    if (hi <= lo) return;
    const Figures f = Measure(lo, hi);
    const int64_t c = f.c, n = f.n, m = f.m, k = f.k, all = f.all;
    w.compute_ns += c;
    w.nccl_ns += n;
    w.overlap_ns += c + n - k;
    w.memcpy_ns += m;
    busy += all;
    if (!in_step_) return;
    // Only the part of the step inside a not-measured span spoils it.
    for (const Span& s : not_measured_) {
      if (std::max({lo, a, s.from}) < std::min({hi, b, s.to})) step_.not_measured |= w.not_measured;
    }
    step_.compute_ns += c;
    step_nccl_ += n;
    step_overlap_ += c + n - k;
    step_.memcpy_only_ns += all - k;
    step_busy_ += all;
  };
  int64_t lo = a;
  for (auto it = std::lower_bound(boundaries_.begin(), boundaries_.end(), a);
       it != boundaries_.end() && *it < b; ++it) {
    const int64_t t = *it;
    part(lo, t);
    lo = t;
    if (in_step_) {
      step_.end_ns = t;
      step_.exposed_comm_ns = step_nccl_ - step_overlap_;
      step_.idle_ns = (step_.end_ns - step_.start_ns) - step_busy_;
      if (step_.not_measured != 0) {
        step_.compute_ns = step_.exposed_comm_ns = step_.idle_ns = step_.memcpy_only_ns = 0;
      }
      out->steps.push_back(step_);
    }
    in_step_ = true;
    step_ = StepResult{};
    step_.start_ns = t;
    step_busy_ = step_nccl_ = step_overlap_ = 0;
  }
  part(lo, b);
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

void GpuAccounting::AttributeClosed(AccountingOutput* out) {
  size_t keep = 0;
  int64_t oldest_open = closed_until_;
  for (const Interval& k : nccl_open_) {
    if (k.end > closed_until_) {
      oldest_open = std::min(oldest_open, k.start);
      nccl_open_[keep++] = k;
      continue;
    }
    Attribution at;
    at.kernel = k;
    at.overlap_ns = compute_.Measure(k.start, k.end);
    out->attributions.push_back(at);
  }
  nccl_open_.resize(keep);
  // Keep the compute union as far back as the oldest kernel still waiting, at most two windows.
  compute_.PruneBefore(std::max(oldest_open, closed_until_ - 2 * window_ns_));
}

}  // namespace sentinel::plugin::cupti
