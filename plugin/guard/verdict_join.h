// Joins strings with a separator: the verdict's checks (found/cause texts) and its wire form
// (the record's joined fields) join the same way.
#pragma once

#include <string>
#include <vector>

namespace sentinel::guard {

inline std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const std::string& s : v) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

}  // namespace sentinel::guard
