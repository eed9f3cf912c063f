// Validation and replacement rule of the baseline store; see baseline_store.h.
#include "collector/aggregate/baseline_store.h"

#include "collector/aggregate/rank_range.h"

namespace sentinel::collector {

bool BaselineStore::Add(const SentinelWireBaseline& record, const std::string& host,
                        const std::string& job_id, int64_t now_real_ns) {
  const bool known_func = record.func == kSentinelFuncAllReduce ||
                          record.func == kSentinelFuncAllGather ||
                          record.func == kSentinelFuncReduceScatter;
  if (!known_func || !ValidCommSize(record.nranks) || record.time_ns <= 0 || record.bytes == 0 ||
      record.count == 0 || record.index >= record.count) {
    return false;
  }
  if (!has_run_ || record.run_id != run_.run_id) {
    run_ = Run();
    run_.run_id = record.run_id;
    run_.host = host;
    run_.job_id = job_id;
    has_run_ = true;
  }
  if (run_.records.size() >= kMaxRecords) return false;
  run_.records.push_back(record);
  run_.received_real_ns = now_real_ns;
  if ((record.flags & kSentinelBaselineLast) != 0) run_.complete = true;
  return true;
}

}  // namespace sentinel::collector
