// What sentineld's HTTP handlers see of a request, and the part of request parsing that is still
// ours: the VALUES of query parameters (libmicrohttpd parses the request line, the headers and
// the query string; fuzzed by http_request_fuzzer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace sentinel::collector {

// Limits of one request head; past them the request is refused (414 / 431). libmicrohttpd's
// connection memory (kMaxRequestHead plus slack) refuses far larger heads before we see them.
inline constexpr size_t kMaxRequestLine = 8192;
inline constexpr size_t kMaxRequestHead = 16384;
// Query parameters one request may carry (an endpoint reads one): more is a 400. Each parameter
// costs libmicrohttpd a record in the connection's memory pool, and a request whose parameters
// overflow it was left unanswered.
inline constexpr size_t kMaxQueryParams = 64;

// The parameters in a raw request target ("/path?a=1&b=2": 2), as libmicrohttpd splits them.
size_t CountQueryParams(std::string_view target);

struct HttpRequest {
  std::string method;
  std::string path;                                         // without the query string
  std::vector<std::pair<std::string, std::string>> params;  // decoded by libmicrohttpd

  bool has_param(std::string_view name) const;
  // The first value of `name`, or "" when absent.
  std::string get_param_value(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain";
  void set_content(std::string b, std::string type) {
    body = std::move(b);
    content_type = std::move(type);
  }
};

// A duration query parameter's value ("30s", "500ms", ...) in ns, > 0; or an InvalidArgument
// whose message says why ("must be > 0" or the duration parser's message).
absl::StatusOr<int64_t> ParseDurationParam(std::string_view value);

}  // namespace sentinel::collector
