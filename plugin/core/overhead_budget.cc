#include "plugin/core/overhead_budget.h"

namespace sentinel::plugin {

const char* BudgetLevelName(BudgetLevel level) noexcept {
  switch (level) {
    case BudgetLevel::kFull:
      return "full";
    case BudgetLevel::kNoProxy:
      return "proxy events off";
    case BudgetLevel::kKernelChSampled:
      return "KernelCh on 1 of 8 collectives";
    case BudgetLevel::kRecordsSampled:
      return "records sampled 1 of 8";
  }
  return "unknown";
}

bool OverheadBudget::Observe(int64_t now_ns, uint64_t callback_ns_total) noexcept {
  if (!started_) {
    started_ = true;
    window_start_ns_ = now_ns;
    window_start_cb_ = callback_ns_total;
    return false;
  }
  int64_t elapsed = now_ns - window_start_ns_;
  if (elapsed < window_ns_ || elapsed <= 0) return false;
  uint64_t spent = callback_ns_total >= window_start_cb_ ? callback_ns_total - window_start_cb_ : 0;
  last_ratio_ = static_cast<double>(spent) / static_cast<double>(elapsed);
  window_start_ns_ = now_ns;
  window_start_cb_ = callback_ns_total;
  if (fraction_ <= 0 || last_ratio_ <= fraction_ || level_ == BudgetLevel::kRecordsSampled) {
    over_run_ = 0;
    return false;
  }
  if (++over_run_ < kBudgetConfirmWindows) return false;
  over_run_ = 0;  // the next step is watched for as many windows
  level_ = static_cast<BudgetLevel>(static_cast<uint8_t>(level_) + 1);
  return true;
}

}  // namespace sentinel::plugin
