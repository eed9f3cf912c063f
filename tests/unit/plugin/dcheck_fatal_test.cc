// SENTINEL_DCHECK as the Debug and sanitizer builds have it: a broken invariant prints itself and
// aborts, so the test that reached it stops there. The release form: dcheck_release_test.cc.
#undef SENTINEL_DCHECK_FATAL
#define SENTINEL_DCHECK_FATAL 1

#include <gtest/gtest.h>

#include "plugin/base/dcheck.h"

namespace sentinel::plugin {
namespace {

int Checked(int value, int limit) {
  SENTINEL_DCHECK(value <= limit);
  return value;
}

TEST(DcheckFatalDeathTest, AbortsWithTheConditionAndPlace) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EQ(Checked(1, 2), 1);
  EXPECT_DEATH(Checked(3, 2), "SENTINEL_DCHECK failed: value <= limit \\(.*dcheck_fatal_test.cc:");
}

}  // namespace
}  // namespace sentinel::plugin
