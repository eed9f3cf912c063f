// libFuzzer target: the part of sentineld's HTTP request handling that is still ours, the VALUES
// of query parameters (collector/export/http_request.h), and the count of parameters in a raw
// request target (taken before libmicrohttpd splits it). libmicrohttpd parses the request line,
// headers and query string and hands us decoded values, which may hold any bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "collector/export/http_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view value(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<int64_t> ns = sentinel::collector::ParseDurationParam(value);
  if (ns.ok()) {
    if (*ns <= 0) __builtin_trap();  // accepted durations are positive
  } else if (ns.status().message().empty()) {
    __builtin_trap();  // every refusal says why (it goes into the 400 body)
  }
  sentinel::collector::HttpRequest req;
  req.params.emplace_back("window", std::string(value));
  if (!req.has_param("window") || req.get_param_value("window") != value) __builtin_trap();
  // As many parameters as '&'-separated pieces after the first '?'; none without a query.
  const size_t params = sentinel::collector::CountQueryParams(value);
  const size_t q = value.find('?');
  if (q == std::string_view::npos || q + 1 == value.size()) {
    if (params != 0) __builtin_trap();
  } else if (params < 1 || params > value.size() - q) {
    __builtin_trap();
  }
  return 0;
}
