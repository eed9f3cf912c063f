// Request-head and query-string parsing: see http_request.h.
#include "collector/export/http_request.h"

namespace sentinel::collector {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool Decode(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '+') {
      out->push_back(' ');
    } else if (c == '%') {
      if (i + 2 >= in.size()) return false;  // a '%' needs two hex digits
      const int hi = HexValue(in[i + 1]);
      const int lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out->push_back(c);
    }
  }
  return true;
}

}  // namespace

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

bool ParseQuery(std::string_view query, std::vector<std::pair<std::string, std::string>>* out) {
  out->clear();
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    std::string key;
    std::string value;
    if (!Decode(item.substr(0, eq), &key)) return false;
    if (eq != std::string_view::npos && !Decode(item.substr(eq + 1), &value)) return false;
    out->emplace_back(std::move(key), std::move(value));
  }
  return true;
}

HeadStatus ParseRequestHead(std::string_view received, HttpRequest* req, size_t* head_size) {
  const size_t line_end = received.find("\r\n");
  if (line_end == std::string_view::npos) {
    return received.size() > kMaxRequestLine ? HeadStatus::kUriTooLong : HeadStatus::kIncomplete;
  }
  if (line_end > kMaxRequestLine) return HeadStatus::kUriTooLong;
  const size_t end = received.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    return received.size() > kMaxRequestHead ? HeadStatus::kHeadTooLarge : HeadStatus::kIncomplete;
  }
  if (end + 4 > kMaxRequestHead) return HeadStatus::kHeadTooLarge;
  *head_size = end + 4;
  // METHOD SP TARGET SP HTTP/1.x, exactly.
  const std::string_view line = received.substr(0, line_end);
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return HeadStatus::kBadRequest;
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return HeadStatus::kBadRequest;
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  for (char c : method) {
    if (c < 'A' || c > 'Z') return HeadStatus::kBadRequest;
  }
  if (version.substr(0, 5) != "HTTP/") return HeadStatus::kBadRequest;
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return HeadStatus::kBadVersion;
  if (target.empty() || target[0] != '/') return HeadStatus::kBadRequest;
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return HeadStatus::kBadRequest;
  }
  req->method = std::string(method);
  const size_t q = target.find('?');
  req->path = std::string(target.substr(0, q));
  req->params.clear();
  if (q != std::string_view::npos && !ParseQuery(target.substr(q + 1), &req->params)) {
    return HeadStatus::kBadRequest;
  }
  return HeadStatus::kComplete;
}

const char* HttpReason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 414:
      return "URI Too Long";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

}  // namespace sentinel::collector
