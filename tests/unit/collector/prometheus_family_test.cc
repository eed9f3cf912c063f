// collector/export/prometheus_family: the one writer of /metrics families. Its header comes once
// per family, an empty family is its header alone, label values are escaped and keys are not,
// and each sample form writes the value as the families always have.
#include "collector/export/prometheus_family.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace sentinel::collector {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(PromFamily, HeaderOnceThenSamples) {
  std::string out;
  PromFamily f(&out, "sentinel_x_total", PromType::kCounter, "Things, by kind.");
  f.Add(PromLabels({{"kind", "a"}}), 1);
  f.Add(PromLabels({{"kind", "b"}}), 2);
  f.Add("", 3);
  EXPECT_EQ(out,
            "# HELP sentinel_x_total Things, by kind.\n"
            "# TYPE sentinel_x_total counter\n"
            "sentinel_x_total{kind=\"a\"} 1\n"
            "sentinel_x_total{kind=\"b\"} 2\n"
            "sentinel_x_total 3\n");
  EXPECT_EQ(Count(out, "# HELP"), 1u);
  EXPECT_EQ(Count(out, "# TYPE"), 1u);
}

TEST(PromFamily, EmptyFamilyIsItsHeaderAlone) {
  std::string out = "before\n";
  const PromFamily y(&out, "sentinel_y", PromType::kGauge, "Nothing yet.");
  const PromFamily z(&out, "sentinel_z_seconds", PromType::kHistogram, "H.");
  const PromFamily w(&out, "sentinel_w_seconds", PromType::kSummary, "S.");
  EXPECT_EQ(out,
            "before\n"
            "# HELP sentinel_y Nothing yet.\n# TYPE sentinel_y gauge\n"
            "# HELP sentinel_z_seconds H.\n# TYPE sentinel_z_seconds histogram\n"
            "# HELP sentinel_w_seconds S.\n# TYPE sentinel_w_seconds summary\n");
}

TEST(PromFamily, LabelValuesEscapedKeysKept) {
  EXPECT_EQ(PrometheusLabelEscape("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(PrometheusLabelEscape("plain-host_1"), "plain-host_1");
  EXPECT_EQ(PromLabels({{"host", "x\"y"}, {"dev", "m\\5"}, {"note", "1\n2"}}),
            "host=\"x\\\"y\",dev=\"m\\\\5\",note=\"1\\n2\"");
  EXPECT_EQ(PromLabels({{"empty", ""}}), "empty=\"\"");
  std::string out;
  PromFamily f(&out, "sentinel_h", PromType::kGauge, "Hosts.");
  f.Add(PromLabels({{"host", "bad\"host\n"}}), 1);
  EXPECT_NE(out.find("sentinel_h{host=\"bad\\\"host\\n\"} 1\n"), std::string::npos) << out;
}

TEST(PromFamily, ValueForms) {
  std::string out;
  PromFamily f(&out, "m", PromType::kGauge, "h");
  out.clear();
  f.Add("", 0.1);                          // exact round trip
  f.AddCount("a=\"1\"", UINT64_MAX);       // every digit of a counter
  f.AddSixDigits("a=\"2\"", 123456789.0);  // the sentinel_net_* form
  f.AddSixDigits("a=\"3\"", 2004);
  f.AddSuffixed("_sum", "a=\"4\"", 0.5);
  EXPECT_EQ(out,
            "m 0.10000000000000001\n"
            "m{a=\"1\"} 18446744073709551615\n"
            "m{a=\"2\"} 1.23457e+08\n"
            "m{a=\"3\"} 2004\n"
            "m_sum{a=\"4\"} 0.5\n");
}

TEST(PromFamily, HistogramIsCumulative) {
  Histogram h;
  h.AddNs(5000);          // <= 1e-5
  h.AddNs(5000);          // <= 1e-5
  h.AddNs(3000000);       // <= 5e-3
  h.AddNs(9000000000LL);  // +Inf
  std::string out;
  PromFamily f(&out, "d_seconds", PromType::kHistogram, "h");
  out.clear();
  f.AddHistogram("r=\"1\"", h);
  EXPECT_EQ(Count(out, "d_seconds_bucket{"), kLatencyBucketsS.size() + 1);
  EXPECT_NE(out.find("d_seconds_bucket{r=\"1\",le=\"1e-05\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("d_seconds_bucket{r=\"1\",le=\"0.002\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("d_seconds_bucket{r=\"1\",le=\"0.005\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("d_seconds_bucket{r=\"1\",le=\"5\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("d_seconds_bucket{r=\"1\",le=\"+Inf\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("d_seconds_count{r=\"1\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("d_seconds_sum{r=\"1\"} 9.0030"), std::string::npos) << out;
  // Without labels, `le` is the only one.
  out.clear();
  f.AddHistogram("", h);
  EXPECT_EQ(out.find("d_seconds_bucket{le=\"1e-05\"} 2\n"), 0u) << out;
  EXPECT_NE(out.find("d_seconds_count 4\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace sentinel::collector
