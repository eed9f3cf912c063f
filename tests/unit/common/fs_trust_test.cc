// Tests of the trusted-owner rule (common/fs_trust.h). Runs as whatever user ctest runs as; the
// foreign-owner cases need root (to chown) and say so when skipped.
#include "common/fs_trust.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace sentinel::rules {
namespace {

constexpr uid_t kStranger = 4242;

class FsTrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fs_trust_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;  // mkdtemp: mode 0700, ours, under sticky /tmp
    trusted_ = TrustedUidsFor("no-such-sentinel-daemon-user");
  }
  void TearDown() override {
    const std::string cmd = "rm -rf '" + root_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);  // NOLINT(concurrency-mt-unsafe)
  }
  std::string Dir(const std::string& name, mode_t mode) {
    const std::string d = root_ + "/" + name;
    EXPECT_EQ(mkdir(d.c_str(), 0700), 0);
    EXPECT_EQ(chmod(d.c_str(), mode), 0);
    return d;
  }
  std::string File(const std::string& name, mode_t mode) {
    const std::string f = root_ + "/" + name;
    const int fd = open(f.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, "x", 1), 1);
    close(fd);
    EXPECT_EQ(chmod(f.c_str(), mode), 0);
    return f;
  }
  std::string root_;
  TrustedUids trusted_;
};

TEST_F(FsTrustTest, TrustedUidsAreSelfRootAndTheDaemon) {
  EXPECT_EQ(trusted_.self, getuid());
  EXPECT_EQ(trusted_.daemon, kNoUid);
  EXPECT_TRUE(trusted_.Contains(0));
  EXPECT_TRUE(trusted_.Contains(getuid()));
  EXPECT_FALSE(trusted_.Contains(kStranger));
  const TrustedUids by_number = TrustedUidsFor("4243");
  EXPECT_EQ(by_number.daemon, 4243u);
  EXPECT_TRUE(by_number.Contains(4243));
  EXPECT_FALSE(by_number.Contains(kStranger));
}

// A SENTINEL_DAEMON_USER that names no user is a problem to tell (once, by the registry's
// teller); unset, empty or resolved is not. Only this uid and root stay trusted.
TEST_F(FsTrustTest, UnresolvableDaemonUserIsAProblemToTell) {
  char line[320];
  const TrustedUids none = TrustedUidsFor("no-such-sentinel-user");
  EXPECT_EQ(none.daemon, kNoUid);
  EXPECT_FALSE(none.Contains(kStranger));
  ASSERT_TRUE(DaemonUserProblem("no-such-sentinel-user", none, line, sizeof(line)));
  EXPECT_EQ(std::string(line),
            "SENTINEL_DAEMON_USER='no-such-sentinel-user' is not a user on this "
            "host; trusting only your own uid (" +
                std::to_string(getuid()) +
                ") and root for sentineld's socket, its directory and files\n");
  // The value comes from the environment: escaped like any text shown to a person.
  const TrustedUids odd = TrustedUidsFor("x\n[sentinel 1] y");
  ASSERT_TRUE(DaemonUserProblem("x\n[sentinel 1] y", odd, line, sizeof(line)));
  EXPECT_NE(std::string(line).find("'x\\x0a[sentinel 1] y'"), std::string::npos) << line;
  EXPECT_EQ(std::string(line).find('\n'), std::strlen(line) - 1) << line;
  EXPECT_FALSE(DaemonUserProblem(nullptr, TrustedUidsFor(nullptr), line, sizeof(line)));
  EXPECT_EQ(line[0], '\0');
  EXPECT_FALSE(DaemonUserProblem("", TrustedUidsFor(""), line, sizeof(line)));
  EXPECT_FALSE(DaemonUserProblem("4243", TrustedUidsFor("4243"), line, sizeof(line)));
  EXPECT_FALSE(DaemonUserProblem("root", TrustedUidsFor("root"), line, sizeof(line)));
}

TEST_F(FsTrustTest, OwnPrivateDirectoryIsTrusted) {
  const TrustFinding f = CheckTrustedDir(Dir("sock", 0700).c_str(), trusted_);
  EXPECT_TRUE(f.ok()) << f.path;
  EXPECT_TRUE(CheckTrustedDir(Dir("grp", 0750).c_str(), trusted_).ok());
}

TEST_F(FsTrustTest, GroupOrWorldWritableDirectoryIsRefused) {
  for (mode_t mode : {0777, 0770, 0702, 01777}) {
    const std::string d = Dir("w" + std::to_string(mode), mode);
    const TrustFinding f = CheckTrustedDir(d.c_str(), trusted_);
    EXPECT_EQ(f.verdict, TrustVerdict::kWritableByOthers) << std::oct << mode;
    char line[512];
    DescribeTrustFinding(f, trusted_, line, sizeof(line));
    EXPECT_NE(std::string(line).find("lets other users write"), std::string::npos) << line;
  }
}

TEST_F(FsTrustTest, SymlinkedDirectoryIsRefused) {
  const std::string real = Dir("real", 0700);
  const std::string link = root_ + "/link";
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  EXPECT_EQ(CheckTrustedDir(link.c_str(), trusted_).verdict, TrustVerdict::kSymlink);
}

TEST_F(FsTrustTest, MissingAndNonDirectory) {
  EXPECT_EQ(CheckTrustedDir((root_ + "/nope").c_str(), trusted_).verdict, TrustVerdict::kMissing);
  EXPECT_EQ(CheckTrustedDir(File("f", 0600).c_str(), trusted_).verdict,
            TrustVerdict::kNotADirectory);
}

TEST_F(FsTrustTest, AnOpenParentLetsOthersSwapThePath) {
  // A private directory under a world-writable, non-sticky one: anyone could rename it away.
  const std::string open_parent = Dir("open", 0777);
  const std::string inner = open_parent + "/inner";
  ASSERT_EQ(mkdir(inner.c_str(), 0700), 0);
  const TrustFinding f = CheckTrustedDir(inner.c_str(), trusted_);
  EXPECT_EQ(f.verdict, TrustVerdict::kWritableByOthers);
  EXPECT_EQ(std::string(f.path).find("/open"), std::string(f.path).size() - 5) << f.path;
  // The same under a sticky parent (like /tmp) is fine.
  const std::string sticky = Dir("sticky", 01777);
  const std::string inner2 = sticky + "/inner";
  ASSERT_EQ(mkdir(inner2.c_str(), 0700), 0);
  EXPECT_TRUE(CheckTrustedDir(inner2.c_str(), trusted_).ok());
  EXPECT_TRUE(CheckTrustedParent((inner2 + "/sentineld.sock").c_str(), trusted_).ok());
}

TEST_F(FsTrustTest, ForeignOwnerIsRefusedAndNamed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to chown a directory to another uid";
  const std::string d = Dir("theirs", 0700);
  ASSERT_EQ(chown(d.c_str(), kStranger, kStranger), 0);
  const TrustFinding f = CheckTrustedDir(d.c_str(), trusted_);
  EXPECT_EQ(f.verdict, TrustVerdict::kForeignOwner);
  EXPECT_EQ(f.owner, kStranger);
  char line[512];
  DescribeTrustFinding(f, trusted_, line, sizeof(line));
  EXPECT_NE(std::string(line).find("owned by uid 4242"), std::string::npos) << line;
  // Trusted once that uid is the daemon's.
  EXPECT_TRUE(CheckTrustedDir(d.c_str(), TrustedUidsFor("4242")).ok());
}

// The directories above the socket's are checked as the path gives them, not as it resolves:
// a link another user owns (here in a sticky directory, like /tmp, where its owner alone may
// replace it) is refused though what it points to now is ours; the same link owned by us, or
// one whose target is refused, is judged by the same rule. Before, only the resolved path was
// checked and the foreign link passed.
TEST_F(FsTrustTest, ALinkAboveTheSocketDirectoryIsCheckedAsGiven) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a link to another uid (lchown)";
  const std::string sticky = Dir("sticky", 01777);
  const std::string real = Dir("real", 0700);
  ASSERT_EQ(mkdir((real + "/sock").c_str(), 0700), 0);
  const std::string theirs = sticky + "/theirs";
  ASSERT_EQ(symlink(real.c_str(), theirs.c_str()), 0);
  ASSERT_EQ(lchown(theirs.c_str(), kStranger, kStranger), 0);
  TrustFinding f = CheckTrustedDir((theirs + "/sock").c_str(), trusted_);
  EXPECT_EQ(f.verdict, TrustVerdict::kForeignOwner);
  EXPECT_EQ(std::string(f.path), theirs);
  EXPECT_EQ(f.owner, kStranger);
  f = CheckTrustedParent((theirs + "/sock/sentineld.sock").c_str(), trusted_);
  EXPECT_EQ(f.verdict, TrustVerdict::kForeignOwner);
  // Ours, relative target, through "..": followed, and every directory on the way checked.
  const std::string ours = sticky + "/ours";
  ASSERT_EQ(symlink("../real", ours.c_str()), 0);
  EXPECT_TRUE(CheckTrustedDir((ours + "/sock").c_str(), trusted_).ok());
  EXPECT_TRUE(CheckTrustedDir((ours + "/./../real/sock").c_str(), trusted_).ok());
  // Ours, but into a directory anybody may write to: the target's directories are checked.
  const std::string open_dir = Dir("open", 0777);
  ASSERT_EQ(mkdir((open_dir + "/sock").c_str(), 0700), 0);
  const std::string to_open = sticky + "/to-open";
  ASSERT_EQ(symlink(open_dir.c_str(), to_open.c_str()), 0);
  f = CheckTrustedDir((to_open + "/sock").c_str(), trusted_);
  EXPECT_EQ(f.verdict, TrustVerdict::kWritableByOthers);
  EXPECT_EQ(std::string(f.path), open_dir);
  // A link to a link another user owns, and a loop.
  const std::string chain = sticky + "/chain";
  ASSERT_EQ(symlink(theirs.c_str(), chain.c_str()), 0);
  EXPECT_EQ(CheckTrustedDir((chain + "/sock").c_str(), trusted_).verdict,
            TrustVerdict::kForeignOwner);
  const std::string loop = sticky + "/loop";
  ASSERT_EQ(symlink(loop.c_str(), loop.c_str()), 0);
  EXPECT_FALSE(CheckTrustedDir((loop + "/sock").c_str(), trusted_).ok());
}

// A relative socket directory: the current directory and those above it are checked too.
TEST_F(FsTrustTest, RelativeSocketDirectoryChecksTheCurrentDirectory) {
  const std::string open_dir = Dir("open", 0777);
  ASSERT_EQ(mkdir((open_dir + "/sock").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((Dir("mine", 0700) + "/sock").c_str(), 0700), 0);
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(chdir(open_dir.c_str()), 0);
  const TrustFinding f = CheckTrustedDir("sock", trusted_);
  const TrustFinding bare = CheckTrustedParent("sentineld.sock", trusted_);
  ASSERT_EQ(chdir(root_.c_str()), 0);
  const TrustFinding open_sock = CheckTrustedDir("open/../open/sock", trusted_);
  const TrustFinding mine = CheckTrustedDir("./mine/sock", trusted_);
  ASSERT_EQ(chdir(cwd), 0);
  EXPECT_EQ(f.verdict, TrustVerdict::kWritableByOthers);
  EXPECT_EQ(bare.verdict, TrustVerdict::kWritableByOthers);
  EXPECT_EQ(open_sock.verdict, TrustVerdict::kWritableByOthers);
  EXPECT_TRUE(mine.ok()) << mine.path;
}

TEST_F(FsTrustTest, FilesAreReadOnlyWhenTrusted) {
  const std::string good = File("expect", 0644);
  int fd = -1;
  Status s = OpenTrustedFileForRead(good.c_str(), trusted_, &fd);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_GE(fd, 0);
  if (fd >= 0) close(fd);
  const std::string writable = File("w", 0666);
  s = OpenTrustedFileForRead(writable.c_str(), trusted_, &fd);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(std::string(s.message()), writable + ": mode 0666 lets other users write to it");
  const std::string link = root_ + "/expect-link";
  ASSERT_EQ(symlink(good.c_str(), link.c_str()), 0);
  s = OpenTrustedFileForRead(link.c_str(), trusted_, &fd);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(std::string(s.message()), link + ": a symbolic link (not followed)");
  const std::string fifo = root_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  s = OpenTrustedFileForRead(fifo.c_str(), trusted_, &fd);  // and does not block
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_STREQ(s.message(), "not a regular file");
  s = OpenTrustedFileForRead((root_ + "/none").c_str(), trusted_, &fd);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_STREQ(s.message(), "No such file or directory");
  EXPECT_EQ(s.error_number(), ENOENT);
  s = OpenTrustedFileForRead((good + "/below-a-file").c_str(), trusted_, &fd);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << "ENOTDIR reads as absent";
  EXPECT_STREQ(s.message(), "Not a directory");
  if (geteuid() == 0) {
    const std::string theirs = File("theirs", 0644);
    ASSERT_EQ(chown(theirs.c_str(), kStranger, kStranger), 0);
    s = OpenTrustedFileForRead(theirs.c_str(), trusted_, &fd);
    EXPECT_EQ(fd, -1);
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
    EXPECT_NE(std::string(s.message()).find(theirs + ": owned by uid"), std::string::npos)
        << s.message();
  }
}

TEST_F(FsTrustTest, PeerCredentialsComeFromTheKernel) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  uid_t uid = kNoUid;
  pid_t pid = 0;
  EXPECT_TRUE(PeerCredentials(sv[0], &uid, &pid));
  EXPECT_EQ(uid, getuid());
  EXPECT_EQ(pid, getpid());
  close(sv[0]);
  close(sv[1]);
  EXPECT_FALSE(PeerCredentials(-1, &uid, &pid));
}

}  // namespace
}  // namespace sentinel::rules
