// Query parameter lookup and value parsing: see http_request.h.
#include "collector/export/http_request.h"

#include "absl/status/statusor.h"

#include "collector/config/config.h"

namespace sentinel::collector {

bool HttpRequest::has_param(std::string_view name) const {
  for (const auto& [k, v] : params) {
    if (k == name) return true;
  }
  return false;
}

std::string HttpRequest::get_param_value(std::string_view name) const {
  for (const auto& [k, v] : params) {
    if (k == name) return v;
  }
  return "";
}

size_t CountQueryParams(std::string_view target) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos || q + 1 == target.size()) return 0;
  size_t n = 1;
  for (size_t i = q + 1; i < target.size(); ++i) n += target[i] == '&' ? 1 : 0;
  return n;
}

absl::StatusOr<int64_t> ParseDurationParam(std::string_view value) {
  absl::StatusOr<int64_t> d = ParseDurationNs(absl::string_view(value.data(), value.size()));
  if (!d.ok()) return absl::InvalidArgumentError(d.status().message());
  if (*d <= 0) return absl::InvalidArgumentError("must be > 0");
  return *d;
}

}  // namespace sentinel::collector
