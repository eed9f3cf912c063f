// Size buckets, percentiles and the NCCL enum names used in labels and JSON.
#include "collector/aggregate/stats.h"

#include <algorithm>
#include <cmath>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

int SizeBucket(uint64_t bytes) {
  // Bucket b holds (1024 * 4^(b-1), 1024 * 4^b]: the smallest b with bytes <= 2^(10 + 2b). With
  // k the bit length of bytes - 1 (bytes <= 2^k exactly when bytes - 1 < 2^k), that is
  // ceil((k - 10) / 2). Bit arithmetic, not a loop: it runs several times per record.
  if (bytes <= 1024) return 0;
  const int k = 64 - __builtin_clzll(bytes - 1);  // >= 11 here
  return std::min((k - 9) / 2, kSizeBuckets - 1);
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
