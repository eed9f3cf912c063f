// Status: the outcome of a fallible slow-path step in the plugin (connect, start a thread, wire a
// seam). No exceptions cross our code and nothing here allocates: a code plus a message that is a
// string literal (static storage), so a Status is two words and can be returned from noexcept code
// and from paths that must not allocate. [[nodiscard]]: a failure that nobody looks at is a bug
// (the house rule is "turn the feature off, count it, log it once").
#pragma once

#include <cstdint>

namespace sentinel::plugin {

enum class StatusCode : uint8_t {
  kOk = 0,
  kUnavailable,         // the peer or library is not there (no sentineld, no libcupti)
  kResourceExhausted,   // no memory, no thread, a full table
  kFailedPrecondition,  // turned off on purpose or refused (disabled, handshake refused)
  kInvalidArgument,     // a null or malformed input
  kInternal,            // an unexpected failure (an exception caught at our boundary)
};

class [[nodiscard]] Status {
 public:
  constexpr Status() = default;
  // `message` MUST be a string literal (or other static storage): it is kept, never copied.
  constexpr Status(StatusCode code, const char* message)
      : code_(code), message_(message != nullptr ? message : "") {}

  static constexpr Status Ok() { return Status(); }

  constexpr bool ok() const { return code_ == StatusCode::kOk; }
  constexpr StatusCode code() const { return code_; }
  // Never null; "" for Ok().
  constexpr const char* message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  const char* message_ = "";
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
  }
  return "unknown";
}

}  // namespace sentinel::plugin
