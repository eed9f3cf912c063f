// The paths sentineld creates (collector/base/owned_paths.h) and the record log that uses them:
// no write through a symlink or into a FIFO, directories created one level only and brought to
// their mode, shared directories never changed.
#include "collector/base/owned_paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"

#include "collector/config/config.h"
#include "collector/export/record_log.h"
#include "common/fs_trust.h"

namespace sentinel::collector {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class OwnedPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/snowned-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    trusted_ = rules::TrustedUidsFromEnv();
  }
  void TearDown() override { (void)!std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string dir_;
  rules::TrustedUids trusted_;
};

// --record-log at a symlink: it was opened through the link and records appended to (or, at
// rotation, truncated into) whatever it pointed at.
TEST_F(OwnedPathsTest, RecordLogRefusesASymlink) {
  const std::string target = dir_ + "/precious";
  std::ofstream(target) << "keep\n";
  const std::string log = dir_ + "/records.jsonl";
  ASSERT_EQ(symlink(target.c_str(), log.c_str()), 0);
  RecordLog record_log(log, 1 << 20);
  const absl::Status s = record_log.Open();
  ASSERT_FALSE(s.ok()) << "the record log was opened through a symlink";
  EXPECT_NE(std::string(s.message()).find("a symbolic link (not followed)"), std::string::npos)
      << s.message();
  EXPECT_EQ(ReadAll(target), "keep\n");
}

// A FIFO at the path must neither block start-up nor be written to.
TEST_F(OwnedPathsTest, RecordLogRefusesAFifo) {
  const std::string log = dir_ + "/records.jsonl";
  ASSERT_EQ(mkfifo(log.c_str(), 0600), 0);
  RecordLog record_log(log, 1 << 20);
  const absl::Status s = record_log.Open();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("not a regular file"), std::string::npos) << s.message();
}

// A new log is created, an existing one of ours appended to; a directory others can write is
// refused (at Open, and by --record-log's validation).
TEST_F(OwnedPathsTest, RecordLogCreatesOrAppendsInATrustedDirectoryOnly) {
  const std::string log = dir_ + "/records.jsonl";
  {
    RecordLog record_log(log, 1 << 20);
    ASSERT_TRUE(record_log.Open().ok());
  }
  struct stat st {};
  ASSERT_EQ(lstat(log.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  std::ofstream(log, std::ios::app) << "line\n";
  {
    RecordLog record_log(log, 1 << 20);
    ASSERT_TRUE(record_log.Open().ok());
  }
  EXPECT_EQ(ReadAll(log), "line\n");
  const std::string open_dir = dir_ + "/open";
  ASSERT_EQ(mkdir(open_dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open_dir.c_str(), 0777), 0);
  RecordLog refused(open_dir + "/records.jsonl", 1 << 20);
  const absl::Status s = refused.Open();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("lets other users write to it"), std::string::npos)
      << s.message();
  Config c;
  ASSERT_TRUE(c.Set("record-log", open_dir + "/records.jsonl").ok());
  const absl::Status v = c.Validate();
  ASSERT_FALSE(v.ok());
  EXPECT_NE(std::string(v.message()).find("--record-log: " + open_dir), std::string::npos)
      << v.message();
}

// Only the last component is created; an existing own directory gets the mode asked for.
TEST_F(OwnedPathsTest, SocketDirIsCreatedOneLevelAndGetsItsMode) {
  const std::string deep = dir_ + "/a/b";
  const absl::Status missing = PrepareSocketDir(deep, 0700, kNoGroup, trusted_);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.message()).find("its parent " + dir_ + "/a does not exist"),
            std::string::npos)
      << missing.message();
  struct stat st {};
  EXPECT_NE(lstat((dir_ + "/a").c_str(), &st), 0) << "a missing parent was created";

  const std::string one = dir_ + "/run";
  ASSERT_TRUE(PrepareSocketDir(one, 0700, kNoGroup, trusted_).ok());
  ASSERT_EQ(lstat(one.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(chmod(one.c_str(), 0757), 0);
  ASSERT_TRUE(PrepareSocketDir(one, 0700, kNoGroup, trusted_).ok());
  ASSERT_EQ(lstat(one.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

// A sticky shared directory (like /tmp) is never changed, even when we own it: refused instead.
TEST_F(OwnedPathsTest, StickySharedDirectoryIsRefusedNotChanged) {
  const std::string shared = dir_ + "/shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);
  const absl::Status s = PrepareSocketDir(shared, 0700, kNoGroup, trusted_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("mode 1777 lets other users write to it"),
            std::string::npos)
      << s.message();
  struct stat st {};
  ASSERT_EQ(lstat(shared.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 01777u);
}

// sentineld's socket directory reached through a link that another user owns (in a sticky
// directory, where only its owner may replace it): refused, though the link points to a
// directory of ours now. Before, the directories above were checked as resolved and it listened.
TEST_F(OwnedPathsTest, SocketDirThroughAnotherUsersLinkIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a link to another uid (lchown)";
  const std::string sticky = dir_ + "/sticky";
  ASSERT_EQ(mkdir(sticky.c_str(), 0700), 0);
  ASSERT_EQ(chmod(sticky.c_str(), 01777), 0);
  const std::string real = dir_ + "/real";
  ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
  const std::string link = sticky + "/theirs";
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  ASSERT_EQ(lchown(link.c_str(), 4243, 4243), 0);
  const absl::Status s = PrepareSocketDir(link + "/run", 0700, kNoGroup, trusted_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find(link + ": owned by uid 4243"), std::string::npos)
      << s.message();
  // The same link, ours: fine.
  ASSERT_EQ(lchown(link.c_str(), getuid(), getgid()), 0);
  EXPECT_TRUE(PrepareSocketDir(link + "/run", 0700, kNoGroup, trusted_).ok());
}

// Temporary names are unpredictable and exclusive: two in a row differ, and neither is a link.
TEST_F(OwnedPathsTest, TemporaryNamesDifferAndAreNewFiles) {
  std::string a;
  std::string b;
  const absl::StatusOr<int> created_a = CreateUniqueTemp(dir_ + "/port", &a);
  const absl::StatusOr<int> created_b = CreateUniqueTemp(dir_ + "/port", &b);
  ASSERT_TRUE(created_a.ok()) << created_a.status();
  ASSERT_TRUE(created_b.ok()) << created_b.status();
  const int fa = *created_a;
  const int fb = *created_b;
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind(dir_ + "/.port.tmp-", 0), 0u) << a;
  close(fa);
  close(fb);
}

}  // namespace
}  // namespace sentinel::collector
