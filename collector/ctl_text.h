// What sentinelctl shows of sentineld's answers: every string in them came from the wire (a
// plugin's host or communicator name, an alert summary, a hostile daemon's anything), so it is
// escaped with the one rule (common/wire_text.h) before it reaches a terminal or a script, and a
// value of the wrong JSON type shows as the fallback instead of ending the program.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/wire_text.h"

namespace sentinel::ctl {

// `text` with control bytes as \xNN and backslashes doubled (stops at a NUL).
inline std::string Escaped(std::string_view text) {
  std::string out(text.size() * 4 + 1, '\0');
  out.resize(rules::EscapeWireText(text.data(), text.size(), out.data(), out.size()));
  return out;
}

// obj[key] for reading, null when `obj` is not an object or has no such key. nlohmann's const
// operator[] asserts (or, with NDEBUG, reads past the end) on a missing key: a daemon's answer of
// another shape must never end the program that way.
inline const nlohmann::json& Field(const nlohmann::json& obj, const char* key) {
  static const nlohmann::json kNull;
  if (!obj.is_object()) return kNull;
  const auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

// obj[key] for display: a string escaped, a number or boolean as JSON writes it, else `fallback`.
inline std::string Shown(const nlohmann::json& obj, const char* key, const char* fallback = "") {
  if (!obj.is_object()) return fallback;
  const auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  if (it->is_string()) return Escaped(it->get_ref<const std::string&>());
  if (it->is_number() || it->is_boolean()) return it->dump();
  return fallback;
}

}  // namespace sentinel::ctl
