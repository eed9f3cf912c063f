// GpuAccounting: turns GPU activity intervals (already on CLOCK_MONOTONIC) into per-window and
// per-step time splits, and NCCL kernels into attributions (kernel span + time overlapped by
// compute). Single-threaded: only the CUPTI thread (or a test) calls it. No CUPTI types here.
//
// Windows are aligned to multiples of the window length on CLOCK_MONOTONIC, so that the windows
// of the ranks of a node line up. Records arrive late and out of order (buffers complete
// asynchronously): a window is closed only when the caller's watermark passes its end; activity
// that arrives for a closed window is counted as late and the part before the closed edge is
// lost (never re-reported). Kernels that span a window edge are split at the edge.
//
// Per window [a, b): C, N, M = unions of compute kernels, NCCL kernels, memcpy/memset within it.
//   compute = |C|, nccl = |N|, overlap = |C ∩ N|, memcpy = |M|, idle = (b - a) - |C ∪ N ∪ M|.
// Per step [s, e) (between consecutive step boundaries):
//   compute = |C|, exposed_comm = |N| - |C ∩ N|, idle = (e - s) - |C ∪ N ∪ M|; the rest of the step
//   (memcpy not under a kernel) is memcpy_only.
// A window or step that touches a span marked not measured (another tool owned CUPTI, the clock
// was wrong) carries measured = false and zero figures: never a wrong number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace sentinel::plugin::cupti {

enum class Activity : uint8_t { kCompute = 0, kNccl = 1, kMemcpy = 2 };

struct Interval {
  int64_t start = 0;
  int64_t end = 0;
  uint64_t graph_node = 0;
  uint32_t stream = 0;
  uint32_t correlation = 0;
  uint32_t device = 0;
  Activity kind = Activity::kCompute;
};

// Why a window is not measured (bit flags, ORed over the window).
enum NotMeasuredReason : uint32_t {
  kReasonForeignOwner = 1u << 0,  // another tool took the activity buffers / kinds
  kReasonForeignClock = 1u << 1,  // timestamps were not on CUPTI's normal clock
  kReasonOff = 1u << 2,           // collection stopped (finalize, disable)
};

struct WindowResult {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t compute_ns = 0;
  int64_t nccl_ns = 0;
  int64_t overlap_ns = 0;
  int64_t memcpy_ns = 0;
  int64_t idle_ns = 0;
  uint64_t kernels = 0;       // kernel records accounted in this window (by start)
  uint64_t nccl_kernels = 0;  // of which NCCL
  uint64_t late = 0;          // records that arrived after their window closed (since last window)
  uint64_t dropped = 0;       // records CUPTI dropped or gave no timestamps (since last window)
  uint32_t not_measured = 0;  // NotMeasuredReason bits; 0 = measured
  uint32_t device = 0;
};

struct StepResult {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t compute_ns = 0;
  int64_t exposed_comm_ns = 0;
  int64_t idle_ns = 0;
  int64_t memcpy_only_ns = 0;
  uint32_t not_measured = 0;
};

struct Attribution {
  Interval kernel;
  int64_t overlap_ns = 0;  // time of this NCCL kernel overlapped by compute kernels
};

struct AccountingOutput {
  std::vector<WindowResult> windows;
  std::vector<StepResult> steps;
  std::vector<Attribution> attributions;
  void clear() {
    windows.clear();
    steps.clear();
    attributions.clear();
  }
};

class GpuAccounting {
 public:
  explicit GpuAccounting(int64_t window_ns);

  // Time from which windows are reported (rounded down to a window edge). Call once, before the
  // first Advance; activity before it is ignored.
  void Begin(int64_t start_ns);
  bool begun() const { return begun_; }

  // One activity interval (end > start; anything else is counted as dropped).
  void Add(const Interval& iv);
  // Records CUPTI dropped or delivered without timestamps: counted in the next window.
  void AddDropped(uint64_t n) { dropped_ += n; }
  // A step starts at t (CLOCK_MONOTONIC). Boundaries at or before the closed edge are ignored.
  void AddStepBoundary(int64_t t);
  // [from, to) was not measured for `reason`.
  void MarkNotMeasured(int64_t from, int64_t to, uint32_t reason);

  // Closes every window whose end <= watermark, appending results to *out.
  void Advance(int64_t watermark, AccountingOutput* out);

  // At most n attributions per window: the first n NCCL kernels (in arrival order) that end in it.
  // The rest are counted when they arrive, and neither kept nor computed.
  void set_attributions_per_window(uint32_t n) { attributions_per_window_ = n; }
  uint64_t attributions_suppressed() const { return attributions_suppressed_; }

  int64_t closed_until() const { return closed_until_; }
  uint64_t late_total() const { return late_total_; }
  // Busy segments (compute, NCCL, memcpy) that reach past the closed edge.
  size_t pending() const;
  // Bytes held by the accounting's containers (their capacity): for the memory soak.
  size_t memory_bytes() const;

 private:
  struct Seg {
    int64_t s, e;
  };
  // A sorted list of disjoint busy intervals of one class, merged on insert. Records arrive
  // nearly in start order, so an insert is almost always "extend the last segment" or "append";
  // one that lands near the end is merged in place, and the rare one further back waits in a side
  // list that is sorted and merged before the next window closes (never quadratic).
  class Union {
   public:
    void Insert(int64_t s, int64_t e) {
      if (v_.empty() || s > v_.back().e) {
        v_.push_back({s, e});
      } else if (s >= v_.back().s) {
        if (e > v_.back().e) v_.back().e = e;
      } else {
        InsertSlow(s, e);
      }
    }
    void Normalize();                               // merges the side list in
    int64_t Measure(int64_t lo, int64_t hi) const;  // |union ∩ [lo, hi)|
    // The segments that meet [lo, hi).
    std::pair<const Seg*, const Seg*> Range(int64_t lo, int64_t hi) const;
    void PruneBefore(int64_t t);            // drops segments that end at or before t
    size_t CountReaching(int64_t t) const;  // segments that end after t
    size_t capacity_bytes() const {
      return (v_.capacity() + side_.capacity() + scratch_.capacity()) * sizeof(Seg);
    }

   private:
    void InsertSlow(int64_t s, int64_t e);
    std::vector<Seg> v_, side_, scratch_;
  };
  // Per open window: kernels counted where they start, and the NCCL kernels that end in it and
  // were kept for attribution (the first attributions_per_window_ of them, in arrival order).
  struct WindowCount {
    int64_t start;
    uint64_t kernels, nccl;
    uint32_t attributable;
  };
  // The figures of a part [lo, hi) of a window: |C|, |N|, |M|, |C ∪ N|, |C ∪ N ∪ M|.
  struct Figures {
    int64_t c = 0, n = 0, m = 0, k = 0, all = 0;
  };
  struct Span {
    int64_t from, to;
    uint32_t reason;
  };
  WindowCount* CountFor(int64_t t);  // null beyond kMaxCountedWindows
  Figures Measure(int64_t lo, int64_t hi) const;
  void CloseWindow(int64_t a, int64_t b, AccountingOutput* out);
  void AttributeClosed(AccountingOutput* out);

  int64_t window_ns_;
  bool begun_ = false;
  int64_t closed_until_ = 0;
  // Unions of compute (C), NCCL (N) and memcpy/memset (M) busy time. At a window's close one
  // merged walk gives |C ∪ N| and |C ∪ N ∪ M|: overlap = |C| + |N| - |C ∪ N|, idle = length -
  // |C ∪ N ∪ M|. C reaches back as far as NCCL attribution needs it; N and M end at the closed
  // edge.
  Union compute_, nccl_, memcpy_;
  std::vector<WindowCount> counts_;        // sorted by start, windows >= closed_until_
  int64_t count_from_ = 0, count_to_ = 0;  // the window of counts_[count_i_] (cache for Add)
  size_t count_i_ = 0;
  std::vector<Span> not_measured_;
  std::vector<int64_t> boundaries_;  // step boundaries > closed_until_, sorted on use
  // The current (open) step and its running figures.
  bool in_step_ = false;
  StepResult step_{};
  int64_t step_busy_ = 0, step_nccl_ = 0, step_overlap_ = 0;
  std::vector<Interval> nccl_open_;  // NCCL kernels not yet attributed (end > closed_until_)
  uint32_t attributions_per_window_ = UINT32_MAX;
  uint64_t attributions_suppressed_ = 0;
  uint64_t dropped_ = 0;
  uint64_t late_ = 0;
  uint64_t late_total_ = 0;
  uint32_t device_ = 0;
};

}  // namespace sentinel::plugin::cupti
