// Tests of the socket path rule shared by the plugin and sentineld.
#include "common/socket_path.h"

#include <string>

#include "gtest/gtest.h"

#include "common/sentinel_env.h"

namespace sentinel::rules {
namespace {

TEST(SocketPathTest, ExplicitPathWins) {
  char out[kSocketPathMax];
  EXPECT_EQ(ResolveSocketPath("/run/x/s.sock", "/run/user/7", 7, out, sizeof(out)),
            SocketPathKind::kPath);
  EXPECT_STREQ(out, "/run/x/s.sock");
}

TEST(SocketPathTest, NoneDisables) {
  char out[kSocketPathMax] = "junk";
  EXPECT_EQ(ResolveSocketPath("none", "/run/user/7", 7, out, sizeof(out)),
            SocketPathKind::kDisabled);
  EXPECT_STREQ(out, "");
}

TEST(SocketPathTest, XdgRuntimeDirDefault) {
  char out[kSocketPathMax];
  EXPECT_EQ(ResolveSocketPath(nullptr, "/run/user/1000", 1000, out, sizeof(out)),
            SocketPathKind::kPath);
  EXPECT_STREQ(out, "/run/user/1000/sentinel/sentineld.sock");
  EXPECT_EQ(ResolveSocketPath("", "/run/user/1000", 1000, out, sizeof(out)), SocketPathKind::kPath);
  EXPECT_STREQ(out, "/run/user/1000/sentinel/sentineld.sock");
}

TEST(SocketPathTest, TmpFallbackPerUid) {
  char out[kSocketPathMax];
  EXPECT_EQ(ResolveSocketPath(nullptr, nullptr, 4242, out, sizeof(out)), SocketPathKind::kPath);
  EXPECT_STREQ(out, "/tmp/sentinel-4242/sentineld.sock");
  EXPECT_EQ(ResolveSocketPath(nullptr, "", 0, out, sizeof(out)), SocketPathKind::kPath);
  EXPECT_STREQ(out, "/tmp/sentinel-0/sentineld.sock");
  char dir[kSocketPathMax];
  EXPECT_EQ(DefaultSocketDir(nullptr, 4242, dir, sizeof(dir)), SocketPathKind::kPath);
  EXPECT_STREQ(dir, "/tmp/sentinel-4242");
}

TEST(SocketPathTest, TooLongIsRefusedNotTruncated) {
  std::string long_dir = "/" + std::string(120, 'a');
  char out[kSocketPathMax] = "junk";
  EXPECT_EQ(ResolveSocketPath(long_dir.c_str(), nullptr, 1, out, sizeof(out)),
            SocketPathKind::kTooLong);
  EXPECT_STREQ(out, "");
  // 107 characters fit a sockaddr_un exactly; 108 do not.
  std::string fits = "/" + std::string(106, 'b');
  EXPECT_EQ(ResolveSocketPath(fits.c_str(), nullptr, 1, out, sizeof(out)), SocketPathKind::kPath);
  std::string over = fits + "c";
  EXPECT_EQ(ResolveSocketPath(over.c_str(), nullptr, 1, out, sizeof(out)),
            SocketPathKind::kTooLong);
  // The default under a long XDG_RUNTIME_DIR does not fit either.
  EXPECT_EQ(ResolveSocketPath(nullptr, long_dir.c_str(), 1, out, sizeof(out)),
            SocketPathKind::kTooLong);
}

TEST(SocketPathTest, SmallOutputBufferIsTooLong) {
  char out[8];
  EXPECT_EQ(ResolveSocketPath("/tmp/abcdefgh", nullptr, 1, out, sizeof(out)),
            SocketPathKind::kTooLong);
  EXPECT_STREQ(out, "");
}

TEST(SocketPathTest, FromEnvironment) {
  char out[kSocketPathMax];
  // SENTINEL_SOCKET is read once per process (sentinel_env.h): re-read after each change.
  ASSERT_EQ(setenv("SENTINEL_SOCKET", "/tmp/from-env.sock", 1), 0);
  testing::ReloadProcessSentinelEnv();
  EXPECT_EQ(ResolveSocketPathFromEnv(out, sizeof(out)), SocketPathKind::kPath);
  EXPECT_STREQ(out, "/tmp/from-env.sock");
  ASSERT_EQ(setenv("SENTINEL_SOCKET", "none", 1), 0);
  testing::ReloadProcessSentinelEnv();
  EXPECT_EQ(ResolveSocketPathFromEnv(out, sizeof(out)), SocketPathKind::kDisabled);
  ASSERT_EQ(unsetenv("SENTINEL_SOCKET"), 0);
  testing::ReloadProcessSentinelEnv();
  ASSERT_EQ(setenv("XDG_RUNTIME_DIR", "/run/user/55", 1), 0);
  EXPECT_EQ(ResolveSocketPathFromEnv(out, sizeof(out)), SocketPathKind::kPath);
  EXPECT_STREQ(out, "/run/user/55/sentinel/sentineld.sock");
}

// The node default expectation sits in the socket's directory; the plugin and sentineld both use
// this one function (they used to disagree for a bare file name).
TEST(SocketPathTest, NodeExpectPathIsInTheSocketDirectory) {
  char out[kSocketPathMax + 16];
  EXPECT_TRUE(NodeExpectPath("/run/user/7/sentinel/sentineld.sock", out, sizeof(out)));
  EXPECT_STREQ(out, "/run/user/7/sentinel/expect");
  EXPECT_TRUE(NodeExpectPath("s.sock", out, sizeof(out)));
  EXPECT_STREQ(out, "./expect");
  EXPECT_TRUE(NodeExpectPath("/s.sock", out, sizeof(out)));
  EXPECT_STREQ(out, "/expect");
  char small[8] = "junk";
  EXPECT_FALSE(NodeExpectPath("/long/dir/s.sock", small, sizeof(small)));
  EXPECT_STREQ(small, "");
  EXPECT_FALSE(NodeExpectPath(nullptr, out, sizeof(out)));
}

}  // namespace
}  // namespace sentinel::rules
