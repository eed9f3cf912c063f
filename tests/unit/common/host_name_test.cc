#include "common/host_name.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace sentinel::rules {
namespace {

TEST(HostNameTest, IsTheSystemNameCutAtTheFirstDot) {
  char system[256] = {};
  ASSERT_EQ(gethostname(system, sizeof(system) - 1), 0);
  std::string want(system);
  want = want.substr(0, want.find('.'));
  char out[256];
  ShortHostName(out, sizeof(out));
  EXPECT_EQ(std::string(out), want);
  EXPECT_EQ(std::string(out).find('.'), std::string::npos);
}

TEST(HostNameTest, TruncatesToTheCapacity) {
  char full[256];
  ShortHostName(full, sizeof(full));
  char small[2] = {'x', 'x'};
  ShortHostName(small, sizeof(small));
  EXPECT_EQ(small[0], full[0]);
  EXPECT_EQ(small[1], '\0');
  ShortHostName(nullptr, 8);  // nothing to write to: no crash
}

}  // namespace
}  // namespace sentinel::rules
