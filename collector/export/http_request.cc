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

bool ParseDurationParam(std::string_view value, int64_t* ns, std::string* error) {
  absl::StatusOr<int64_t> d = ParseDurationNs(absl::string_view(value.data(), value.size()));
  if (!d.ok()) {
    *error = std::string(d.status().message());
    return false;
  }
  if (*d <= 0) {
    *error = "must be > 0";
    return false;
  }
  *ns = *d;
  return true;
}

}  // namespace sentinel::collector
