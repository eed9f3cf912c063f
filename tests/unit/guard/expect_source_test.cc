// Where the expectation comes from: SENTINEL_EXPECT, then SENTINEL_EXPECT_FILE, then sentineld's
// node default next to the socket; missing and unreadable files end as evidence, never a crash.
#include "plugin/guard/expect_source.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "common/sentinel_env.h"
#include "plugin/guard/guard_runtime.h"
#include "plugin/guard/verdict.h"
#include "plugin/guard/verdict_text.h"

namespace sentinel::guard {
namespace {

class ExpectSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/snexp-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    socket_ = dir_ + "/s.sock";
    node_file_ = dir_ + "/expect";
  }
  void TearDown() override {
    for (const char* v :
         {"SENTINEL_EXPECT", "SENTINEL_EXPECT_FILE", "SENTINEL_SOCKET", "SENTINEL_ON_MISMATCH"}) {
      UnsetEnv(v);
    }
    ResetForTest();
    std::string cmd = "rm -rf '" + dir_ + "'";
    int rc = system(cmd.c_str());
    (void)rc;
  }
  // The plugin reads SENTINEL_* once per process (common/sentinel_env.h): re-read after a change.
  static void SetEnv(const char* name, const char* value) {
    setenv(name, value, 1);
    rules::testing::ReloadProcessSentinelEnv();
  }
  static void UnsetEnv(const char* name) {
    unsetenv(name);
    rules::testing::ReloadProcessSentinelEnv();
  }
  static void Write(const std::string& path, const std::string& text) {
    FILE* f = std::fopen(path.c_str(), "we");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  ExpectSourceInputs Inputs() const {
    ExpectSourceInputs in;
    in.sentinel_socket = socket_.c_str();
    in.uid = getuid();
    return in;
  }

  std::string dir_;
  std::string socket_;
  std::string node_file_;
};

TEST_F(ExpectSourceTest, NodeDefaultPathFollowsTheSocketRule) {
  char path[256];
  ExpectSourceInputs in = Inputs();
  ASSERT_TRUE(NodeDefaultExpectPath(in, path, sizeof path));
  EXPECT_EQ(std::string(path), node_file_);
  in.sentinel_socket = nullptr;
  in.xdg_runtime_dir = "/run/user/1000";
  ASSERT_TRUE(NodeDefaultExpectPath(in, path, sizeof path));
  EXPECT_EQ(std::string(path), "/run/user/1000/sentinel/expect");
  in.xdg_runtime_dir = nullptr;
  in.uid = 1234;
  ASSERT_TRUE(NodeDefaultExpectPath(in, path, sizeof path));
  EXPECT_EQ(std::string(path), "/tmp/sentinel-1234/expect");
  in.sentinel_socket = "none";  // streaming off: no node default either
  EXPECT_FALSE(NodeDefaultExpectPath(in, path, sizeof path));
  in.sentinel_socket = "/s.sock";
  ASSERT_TRUE(NodeDefaultExpectPath(in, path, sizeof path));
  EXPECT_EQ(std::string(path), "/expect");
  EXPECT_FALSE(NodeDefaultExpectPath(Inputs(), path, 4));  // does not fit
}

TEST_F(ExpectSourceTest, OrderIsEnvThenFileThenNodeDefault) {
  const std::string file = dir_ + "/job.expect";
  Write(file, "net=roce\n");
  Write(node_file_, "# published by sentineld\n# on_mismatch=warn\nnet=socket\n");
  ExpectSourceInputs in = Inputs();
  in.expect = "net=ib";
  in.expect_file = file.c_str();
  ExpectSource s = ResolveExpectSource(in);
  EXPECT_EQ(s.kind, ExpectSourceKind::kEnv);
  EXPECT_EQ(s.text, "net=ib");
  EXPECT_EQ(s.description, "SENTINEL_EXPECT (environment)");
  in.expect = "";  // set but empty counts as unset
  s = ResolveExpectSource(in);
  EXPECT_EQ(s.kind, ExpectSourceKind::kFile);
  EXPECT_EQ(s.text, "net=roce\n");
  EXPECT_EQ(s.name, file);
  in.expect_file = nullptr;
  s = ResolveExpectSource(in);
  EXPECT_EQ(s.kind, ExpectSourceKind::kNodeDefault);
  EXPECT_EQ(s.name, node_file_);
  EXPECT_NE(s.text.find("net=socket"), std::string::npos);
  EXPECT_EQ(s.on_mismatch, "warn");
  EXPECT_EQ(s.description, "node default from sentineld (" + node_file_ + ")");
  EXPECT_TRUE(s.read_error.empty());
  in.sentinel_socket = "none";
  EXPECT_EQ(ResolveExpectSource(in).kind, ExpectSourceKind::kNone);
}

TEST_F(ExpectSourceTest, MissingAndUnreadableFiles) {
  ExpectSourceInputs in = Inputs();
  // No node default file: simply no expectation.
  ExpectSource s = ResolveExpectSource(in);
  EXPECT_EQ(s.kind, ExpectSourceKind::kNone);
  // A missing SENTINEL_EXPECT_FILE is an error the guard reports.
  const std::string missing = dir_ + "/nope";
  in.expect_file = missing.c_str();
  s = ResolveExpectSource(in);
  EXPECT_EQ(s.kind, ExpectSourceKind::kFile);
  EXPECT_NE(s.read_error.find("cannot read SENTINEL_EXPECT_FILE=" + missing), std::string::npos);
  EXPECT_NE(s.read_error.find("No such file"), std::string::npos) << s.read_error;
  // An unreadable node default (a directory here: root can read any file) is reported too.
  in.expect_file = nullptr;
  ASSERT_EQ(mkdir(node_file_.c_str(), 0755), 0);
  s = ResolveExpectSource(in);
  EXPECT_EQ(s.kind, ExpectSourceKind::kNodeDefault);
  EXPECT_NE(s.read_error.find("cannot read the node default expectation " + node_file_),
            std::string::npos)
      << s.read_error;
}

TEST_F(ExpectSourceTest, ConstructorCheckIsOneStat) {
  SetEnv("SENTINEL_SOCKET", socket_.c_str());
  EXPECT_FALSE(ExpectationMayApply());
  Write(node_file_, "net=ib\n");
  EXPECT_TRUE(ExpectationMayApply());
  SetEnv("SENTINEL_SOCKET", "none");
  EXPECT_FALSE(ExpectationMayApply());
  SetEnv("SENTINEL_EXPECT", "net=ib");
  EXPECT_TRUE(ExpectationMayApply());
}

// The guard's configuration: the node default applies with sentineld's on_mismatch unless the
// job says otherwise, the verdict names the source, and a broken node default only warns.
TEST_F(ExpectSourceTest, GuardConfigFromNodeDefault) {
  SetEnv("SENTINEL_SOCKET", socket_.c_str());
  Write(node_file_, "# on_mismatch=warn\nnet=ib affinity=numa\n");
  ResetForTest();
  const GuardConfig& c = Config();
  EXPECT_TRUE(c.active);
  EXPECT_EQ(c.source_kind, ExpectSourceKind::kNodeDefault);
  EXPECT_EQ(c.mode, Mode::kWarn);
  EXPECT_EQ(c.expect.affinity, Affinity::kNuma);
  Verdict v;
  Finding f;
  f.term = "net=ib";
  f.found = "x";
  v.mismatches.push_back(f);
  std::string msg = FormatVerdict(v, c.expect, Evidence(), c.mode, "ncclCommInitRank");
  EXPECT_NE(msg.find("expectation from: node default from sentineld (" + node_file_ + ")"),
            std::string::npos)
      << msg;

  SetEnv("SENTINEL_ON_MISMATCH", "abort");  // the job's own choice wins
  ResetForTest();
  EXPECT_EQ(Config().mode, Mode::kAbort);
  UnsetEnv("SENTINEL_ON_MISMATCH");

  Write(node_file_, "net=ib gdr=maybe\n");
  ResetForTest();
  EXPECT_TRUE(Config().active);
  EXPECT_TRUE(Config().error_is_warning);
  EXPECT_NE(Config().parse_error.find(node_file_ + ":1:12: unknown value 'maybe'"),
            std::string::npos)
      << Config().parse_error;
  // The creation call is left alone: the job did not ask for this expectation.
  testing::internal::CaptureStderr();
  void* comm = nullptr;
  EXPECT_EQ(OnCreateEnd("ncclCommInitRank", 0, &comm, 1, nullptr), 0);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("not enforced"), std::string::npos) << err;
}

TEST_F(ExpectSourceTest, UnreadableExpectFileFailsTheJobThatAskedForIt) {
  const std::string missing = dir_ + "/nope";
  SetEnv("SENTINEL_EXPECT_FILE", missing.c_str());
  SetEnv("SENTINEL_ON_MISMATCH", "warn");
  ResetForTest();
  EXPECT_TRUE(Config().active);
  EXPECT_FALSE(Config().error_is_warning);
  EXPECT_EQ(Config().mode, Mode::kWarn);  // read even when the file is not
  UnsetEnv("SENTINEL_ON_MISMATCH");
  ResetForTest();
  testing::internal::CaptureStderr();
  void* comm = nullptr;
  EXPECT_EQ(OnCreateEnd("ncclCommInitRank", 0, &comm, 1, nullptr), 5);  // ncclInvalidUsage
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cannot read SENTINEL_EXPECT_FILE=" + missing), std::string::npos) << err;
}

// ---- trust: whose files may set the expectation ------------------------------------------

// SENTINEL_EXPECT_FILE that someone else owns, or that others may write to: ignored with one
// line, never enforced (it would otherwise fail every init, or abort the process).
TEST_F(ExpectSourceTest, UntrustedExpectFileIsIgnoredWithALine) {
  const std::string file = dir_ + "/mine.expect";
  Write(file, "net=ib\n");
  ExpectSourceInputs in = Inputs();
  in.expect_file = file.c_str();
  ExpectSource s = ResolveExpectSource(in);  // trusted: read
  EXPECT_EQ(s.kind, ExpectSourceKind::kFile);
  EXPECT_EQ(s.text, "net=ib\n");
  EXPECT_TRUE(s.ignored.empty());

  ASSERT_EQ(chmod(file.c_str(), 0666), 0);
  s = ResolveExpectSource(in);
  EXPECT_EQ(s.kind, ExpectSourceKind::kNone);
  EXPECT_TRUE(s.text.empty());
  EXPECT_EQ(s.ignored.find("ignoring SENTINEL_EXPECT_FILE: " + file +
                           ": mode 0666 lets other users write to it"),
            0u)
      << "the line, without a prefix (the stderr writer adds it): " << s.ignored;

  if (geteuid() == 0) {
    ASSERT_EQ(chmod(file.c_str(), 0644), 0);
    ASSERT_EQ(chown(file.c_str(), 4243, 4243), 0);
    s = ResolveExpectSource(in);
    EXPECT_EQ(s.kind, ExpectSourceKind::kNone);
    EXPECT_NE(s.ignored.find("owned by uid 4243"), std::string::npos) << s.ignored;
  }
  // A symlink is not followed (whoever owns its target's directory could swap it).
  const std::string link = dir_ + "/link.expect";
  ASSERT_EQ(symlink(file.c_str(), link.c_str()), 0);
  in.expect_file = link.c_str();
  s = ResolveExpectSource(in);
  EXPECT_EQ(s.kind, ExpectSourceKind::kNone);
  EXPECT_NE(s.ignored.find("symbolic link"), std::string::npos) << s.ignored;
}

// SENTINEL_EXPECT_FILE's directory is checked as the socket's: a trusted file in a directory
// anybody may write to (or one that another user owns) is ignored with one line, since whoever
// can write there can swap it for the next run. Before, only the file itself was checked.
TEST_F(ExpectSourceTest, ExpectFileInAnUntrustedDirectoryIsIgnoredWithALine) {
  const std::string open_dir = dir_ + "/open";
  ASSERT_EQ(mkdir(open_dir.c_str(), 0700), 0);
  const std::string file = open_dir + "/job.expect";
  Write(file, "net=ib\n");
  ExpectSourceInputs in = Inputs();
  in.expect_file = file.c_str();
  ExpectSource s = ResolveExpectSource(in);  // the control: a private directory, read
  EXPECT_EQ(s.kind, ExpectSourceKind::kFile);
  EXPECT_EQ(s.text, "net=ib\n");

  ASSERT_EQ(chmod(open_dir.c_str(), 0777), 0);
  s = ResolveExpectSource(in);
  EXPECT_EQ(s.kind, ExpectSourceKind::kNone);
  EXPECT_TRUE(s.text.empty());
  EXPECT_EQ(s.ignored, "ignoring SENTINEL_EXPECT_FILE: " + file + " is in " + open_dir +
                           ": mode 0777 lets other users write to it (read only when owned by "
                           "you, root or the sentinel daemon's user and not writable by others; "
                           "README.md \"Trust\"): no expectation is enforced from it");
  if (geteuid() == 0) {
    ASSERT_EQ(chmod(open_dir.c_str(), 0755), 0);
    ASSERT_EQ(chown(open_dir.c_str(), 4243, 4243), 0);
    s = ResolveExpectSource(in);
    EXPECT_EQ(s.kind, ExpectSourceKind::kNone);
    EXPECT_NE(s.ignored.find(open_dir + ": owned by uid 4243"), std::string::npos) << s.ignored;
  }
  // A missing file in a missing directory is the read's to tell (the job asked for it).
  const std::string missing = dir_ + "/nowhere/job.expect";
  in.expect_file = missing.c_str();
  s = ResolveExpectSource(in);
  EXPECT_TRUE(s.ignored.empty()) << s.ignored;
  EXPECT_NE(s.read_error.find("cannot read SENTINEL_EXPECT_FILE=" + missing), std::string::npos)
      << s.read_error;
}

// The node default next to the socket: the file and its directory must be trusted.
TEST_F(ExpectSourceTest, UntrustedNodeDefaultIsIgnoredWithALine) {
  ExpectSourceInputs in = Inputs();
  Write(node_file_, "# on_mismatch=abort\nnet=ib\n");
  ExpectSource s = ResolveExpectSource(in);
  EXPECT_EQ(s.kind, ExpectSourceKind::kNodeDefault);
  EXPECT_EQ(s.on_mismatch, "abort");

  ASSERT_EQ(chmod(node_file_.c_str(), 0622), 0);
  s = ResolveExpectSource(in);
  EXPECT_EQ(s.kind, ExpectSourceKind::kNone);
  EXPECT_TRUE(s.on_mismatch.empty());
  EXPECT_NE(s.ignored.find("ignoring the node default expectation: " + node_file_ +
                           ": mode 0622 lets other users write to it"),
            std::string::npos)
      << s.ignored;

  ASSERT_EQ(chmod(node_file_.c_str(), 0644), 0);
  ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);  // anybody could have planted it
  s = ResolveExpectSource(in);
  EXPECT_EQ(s.kind, ExpectSourceKind::kNone);
  EXPECT_NE(s.ignored.find(node_file_ + " is in " + dir_ + ": mode 0777"), std::string::npos)
      << s.ignored;
  ASSERT_EQ(chmod(dir_.c_str(), 0700), 0);

  if (geteuid() == 0) {
    ASSERT_EQ(chown(node_file_.c_str(), 4243, 4243), 0);
    s = ResolveExpectSource(in);
    EXPECT_EQ(s.kind, ExpectSourceKind::kNone);
    EXPECT_NE(s.ignored.find("owned by uid 4243"), std::string::npos) << s.ignored;
    // The daemon's user (SENTINEL_DAEMON_USER) is trusted: sentineld publishes as that user.
    in.trusted.daemon = 4243;
    s = ResolveExpectSource(in);
    EXPECT_EQ(s.kind, ExpectSourceKind::kNodeDefault);
    EXPECT_TRUE(s.ignored.empty());
  }
}

// Through the guard: a planted node default with on_mismatch=abort and a failing expectation
// leaves the creation call alone and says once why.
TEST_F(ExpectSourceTest, PlantedNodeDefaultNeverFailsTheInit) {
  SetEnv("SENTINEL_SOCKET", socket_.c_str());
  SetEnv("SENTINEL_ON_MISMATCH", "fail");
  Write(node_file_, "net=ib gdr=maybe\n");  // a parse error: fails the init when enforced
  ASSERT_EQ(chmod(node_file_.c_str(), 0666), 0);
  ResetForTest();
  EXPECT_FALSE(Config().active);
  testing::internal::CaptureStderr();
  void* comm = nullptr;
  EXPECT_EQ(OnCreateEnd("ncclCommInitRank", 0, &comm, 1, nullptr), 0);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "");  // said when the configuration was read, before this capture

  ResetForTest();
  testing::internal::CaptureStderr();
  EXPECT_FALSE(Config().active);
  EXPECT_EQ(OnCreateEnd("ncclCommInitRank", 0, &comm, 1, nullptr), 0);
  err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[sentinel " + std::to_string(getpid()) +
                     "] ignoring the node default expectation: " + node_file_),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("invalid expectation"), std::string::npos) << err;
}

}  // namespace
}  // namespace sentinel::guard
