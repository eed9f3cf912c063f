// The message-size buckets (collector/aggregate/stats.h): <=1 KiB, then x4 each up to >1 GiB,
// checked against the definition written as a loop, at every boundary and its neighbours.
#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

#include "collector/aggregate/stats.h"

namespace sentinel::collector {
namespace {

int BucketByDefinition(uint64_t bytes) {
  uint64_t limit = 1024;
  for (int b = 0; b < kSizeBuckets - 1; ++b) {
    if (bytes <= limit) return b;
    limit *= 4;
  }
  return kSizeBuckets - 1;
}

TEST(SizeBucket, MatchesTheDefinitionAtEveryBoundary) {
  for (int shift = 0; shift < 64; ++shift) {
    const uint64_t p = uint64_t{1} << shift;
    for (uint64_t bytes : {p - 1, p, p + 1, p + p / 2}) {
      EXPECT_EQ(SizeBucket(bytes), BucketByDefinition(bytes)) << bytes;
    }
  }
  EXPECT_EQ(SizeBucket(0), 0);
  EXPECT_EQ(SizeBucket(1024), 0);
  EXPECT_EQ(SizeBucket(1025), 1);
  EXPECT_EQ(SizeBucket(uint64_t{1} << 30), kSizeBuckets - 2);  // <=1GiB
  EXPECT_EQ(SizeBucket((uint64_t{1} << 30) + 1), kSizeBuckets - 1);
  EXPECT_EQ(SizeBucket(std::numeric_limits<uint64_t>::max()), kSizeBuckets - 1);
  EXPECT_STREQ(SizeBucketLabel(SizeBucket(4096)), "<=4KiB");
}

}  // namespace
}  // namespace sentinel::collector
