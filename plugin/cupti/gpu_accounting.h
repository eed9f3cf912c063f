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

  // At most n attributions per closed window (the rest are counted, not computed).
  void set_attributions_per_window(uint32_t n) { attributions_per_window_ = n; }
  uint64_t attributions_suppressed() const { return attributions_suppressed_; }

  int64_t closed_until() const { return closed_until_; }
  uint64_t late_total() const { return late_total_; }
  size_t pending() const { return pending_.size(); }

 private:
  struct Point {
    int64_t t;
    int8_t delta;  // +1 start, -1 end
    uint8_t kind;
  };
  struct Span {
    int64_t from, to;
    uint32_t reason;
  };
  void CloseWindow(int64_t a, int64_t b, AccountingOutput* out);
  void AttributeClosed(uint64_t windows_closed, AccountingOutput* out);

  int64_t window_ns_;
  bool begun_ = false;
  int64_t closed_until_ = 0;
  std::vector<Interval> pending_;                      // intervals that reach past closed_until_
  std::vector<Interval> carry_;                        // scratch for pruning
  std::vector<Point> points_;                          // scratch for the sweep
  std::vector<Point> starts_, ends_, extra_, merged_;  // scratch: sorted runs merged in O(n)
  bool pending_sorted_ = true;  // pending_ is in start order (the usual case: no sort needed)
  int64_t last_start_ = INT64_MIN;
  std::vector<Span> not_measured_;
  std::vector<int64_t> boundaries_;  // step boundaries > closed_until_, sorted on use
  // The current (open) step and its running figures.
  bool in_step_ = false;
  StepResult step_{};
  int64_t step_busy_ = 0, step_nccl_ = 0, step_overlap_ = 0;
  // Compute union of recently closed time (disjoint, sorted) for NCCL attribution.
  std::vector<std::pair<int64_t, int64_t>> compute_union_;
  std::vector<Interval> nccl_open_;  // NCCL kernels not yet attributed (end > closed_until_)
  uint32_t attributions_per_window_ = UINT32_MAX;
  uint64_t attributions_suppressed_ = 0;
  uint64_t dropped_ = 0;
  uint64_t late_ = 0;
  uint64_t late_total_ = 0;
  uint32_t device_ = 0;
};

}  // namespace sentinel::plugin::cupti
