// The one communicator size and rank index check (collector/aggregate/rank_range.h) that records,
// CommInit, in-flight state and baseline results go through.
#include "collector/aggregate/rank_range.h"

#include "gtest/gtest.h"

namespace sentinel::collector {
namespace {

TEST(RankRange, CommSizeIsOneToTwoToTheTwentyFour) {
  EXPECT_FALSE(ValidCommSize(0));
  EXPECT_FALSE(ValidCommSize(-1));
  EXPECT_TRUE(ValidCommSize(1));
  EXPECT_TRUE(ValidCommSize(1 << 24));
  EXPECT_FALSE(ValidCommSize((1 << 24) + 1));
  EXPECT_FALSE(ValidCommSize(INT32_MAX));
}

TEST(RankRange, RankLiesInsideItsCommunicator) {
  EXPECT_TRUE(ValidRankIndex(0, 1));
  EXPECT_TRUE(ValidRankIndex(3, 4));
  EXPECT_FALSE(ValidRankIndex(4, 4));
  EXPECT_FALSE(ValidRankIndex(-1, 4));
  EXPECT_FALSE(ValidRankIndex(0, 0));
  EXPECT_FALSE(ValidRankIndex(0, -5));
  EXPECT_TRUE(ValidRankIndex((1 << 24) - 1, 1 << 24));
  EXPECT_FALSE(ValidRankIndex(1 << 24, (1 << 24) + 1));
}

}  // namespace
}  // namespace sentinel::collector
