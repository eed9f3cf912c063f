// Robust statistics of the slow-cause judgement (slow_cause.h): one median and one median
// absolute deviation for every figure it takes, integer nanoseconds or rates.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace sentinel::collector {

// The median absolute deviation times this is the standard deviation of normal noise.
inline constexpr double kMadToSigma = 1.4826;
// The mean absolute deviation from the median times this (sqrt(pi / 2)) is too.
inline constexpr double kMeanAbsDevToSigma = 1.2533;

// The median: the middle value once sorted, of an even count the midpoint of the middle two (with
// two NIC ports, "above the other port" must not read as "above the upper of both"). T{} when
// empty. Reorders `values`.
template <typename T>
T MedianInPlace(std::vector<T>* values) {
  if (values->empty()) return T{};
  const size_t n = values->size();
  const auto mid = values->begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(values->begin(), mid, values->end());
  if (n % 2 == 1) return *mid;
  const T below = *std::max_element(values->begin(), mid);
  return below + (*mid - below) / 2;
}

template <typename T>
T Median(std::vector<T> values) {
  return MedianInPlace(&values);
}

// The median of |x - median| over `values`; `scratch` receives the deviations in their order.
template <typename T>
T MedianAbsDeviation(const std::vector<T>& values, T median, std::vector<T>* scratch) {
  scratch->clear();
  for (const T& x : values) scratch->push_back(std::abs(x - median));
  return MedianInPlace(scratch);
}

// A standard deviation of `values` around their `median` that few values and outliers do not
// fool: the larger of kMadToSigma x their median absolute deviation and kMeanAbsDevToSigma x their
// mean absolute deviation (the MAD alone is far too small when a dozen values fall in two
// clusters). 0 when every value is the median.
inline double RobustSpread(const std::vector<double>& values, double median) {
  if (values.empty()) return 0;
  std::vector<double> dev;
  dev.reserve(values.size());
  double sum = 0;  // in the values' order, before the median reorders them
  for (double x : values) {
    dev.push_back(std::abs(x - median));
    sum += dev.back();
  }
  const double mad = MedianInPlace(&dev);
  return std::max(kMadToSigma * mad, kMeanAbsDevToSigma * sum / static_cast<double>(values.size()));
}

}  // namespace sentinel::collector
