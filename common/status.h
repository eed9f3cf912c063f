// Status: the outcome of every fallible step below sentineld (the plugin, common/ and the tools
// share it: connect, start a thread, load a library, read a file, parse a setting). sentineld keeps
// absl::Status and converts at its edge. No exceptions cross our code and nothing here allocates:
// a code plus either a string literal (static storage, kept by pointer) or a short text formatted
// into a fixed inline buffer (a path, an errno text, a CUPTI result name). Returned by value from
// noexcept code on slow paths only: a Status is about half a kilobyte, never on the per-event path.
// [[nodiscard]]: a failure nobody looks at is a bug (the house rule is "turn the feature off, count
// it, log it once"; docs/house-rules.md).
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace sentinel::rules {

enum class StatusCode : uint8_t {
  kOk = 0,
  kUnavailable,         // the peer or library is not there (no sentineld, no libcupti)
  kResourceExhausted,   // no memory, no thread, a full table
  kFailedPrecondition,  // turned off on purpose or refused (disabled, handshake refused)
  kInvalidArgument,     // a null or malformed input
  kInternal,            // an unexpected failure (an exception caught at our boundary)
  kNotFound,            // a file or symbol that does not exist
  kPermissionDenied,    // present but not trusted (owner, mode, a symlink)
};

class [[nodiscard]] Status {
 public:
  // The longest detail kept, terminator included. Every one-line text put in a Status fits (the
  // longest: a trust finding, at most 400 bytes); a longer one is cut, never overrun, and ends in
  // "..." so a reader sees it was cut.
  static constexpr size_t kDetailCap = 512;

  Status() noexcept { detail_[0] = '\0'; }
  // `message` MUST be a string literal (or other static storage): it is kept, never copied.
  Status(StatusCode code, const char* message) noexcept
      : code_(code), literal_(message != nullptr ? message : "") {
    detail_[0] = '\0';
  }

  // A message formatted into the inline buffer (printf-style; cut at kDetailCap - 1 bytes).
  __attribute__((format(printf, 2, 3))) static Status Format(StatusCode code, const char* fmt,
                                                             ...) noexcept {
    Status s(code, "");
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(s.detail_, sizeof(s.detail_), fmt, ap);
    va_end(ap);
    if (n < 0) s.detail_[0] = '\0';
    if (n >= static_cast<int>(sizeof(s.detail_))) {
      std::memcpy(s.detail_ + sizeof(s.detail_) - 4, "...", 4);
    }
    s.formatted_ = true;
    return s;
  }
  // A message copied from `text` (the caller's buffer may then go away).
  static Status Copy(StatusCode code, const char* text) noexcept {
    return Format(code, "%s", text != nullptr ? text : "");
  }
  // The same status, also carrying the errno of the failed system call (for the caller's line).
  Status WithErrno(int err) const noexcept {
    Status s = *this;
    s.errno_ = err;
    return s;
  }

  static Status Ok() noexcept { return Status(); }

  bool ok() const noexcept { return code_ == StatusCode::kOk; }
  StatusCode code() const noexcept { return code_; }
  // Never null; "" for Ok().
  const char* message() const noexcept { return formatted_ ? detail_ : literal_; }
  // The errno given with WithErrno, else 0.
  int error_number() const noexcept { return errno_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  bool formatted_ = false;
  int errno_ = 0;
  const char* literal_ = "";
  char detail_[kDetailCap];
};

// Names a code for log lines ("unavailable", ...).
constexpr const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kResourceExhausted:
      return "resource exhausted";
    case StatusCode::kFailedPrecondition:
      return "failed precondition";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kInternal:
      return "internal";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kPermissionDenied:
      return "permission denied";
  }
  return "unknown";
}

}  // namespace sentinel::rules
