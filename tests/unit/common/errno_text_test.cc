// ErrnoText: the C library's text for known values and a word (not null) for a value nobody
// knows.
#include "common/errno_text.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

namespace sentinel::rules {
namespace {

TEST(ErrnoText, KnownValuesReadAsTheCLibraryWritesThem) {
  EXPECT_STREQ(ErrnoText(ENOENT), "No such file or directory");
  EXPECT_STREQ(ErrnoText(EACCES), "Permission denied");
  char buf[128];
  EXPECT_STREQ(ErrnoText(ENOSPC), strerror_r(ENOSPC, buf, sizeof(buf)))
      << "the text callers showed before (strerror_r) is unchanged";
}

TEST(ErrnoText, UnknownValueIsAWordNotNull) {
  ASSERT_NE(ErrnoText(987654), nullptr);
  EXPECT_STREQ(ErrnoText(987654), "unknown error");
  EXPECT_STREQ(ErrnoText(-1), "unknown error");
}

}  // namespace
}  // namespace sentinel::rules
