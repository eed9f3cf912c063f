// libFuzzer target: the expectation grammar (plugin/guard/README.md) on arbitrary text. Parsing
// and formatting an error must never crash, hang or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/expectation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  sentinel::rules::Expectation e;
  const sentinel::rules::Status error = sentinel::rules::ParseExpectation(text, &e);
  if (!error.ok()) {
    const std::string msg = sentinel::rules::FormatParseError("fuzz", error);
    if (msg.empty()) __builtin_trap();  // an error always says something
  }
  return 0;
}
