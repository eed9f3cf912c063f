// The Prometheus family writer: see prometheus_family.h.
#include "collector/export/prometheus_family.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sentinel::collector {
namespace {

void AppendLabelEscaped(absl::string_view v, std::string* out) {
  for (const char c : v) {
    if (c == '\\' || c == '"') {
      out->push_back('\\');
      out->push_back(c);
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  }
}

const char* PromTypeName(PromType type) {
  switch (type) {
    case PromType::kCounter:
      return "counter";
    case PromType::kGauge:
      return "gauge";
    case PromType::kHistogram:
      return "histogram";
    case PromType::kSummary:
      return "summary";
  }
  return "untyped";
}

}  // namespace

std::string PrometheusLabelEscape(absl::string_view v) {
  std::string out;
  AppendLabelEscaped(v, &out);
  return out;
}

std::string PromLabels(std::initializer_list<std::pair<absl::string_view, std::string>> labels) {
  std::string out;
  for (const auto& [key, value] : labels) {
    if (!out.empty()) out.push_back(',');
    absl::StrAppend(&out, key, "=\"");
    AppendLabelEscaped(value, &out);
    out.push_back('"');
  }
  return out;
}

PromFamily::PromFamily(std::string* out, absl::string_view name, PromType type,
                       absl::string_view help)
    : out_(out), name_(name) {
  absl::StrAppend(out_, "# HELP ", name_, " ", help, "\n# TYPE ", name_, " ", PromTypeName(type),
                  "\n");
}

void PromFamily::Line(absl::string_view suffix, absl::string_view labels, absl::string_view value) {
  if (labels.empty()) {
    absl::StrAppend(out_, name_, suffix, " ", value, "\n");
  } else {
    absl::StrAppend(out_, name_, suffix, "{", labels, "} ", value, "\n");
  }
}

void PromFamily::Add(absl::string_view labels, double value) {
  Line("", labels, absl::StrFormat("%.17g", value));
}

void PromFamily::AddCount(absl::string_view labels, uint64_t value) {
  Line("", labels, absl::StrCat(value));
}

void PromFamily::AddSixDigits(absl::string_view labels, double value) {
  Line("", labels, absl::StrCat(value));
}

void PromFamily::AddSuffixed(absl::string_view suffix, absl::string_view labels, double value) {
  Line(suffix, labels, absl::StrFormat("%.17g", value));
}

void PromFamily::AddHistogram(absl::string_view labels, const Histogram& h) {
  const absl::string_view sep = labels.empty() ? "" : ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kLatencyBucketsS.size(); ++i) {
    cumulative += h.counts[i];
    AddSuffixed(
        "_bucket",
        absl::StrCat(labels, sep, "le=\"", absl::StrFormat("%g", kLatencyBucketsS[i]), "\""),
        static_cast<double>(cumulative));
  }
  AddSuffixed("_bucket", absl::StrCat(labels, sep, "le=\"+Inf\""), static_cast<double>(h.count));
  AddSuffixed("_sum", labels, h.sum);
  AddSuffixed("_count", labels, static_cast<double>(h.count));
}

}  // namespace sentinel::collector
