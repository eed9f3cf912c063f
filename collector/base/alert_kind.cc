// Alert kinds and the --exclude-kinds list: see alert_kind.h.
#include "collector/base/alert_kind.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sentinel::collector {

const char* AlertKindName(AlertKind kind) {
  switch (kind) {
    case AlertKind::kStraggler:
      return "straggler";
    case AlertKind::kHang:
      return "hang";
    case AlertKind::kTransport:
      return "transport";
    case AlertKind::kPlacement:
      return "placement";
    case AlertKind::kLinkDegraded:
      return "link_degraded";
    case AlertKind::kNicErrors:
      return "nic_errors";
  }
  return "unknown";
}

absl::StatusOr<uint32_t> ParseExcludeKinds(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text == "none") return 0u;
  uint32_t mask = 0;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    bool known = false;
    for (int k = 0; k < kAlertKindCount; ++k) {
      if (item == AlertKindName(static_cast<AlertKind>(k))) {
        mask |= 1u << k;
        known = true;
      }
    }
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--exclude-kinds: unknown alert kind '", item,
          "' (expected a comma list of straggler, hang, transport, placement, link_degraded, "
          "nic_errors, or none)"));
    }
  }
  return mask;
}

std::string ExcludeKindsText(uint32_t kinds) {
  std::vector<std::string> names;
  for (int k = 0; k < kAlertKindCount; ++k) {
    if ((kinds & (1u << k)) != 0) names.emplace_back(AlertKindName(static_cast<AlertKind>(k)));
  }
  return names.empty() ? "none" : absl::StrJoin(names, ",");
}

}  // namespace sentinel::collector
