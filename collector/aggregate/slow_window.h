// The window-to-span classifier of the slow-cause judgement (slow_cause.h): the usual of one
// communicator's (function, size bucket), the verdict on each of its joined collectives (slow or
// not, and a slow one's excess split into waiting for late ranks and slower transfer), and the span
// of slow windows each slow one joins. The thresholds' formulas: collector/README.md, "Late rank or
// network".
#pragma once

#include <cstdint>
#include <vector>

#include "collector/aggregate/slow_cause_types.h"
#include "collector/base/ring.h"

namespace sentinel::collector {

// What one window was judged to be.
struct WindowVerdict {
  bool slow = false;
  int64_t usual_ns = 0;       // the usual duration: usual skew + usual transfer
  int64_t usual_skew_ns = 0;  // the usual spread of the local arrivals
  int64_t total_ns = 0;       // this window's duration
  int64_t skew_ns = 0;        // this window's spread of the local arrivals
  int64_t excess_ns = 0;      // total - usual
  int64_t late_ns = 0;      // the last arrival's lateness beyond the usual skew, within the excess
  int64_t transfer_ns = 0;  // the rest of the excess
};

// One (function, size bucket)'s recent ordinary windows: the medians of their arrival skew and
// of their transfer (after the last arrival) are the usual, 1.4826 x the MAD of their durations
// the spread.
class WindowUsual {
 public:
  // The medians move slowly: they are taken again once kRefreshMinPushes windows were learned
  // since, and kRefreshMinNs of the job's time passed (at 20,000 collectives a second, four
  // medians of 64 every 8 windows were a sixth of sentineld's CPU per record) or
  // kRefreshMaxPushes were learned (the usual never stands for more than a history's worth).
  static constexpr int kRefreshMinPushes = 8;
  static constexpr int kRefreshMaxPushes = 64;
  static constexpr int64_t kRefreshMinNs = 10000000;

  // Starts learning (func, bucket) afresh with room for `history` windows.
  void Start(uint8_t func, int bucket, int history, int64_t now_ns);
  bool Is(uint8_t func, int bucket) const { return func_ == func && bucket_ == bucket; }
  void Touch(int64_t now_ns) { last_used_ns_ = now_ns; }
  int64_t last_used_ns() const { return last_used_ns_; }

  // Judges `w` and learns it when ordinary (or while fewer than min_history are known: never
  // slow then). Slow windows stay out of the usual, unless nearly all have been slow for
  // relearn_after_ns: then the usual is learned again.
  WindowVerdict Judge(const WindowObservation& w, const SlowCauseParams& p);

 private:
  void Learn(int64_t skew, int64_t transfer, int64_t total);
  void RefreshUsual(int64_t now_ns);
  void Relearn();

  uint8_t func_ = 0;
  int bucket_ = 0;
  Ring<int64_t> skew_;
  Ring<int64_t> transfer_;
  Ring<int64_t> total_;
  int64_t skew0_ = 0;
  int64_t transfer0_ = 0;
  int64_t spread_ = 0;  // 1.4826 x MAD of total
  int pushes_since_cache_ = 1 << 30;
  int64_t refreshed_at_ns_ = 0;  // the window end (job time) at the last refresh
  double slow_fraction_ = 0;     // decayed share of slow windows
  int64_t mostly_slow_since_ = INT64_MIN;
  int64_t last_used_ns_ = 0;
};

// The usual of (func, bucket) among a communicator's `usual` (at most `max_keys`: beyond, the one
// used longest ago learns the new key).
WindowUsual* UsualFor(std::vector<WindowUsual>* usual, size_t max_keys, uint8_t func, int bucket,
                      int history, int64_t now_ns);

// Whether slow window `w` joins `last`, the communicator's latest span: still open, the same
// (function, size bucket) and the same side of the split (waiting or transfer dominant), within
// coalesce_gap_ns of its end and span_max_ns of its start.
bool JoinsSpan(const SlowSpan& last, const WindowObservation& w, const WindowVerdict& v,
               const SlowCauseParams& p);
// A new span for slow window `w` (AddToSpan then counts it).
SlowSpan OpenSpan(const WindowObservation& w, const WindowVerdict& v);
// Counts slow window `w` into `span`, and the ranks that account for its waiting: those within
// half of the latest one's lateness beyond the usual skew.
void AddToSpan(const WindowObservation& w, const WindowVerdict& v, SlowSpan* span);

}  // namespace sentinel::collector
