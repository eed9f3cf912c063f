// The alert kinds sentineld raises, their names, and the --exclude-kinds list of them. It sits in
// base/ so that config/ can validate the flag without reaching up into aggregate/.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sentinel::collector {

enum class AlertKind : uint8_t {
  kStraggler,
  kHang,
  kTransport,
  kPlacement,
  kLinkDegraded,
  kNicErrors,
};
inline constexpr int kAlertKindCount = 6;

// The name used in JSON, Prometheus labels and Alertmanager labels.
const char* AlertKindName(AlertKind kind);

// "straggler,nic_errors,link_degraded" (the default), any AlertKindName, or "none": a mask with
// bit (1 << AlertKind) set per kind named.
absl::StatusOr<uint32_t> ParseExcludeKinds(absl::string_view text);
// The mask back as a comma list in AlertKind order ("none" when empty).
std::string ExcludeKindsText(uint32_t kinds);
inline constexpr const char* kDefaultExcludeKinds = "straggler,nic_errors,link_degraded";

}  // namespace sentinel::collector
