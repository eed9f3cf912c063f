// common/collective_bandwidth.h: nccl-tests' bus-bandwidth factors, and the ratios sentineld and
// sentinel-baseline both print.
#include "common/collective_bandwidth.h"

#include "gtest/gtest.h"

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::rules {
namespace {

TEST(BusBwFactor, MatchesNcclTestsPerFunction) {
  EXPECT_DOUBLE_EQ(BusBwFactor(kSentinelFuncAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusBwFactor(kSentinelFuncAllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(BusBwFactor(kSentinelFuncReduceScatter, 16), 15.0 / 16);
  EXPECT_DOUBLE_EQ(BusBwFactor(kSentinelFuncAlltoAll, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(BusBwFactor(kSentinelFuncGather, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(BusBwFactor(kSentinelFuncScatter, 4), 3.0 / 4);
  for (uint8_t f : {kSentinelFuncBroadcast, kSentinelFuncReduce, kSentinelFuncSend,
                    kSentinelFuncRecv, kSentinelFuncSendRecv}) {
    EXPECT_DOUBLE_EQ(BusBwFactor(f, 8), 1.0) << int{f};
  }
}

// The case the two former copies disagreed on: one rank moves nothing over a link.
TEST(BusBwFactor, OneRankCrossesNoLink) {
  for (uint8_t f : {kSentinelFuncAllReduce, kSentinelFuncAllGather, kSentinelFuncReduceScatter,
                    kSentinelFuncAlltoAll, kSentinelFuncGather, kSentinelFuncScatter}) {
    EXPECT_DOUBLE_EQ(BusBwFactor(f, 1), 0.0) << int{f};
  }
  EXPECT_DOUBLE_EQ(BusBwFactor(kSentinelFuncBroadcast, 1), 1.0);
}

TEST(BusBwFactor, UnknownSizeOrFunctionGivesNoFigure) {
  EXPECT_DOUBLE_EQ(BusBwFactor(kSentinelFuncAllReduce, 0), 0.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(kSentinelFuncAllReduce, -3), 0.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(kSentinelFuncUnknown, 8), 0.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(200, 8), 0.0);
}

TEST(AlgBw, BytesPerNanosecondIsGBs) {
  EXPECT_DOUBLE_EQ(AlgBwGBs(uint64_t{1} << 30, 10e6), 107.3741824);  // 1 GiB in 10 ms
  EXPECT_DOUBLE_EQ(AlgBwGBs(1000, 0), 0.0);
  EXPECT_DOUBLE_EQ(LinkGBs(400), 50.0);  // 400 Gb/s
}

TEST(BandwidthRatio, UnknownWhenEitherSideIsMissing) {
  EXPECT_DOUBLE_EQ(BandwidthRatio(20.132, 25.0), 20.132 / 25.0);
  EXPECT_DOUBLE_EQ(BandwidthRatio(0, 25.0), 0.0);  // measured, and zero
  EXPECT_DOUBLE_EQ(BandwidthRatio(-1, 25.0), -1);  // the job has no figure
  EXPECT_DOUBLE_EQ(BandwidthRatio(20.0, 0), -1);   // no reference
  EXPECT_DOUBLE_EQ(BandwidthRatio(20.0, LinkGBs(-1)), -1);
}

}  // namespace
}  // namespace sentinel::rules
