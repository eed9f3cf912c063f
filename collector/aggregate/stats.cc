// Size buckets, percentiles and the NCCL enum names used in labels and JSON.
#include "collector/aggregate/stats.h"

#include <cmath>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

int SizeBucket(uint64_t bytes) {
  uint64_t limit = 1024;
  for (int b = 0; b < kSizeBuckets - 1; ++b) {
    if (bytes <= limit) return b;
    limit *= 4;
  }
  return kSizeBuckets - 1;
}

const char* SizeBucketLabel(int bucket) {
  static constexpr const char* kLabels[kSizeBuckets] = {
      "<=1KiB", "<=4KiB",  "<=16KiB", "<=64KiB",  "<=256KiB", "<=1MiB",
      "<=4MiB", "<=16MiB", "<=64MiB", "<=256MiB", "<=1GiB",   ">1GiB"};
  if (bucket < 0 || bucket >= kSizeBuckets) return "unknown";
  return kLabels[bucket];
}

int64_t Percentile(std::vector<int64_t>* values, double pct) {
  if (values->empty()) return 0;
  size_t k =
      static_cast<size_t>(std::lround(pct / 100.0 * static_cast<double>(values->size() - 1)));
  k = std::min(k, values->size() - 1);
  std::nth_element(values->begin(), values->begin() + static_cast<std::ptrdiff_t>(k),
                   values->end());
  return (*values)[k];
}

}  // namespace sentinel::collector
