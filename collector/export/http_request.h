// The HTTP/1.1 request head and query string, parsed without a socket (fuzzed by
// http_request_fuzzer). sentineld only serves GETs with a few query parameters: anything else is
// answered with the right status (400, 405, 414, 431) rather than guessed at.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sentinel::collector {

// Limits of one request head; past them the request is refused (414 / 431).
inline constexpr size_t kMaxRequestLine = 8192;
inline constexpr size_t kMaxRequestHead = 16384;

struct HttpRequest {
  std::string method;
  std::string path;  // without the query string
  std::vector<std::pair<std::string, std::string>> params;

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

// Decodes an application/x-www-form-urlencoded query ("a=1&b=x%20y"). False on a bad %-escape.
[[nodiscard]] bool ParseQuery(std::string_view query,
                              std::vector<std::pair<std::string, std::string>>* out);

// Result of looking at the bytes received so far.
enum class HeadStatus {
  kIncomplete,    // no blank line yet, and within the limits
  kComplete,      // *req filled; *head_size = bytes of the head including the blank line
  kBadRequest,    // 400: not "METHOD TARGET HTTP/1.x", or a bad query string
  kUriTooLong,    // 414: request line over kMaxRequestLine
  kHeadTooLarge,  // 431: head over kMaxRequestHead
  kBadVersion,    // 505: not HTTP/1.0 or 1.1
};

HeadStatus ParseRequestHead(std::string_view received, HttpRequest* req, size_t* head_size);

// "Bad Request", "Not Found", ...; "Error" for a code it does not know.
const char* HttpReason(int status);

}  // namespace sentinel::collector
