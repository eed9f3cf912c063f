// Tests of the wire-text escaping rule (common/wire_text.h).
#include "common/wire_text.h"

#include <string>

#include "gtest/gtest.h"

namespace sentinel::rules {
namespace {

std::string Escaped(const std::string& in, size_t cap = 256) {
  std::string out(cap, '#');
  const size_t n = EscapeWireText(in.data(), in.size(), out.data(), cap);
  EXPECT_EQ(out[n], '\0');
  return out.substr(0, n);
}

TEST(WireTextTest, PlainTextIsKept) { EXPECT_EQ(Escaped("gpu-node-017"), "gpu-node-017"); }

TEST(WireTextTest, ControlBytesAndBackslashesAreEscaped) {
  EXPECT_EQ(Escaped("a\n[sentinel] forged"), "a\\x0a[sentinel] forged");
  EXPECT_EQ(Escaped("\x1b[2J\x7f"), "\\x1b[2J\\x7f");
  EXPECT_EQ(Escaped("c:\\x"), "c:\\\\x");
}

TEST(WireTextTest, StopsAtNulAndAtTheLength) {
  const char fixed[8] = {'a', 'b', '\0', 'c', 'd', 'e', 'f', 'g'};
  char out[16];
  EXPECT_EQ(EscapeWireText(fixed, sizeof(fixed), out, sizeof(out)), 2u);
  EXPECT_STREQ(out, "ab");
  const char unterminated[3] = {'x', 'y', 'z'};
  EXPECT_EQ(EscapeWireText(unterminated, 2, out, sizeof(out)), 2u);
  EXPECT_STREQ(out, "xy");
}

TEST(WireTextTest, AnEscapeThatDoesNotFitIsLeftOutWhole) {
  EXPECT_EQ(Escaped("ab\n", 5), "ab");  // "ab\x0a" needs 6 bytes with the NUL
  EXPECT_EQ(Escaped("abc", 1), "");
}

}  // namespace
}  // namespace sentinel::rules
