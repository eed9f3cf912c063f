// Parsing of --metrics-detail; see metrics_detail.h.
#include "collector/config/metrics_detail.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sentinel::collector {

absl::StatusOr<MetricsDetail> ParseMetricsDetail(absl::string_view text) {
  MetricsDetail out;
  text = absl::StripAsciiWhitespace(text);
  if (text == "none") return out;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item == "comm") {
      out.comm = true;
    } else if (item == "size") {
      out.size = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--metrics-detail: expected none or a comma list of comm, size, got '", text, "'"));
    }
  }
  return out;
}

}  // namespace sentinel::collector
