// The slow-cause judgement's robust statistics (collector/aggregate/robust_stats.h): one median
// convention for integers and rates (an even count takes the midpoint of the middle two), the
// median absolute deviation and the spread built on it.
#include "collector/aggregate/robust_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sentinel::collector {
namespace {

TEST(RobustStats, MedianOfAnOddCountIsTheMiddleValue) {
  EXPECT_EQ(Median(std::vector<int64_t>{5, 1, 3}), 3);
  EXPECT_EQ(Median(std::vector<double>{2.5, -1.0, 9.0, 4.0, 0.5}), 2.5);
}

TEST(RobustStats, MedianOfAnEvenCountIsTheMidpointOfTheMiddleTwo) {
  // The same rule for integers (rounded toward the lower) and rates: with two ports, one far
  // above the other is above their median.
  EXPECT_EQ(Median(std::vector<int64_t>{4, 1, 3, 2}), 2);
  EXPECT_EQ(Median(std::vector<int64_t>{40, 10, 30, 20}), 25);
  EXPECT_EQ(Median(std::vector<double>{10.0, 40.0, 20.0, 30.0}), 25.0);
  EXPECT_EQ(Median(std::vector<double>{1.0, 9.0}), 5.0);
  EXPECT_EQ(Median(std::vector<double>{1.0, 2.0, 2.0, 9.0, 9.0, 9.0}), 5.5);
}

TEST(RobustStats, MedianOfNothingIsZero) {
  EXPECT_EQ(Median(std::vector<int64_t>{}), 0);
  EXPECT_EQ(Median(std::vector<double>{}), 0.0);
}

TEST(RobustStats, MedianMatchesASortedReference) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> value(-1000, 1000);
  for (size_t n = 1; n <= 64; ++n) {
    std::vector<double> v(n);
    for (double& x : v) x = static_cast<double>(value(rng));
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    const double want =
        n % 2 == 1 ? sorted[n / 2] : sorted[n / 2 - 1] + (sorted[n / 2] - sorted[n / 2 - 1]) / 2;
    EXPECT_EQ(Median(v), want) << n;
  }
}

TEST(RobustStats, MedianAbsDeviationIgnoresAnOutlier) {
  std::vector<int64_t> dev;
  // Deviations from 3: 2, 1, 0, 1, 97 -> 1.
  EXPECT_EQ(MedianAbsDeviation(std::vector<int64_t>{1, 2, 3, 4, 100}, int64_t{3}, &dev), 1);
  EXPECT_EQ(dev.size(), 5u);
  std::vector<double> ddev;
  // Deviations from 2: 2, 1, 1, 3 -> the midpoint of the middle two, 1.5.
  EXPECT_EQ(MedianAbsDeviation(std::vector<double>{0.0, 1.0, 3.0, 5.0}, 2.0, &ddev), 1.5);
}

TEST(RobustStats, SpreadIsTheLargerOfTheMadAndMeanDeviationEstimates) {
  // Tight around the median with one outlier: 1.2533 x the mean deviation (22/5) beats 1.4826 x
  // the MAD (1).
  const std::vector<double> tight = {9.0, 10.0, 10.0, 11.0, 30.0};
  EXPECT_DOUBLE_EQ(RobustSpread(tight, 10.0), std::max(1.4826 * 1.0, 1.2533 * 22.0 / 5.0));
  EXPECT_DOUBLE_EQ(RobustSpread(tight, 10.0), 1.2533 * 22.0 / 5.0);
  // Two clusters, the median on one of them: the MAD is 0, the mean deviation is not.
  const std::vector<double> clusters = {1.0, 1.0, 1.0, 5.0, 5.0};
  EXPECT_DOUBLE_EQ(RobustSpread(clusters, 1.0), 1.2533 * 8.0 / 5.0);
  // Normal-ish: the MAD's estimate wins when the deviations are even.
  const std::vector<double> even = {7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0};
  EXPECT_DOUBLE_EQ(RobustSpread(even, 10.0), std::max(1.4826 * 2.0, 1.2533 * 12.0 / 7.0));
  EXPECT_DOUBLE_EQ(RobustSpread(even, 10.0), 1.4826 * 2.0);
}

TEST(RobustStats, SpreadOfFlatValuesOrNoneIsZero) {
  EXPECT_EQ(RobustSpread({4.0, 4.0, 4.0}, 4.0), 0.0);
  EXPECT_EQ(RobustSpread({}, 0.0), 0.0);
}

TEST(RobustStats, TheFactorsAreTheNormalNoiseOnes) {
  // 1 / Phi^-1(3/4) and sqrt(pi / 2), to the digits every figure was measured with.
  EXPECT_EQ(kMadToSigma, 1.4826);
  EXPECT_EQ(kMeanAbsDevToSigma, 1.2533);
  EXPECT_NEAR(kMeanAbsDevToSigma, std::sqrt(std::acos(-1.0) / 2), 1e-4);
}

}  // namespace
}  // namespace sentinel::collector
