// sentinelctl's one escaping rule (collector/ctl_text.h): C0 controls and DEL as before, and the
// C1 controls a terminal also obeys (U+009B is CSI), whether written as UTF-8 or as raw bytes;
// well-formed UTF-8 of other characters is left as it is.
#include "collector/ctl_text.h"

#include <string>

#include "gtest/gtest.h"

namespace sentinel::ctl {
namespace {

// Whether `s` holds a byte a terminal could act on: ESC, or any byte of 0x80 and above.
bool HasControlOrHighByte(const std::string& s) {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == 0x1b || c >= 0x80) return true;
  }
  return false;
}

TEST(CtlTextTest, C1ControlsAreEscapedAsUtf8AndAsRawBytes) {
  // CSI 2 J (clear screen) through U+009B in UTF-8, then through the raw byte 0x9b.
  EXPECT_EQ(Escaped("a\xc2\x9b"
                    "2Jb"),
            "a\\xc2\\x9b2Jb");
  EXPECT_EQ(Escaped("a\x9b"
                    "2Jb"),
            "a\\x9b2Jb");
  for (int c = 0x80; c <= 0x9f; ++c) {
    const std::string utf8 = std::string("\xc2") + static_cast<char>(c);
    const std::string shown = Escaped(utf8);
    EXPECT_EQ(shown.find('\xc2'), std::string::npos) << c;
    const std::string raw(1, static_cast<char>(c));
    EXPECT_EQ(Escaped(raw).size(), 4u) << c;
  }
  // The C0 rule is unchanged.
  EXPECT_EQ(Escaped("x\x1b[2J\n\\"), "x\\x1b[2J\\x0a\\\\");
  EXPECT_FALSE(HasControlOrHighByte(Escaped("\x1b\xc2\x85\x9b\x90\xc2")));
}

TEST(CtlTextTest, OtherUtf8IsShownAsItIs) {
  const std::string names =
      "n\xc5\x93ud-\xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80 \xc2\xa0";
  EXPECT_EQ(Escaped(names), names);
  // Overlong forms, surrogates and truncated sequences are not well-formed: bytes escaped.
  EXPECT_EQ(Escaped("\xc0\x9b"), "\\xc0\\x9b");
  EXPECT_EQ(Escaped("\xe0\x82\x9b"), "\\xe0\\x82\\x9b");
  EXPECT_EQ(Escaped("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(Escaped("\xe6\x97"), "\\xe6\\x97");
}

}  // namespace
}  // namespace sentinel::ctl
