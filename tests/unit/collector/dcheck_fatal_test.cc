// The collector's SENTINEL_DCHECK as Debug and sanitizer builds have it: abort with the condition.
#undef SENTINEL_DCHECK_FATAL
#define SENTINEL_DCHECK_FATAL 1

#include <gtest/gtest.h>

#include "collector/base/ring.h"
#include "common/dcheck.h"

namespace sentinel::collector {
namespace {

TEST(CollectorDcheckFatalDeathTest, AnEmptyRingIsNotIndexed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Ring<int> ring(2);
  EXPECT_DEATH((void)ring[0], "SENTINEL_DCHECK failed: i < size_ \\(.*ring.h:");
}

}  // namespace
}  // namespace sentinel::collector
