// The one writer of Prometheus text exposition (0.0.4) families: every /metrics family opens a
// PromFamily, which writes its # HELP and # TYPE lines once, then appends its samples.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"

#include "collector/aggregate/stats.h"

namespace sentinel::collector {

enum class PromType { kCounter, kGauge, kHistogram, kSummary };

// A label value as the exposition format wants it: backslash, double quote and newline escaped.
std::string PrometheusLabelEscape(absl::string_view v);

// `k1="v1",k2="v2"`: each value escaped (PrometheusLabelEscape); the keys are ours and kept as
// they are.
std::string PromLabels(std::initializer_list<std::pair<absl::string_view, std::string>> labels);

// One family appended to `out`. Not thread-safe; `out` is not owned and must outlive it. A family
// given no samples is its two header lines only (Prometheus accepts an empty family).
class PromFamily {
 public:
  PromFamily(std::string* out, absl::string_view name, PromType type, absl::string_view help);

  // `name{labels} value` (no braces when `labels` is empty), the value as %.17g: a double
  // survives the round trip exactly.
  void Add(absl::string_view labels, double value);
  // The value as a decimal integer.
  void AddCount(absl::string_view labels, uint64_t value);
  // The value with six significant digits (absl::StrCat's form of a double), as the
  // sentinel_net_* families have always been written.
  void AddSixDigits(absl::string_view labels, double value);
  // `name<suffix>{labels} value` (%.17g): a summary's _sum and _count.
  void AddSuffixed(absl::string_view suffix, absl::string_view labels, double value);
  // The series of one histogram over kLatencyBucketsS: cumulative _bucket{le} samples, the +Inf
  // bucket, _sum and _count.
  void AddHistogram(absl::string_view labels, const Histogram& h);

 private:
  void Line(absl::string_view suffix, absl::string_view labels, absl::string_view value);

  std::string* out_;
  std::string name_;
};

}  // namespace sentinel::collector
