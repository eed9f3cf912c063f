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

// `text` with control bytes as \xNN and backslashes doubled (stops at a NUL). A terminal also
// obeys the C1 controls (U+0080-U+009F: U+009B is a CSI, as ESC [ is), written as UTF-8 or as
// single raw bytes, so those are escaped as well: each byte of a C1 character in UTF-8
// (C2 80-C2 9F) and every byte that is not part of well-formed UTF-8 shows as \xNN. Other UTF-8
// (names in any script) is shown as it is.
inline std::string Escaped(std::string_view text) {
  std::string ascii(text.size() * 4 + 1, '\0');
  ascii.resize(rules::EscapeWireText(text.data(), text.size(), ascii.data(), ascii.size()));
  // EscapeWireText leaves bytes >= 0x80 as they are (and its own escapes are ASCII): check them.
  std::string out;
  out.reserve(ascii.size());
  const auto hex = [&out](unsigned char c) {
    static const char kDigits[] = "0123456789abcdef";
    out += "\\x";
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  };
  const auto cont = [&ascii](size_t i) {
    return i < ascii.size() && (static_cast<unsigned char>(ascii[i]) & 0xc0) == 0x80;
  };
  for (size_t i = 0; i < ascii.size();) {
    const auto c = static_cast<unsigned char>(ascii[i]);
    size_t len = 0;  // of a well-formed sequence other than a C1 control
    if (c < 0x80) {
      len = 1;
    } else if (c >= 0xc2 && c <= 0xdf && cont(i + 1)) {
      len = (c == 0xc2 && static_cast<unsigned char>(ascii[i + 1]) < 0xa0) ? 0 : 2;
    } else if (c >= 0xe0 && c <= 0xef && cont(i + 1) && cont(i + 2)) {
      const auto c1 = static_cast<unsigned char>(ascii[i + 1]);
      // No overlong forms (E0 80-9F) and no UTF-16 surrogates (ED A0-BF).
      len = (c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0) ? 0 : 3;
    } else if (c >= 0xf0 && c <= 0xf4 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
      const auto c1 = static_cast<unsigned char>(ascii[i + 1]);
      len = (c == 0xf0 && c1 < 0x90) || (c == 0xf4 && c1 >= 0x90) ? 0 : 4;
    }
    if (len == 0) {
      // A C1 control in UTF-8 (both bytes), or a byte that is not well-formed UTF-8 (alone).
      const size_t n = (c == 0xc2 && cont(i + 1)) ? 2 : 1;
      for (size_t k = 0; k < n; ++k) hex(static_cast<unsigned char>(ascii[i + k]));
      i += n;
      continue;
    }
    out.append(ascii, i, len);
    i += len;
  }
  return out;
}

// `j` as JSON text for a terminal or a script: every character outside ASCII written as \uXXXX
// (so no C1 control, U+009B included, reaches the terminal raw) and bytes that are not UTF-8
// replaced, never an exception.
inline std::string JsonText(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', true, nlohmann::json::error_handler_t::replace);
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
