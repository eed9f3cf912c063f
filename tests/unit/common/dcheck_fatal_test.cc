// SENTINEL_DCHECK as Debug and sanitizer builds have it (SENTINEL_DCHECK_FATAL=1, whatever this
// build's type): a broken invariant prints itself and its place and aborts; one that holds costs
// one evaluation of its condition. The release form: dcheck_release_test.cc.
#undef SENTINEL_DCHECK_FATAL
#define SENTINEL_DCHECK_FATAL 1

#include <gtest/gtest.h>

#include "common/dcheck.h"

namespace sentinel::rules {
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

TEST(DcheckFatal, EvaluatesItsConditionOnce) {
  int evaluations = 0;
  SENTINEL_DCHECK(++evaluations > 0);
  EXPECT_EQ(evaluations, 1);
}

}  // namespace
}  // namespace sentinel::rules
