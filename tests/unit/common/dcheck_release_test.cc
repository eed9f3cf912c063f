// SENTINEL_DCHECK as a release build has it (SENTINEL_DCHECK_FATAL=0, whatever this build's type):
// compiled out, its condition never evaluated, so a broken one does nothing and one with a side
// effect has none. That it is still type-checked: dcheck_typecheck_bad.cc (ctest
// rules_dcheck_release_typechecks). The fatal form: dcheck_fatal_test.cc.
#undef SENTINEL_DCHECK_FATAL
#define SENTINEL_DCHECK_FATAL 0

#include <gtest/gtest.h>

#include "common/dcheck.h"

namespace sentinel::rules {
namespace {

int calls = 0;
bool CountedFalse() {
  ++calls;
  return false;
}

TEST(DcheckRelease, DoesNotEvaluateItsCondition) {
  calls = 0;
  int evaluations = 0;
  SENTINEL_DCHECK(++evaluations > 0);
  SENTINEL_DCHECK(CountedFalse());  // broken, and still nothing happens
  EXPECT_EQ(evaluations, 0);
  EXPECT_EQ(calls, 0);
}

TEST(DcheckRelease, IsOneStatementUnderAnIf) {
  int evaluations = 0;
  bool reached_else = false;
  if (evaluations != 0)
    SENTINEL_DCHECK(++evaluations > 0);
  else
    reached_else = true;
  EXPECT_TRUE(reached_else);
  EXPECT_EQ(evaluations, 0);
}

}  // namespace
}  // namespace sentinel::rules
