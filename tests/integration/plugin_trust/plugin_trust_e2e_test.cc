// The plugin's trust rules with real processes (README.md "Trust"): a fake sentineld
// (fake_sentineld) that plays an attacker, and a two-rank job over the fake NCCL (trust_job)
// with the real libnccl-profiler-sentinel.so as profiler and LD_PRELOAD interposer.
//   - a socket directory that another user owns or anybody may write to, or a listener of another
//     uid: the job never streams there, says so in one [sentinel] line, and completes;
//   - a planted node expectation (foreign owner, world-writable file or directory) or an
//     untrusted SENTINEL_EXPECT_FILE: never fails an init nor aborts;
//   - forged hang verdicts (another seq; a young collective claimed stuck 31 s; a claim of 1 ns;
//     a daemon --hang-timeout of 1 ms): no abort, a few "ignored" lines however many arrive;
//   - a verdict whose strings hold control bytes: escaped on stderr;
//   - a peer that keeps writing: ncclCommDestroy still returns within 2 s;
//   - SENTINEL_DAEMON_USER naming no user: told once, and only the job's uid and root trusted.
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "tests/integration/fake_nccl/test_util.h"

namespace sentinel::testing {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

int SentinelLines(const std::string& output) {
  int n = 0;
  for (const std::string& line : Lines(output)) {
    if (line.rfind("[sentinel", 0) == 0) ++n;
  }
  return n;
}

// "key=value" out of the fake's stats line (-1 when absent).
long Stat(const std::string& stats, const std::string& key) {
  const size_t at = stats.find(key + "=");
  return at == std::string::npos ? -1 : std::atol(stats.c_str() + at + key.size() + 1);
}

std::vector<double> DestroyMs(const std::string& output) {
  std::vector<double> ms;
  for (const std::string& line : Lines(output)) {
    int rank = -1;
    double t = 0;
    if (std::sscanf(line.c_str(), "rank %d destroy_ms=%lf", &rank, &t) == 2) ms.push_back(t);
  }
  return ms;
}

class PluginTrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "needs root: the attacker runs as uid 4243 (setpriv), files are chowned";
    }
    char tmpl[] = "/tmp/sptr-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    // Like /tmp: anybody may create a directory here, nobody may rename another's away.
    ASSERT_EQ(chmod(base_.c_str(), 01777), 0);
  }
  void TearDown() override {
    for (Started& c : collectors_) {
      if (c.pid > 0) {
        kill(c.pid, SIGTERM);
        WaitProgram(c);
      }
    }
    if (!base_.empty()) RunProgram({"/bin/rm", "-rf", base_}, {});
  }

  std::string Dir(const std::string& name, mode_t mode) {
    const std::string d = base_ + "/" + name;
    EXPECT_EQ(mkdir(d.c_str(), 0700), 0) << d;
    EXPECT_EQ(chmod(d.c_str(), mode), 0);
    return d;
  }
  static void WriteFile(const std::string& path, const std::string& text, mode_t mode) {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr) << path;
    std::fputs(text.c_str(), f);
    std::fclose(f);
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
  }

  // Starts the fake sentineld (as uid 4243 through setpriv when `as_4243`) and waits until it
  // listens. Returns its stats file.
  std::string StartCollector(const std::string& socket, std::vector<std::string> args,
                             bool as_4243) {
    const std::string stats = base_ + "/stats." + std::to_string(collectors_.size());
    std::vector<std::string> argv;
    if (as_4243) {
      argv = {"/usr/bin/setpriv", "--reuid=4243", "--regid=4243", "--clear-groups", "--"};
    }
    argv.insert(argv.end(), {FAKE_SENTINELD_PATH, "--socket", socket, "--stats", stats});
    argv.insert(argv.end(), args.begin(), args.end());
    collectors_.push_back(StartProgram(argv, {}, 150));
    struct stat st {};
    EXPECT_TRUE(
        Eventually([&] { return lstat(socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode); }, 20000))
        << "the fake sentineld does not listen at " << socket;
    return stats;
  }
  // Stops the last collector started; returns its output.
  std::string StopCollector() {
    Started& c = collectors_.back();
    kill(c.pid, SIGTERM);
    RunResult r = WaitProgram(c);
    c.pid = -1;
    return r.output;
  }

  RunResult Job(const std::string& socket, const Env& extra, std::vector<std::string> args = {}) {
    const char* asan = getenv("ASAN_OPTIONS");
    Env env = {{"NCCL_PROFILER_PLUGIN", SENTINEL_PLUGIN_PATH},
               {"LD_PRELOAD", SENTINEL_PLUGIN_PATH},
               {"SENTINEL_SOCKET", socket},
               {"ASAN_OPTIONS", std::string(asan != nullptr ? asan : "") +
                                    (asan != nullptr && *asan != '\0' ? ":" : "") +
                                    "verify_asan_link_order=0"}};
    env.insert(env.end(), extra.begin(), extra.end());
    std::vector<std::string> argv = {TRUST_JOB_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProgram(argv, env, 90);
  }

  std::string base_;
  std::vector<Started> collectors_;
};

// An attacker's directory (made 0777 by someone, or owned by uid 4243) or listener: the job never
// says hello there, prints one line naming why, and completes. The trusted control streams.
TEST_F(PluginTrustTest, UntrustedSocketDirectoryOrPeerNeverGetsTheStream) {
  struct Case {
    const char* name;
    std::string socket;
    std::vector<std::string> args;
    bool as_4243;
    const char* why;
  };
  std::vector<Case> cases;
  Dir("open", 0777);
  cases.push_back({"a directory anybody may write to, the listener uid 4243",
                   base_ + "/open/s.sock",
                   {},
                   true,
                   "mode 0777 lets other users write to it"});
  cases.push_back({"a directory uid 4243 made and owns",
                   base_ + "/own/s.sock",
                   {"--make-dir", "0700"},
                   true,
                   "owned by uid 4243"});
  Dir("peer", 0755);
  cases.push_back({"a trusted directory, the listener uid 4243 (SO_PEERCRED)",
                   base_ + "/peer/s.sock",
                   {"--listen-uid", "4243"},
                   false,
                   "runs as uid 4243"});
  // A path through a link uid 4243 owns, in the sticky base (where only its owner may replace
  // it): the link points to a directory of ours now, and the listener is ours, but uid 4243 can
  // point it elsewhere at any time. Before, the resolved path was checked and the job streamed.
  ASSERT_EQ(mkdir((Dir("linked", 0700) + "/run").c_str(), 0700), 0);
  const std::string link = base_ + "/via-4243";
  ASSERT_EQ(symlink("linked", link.c_str()), 0);
  ASSERT_EQ(lchown(link.c_str(), 4243, 4243), 0);
  cases.push_back({"a trusted directory reached through a link uid 4243 owns",
                   link + "/run/s.sock",
                   {},
                   false,
                   "via-4243: owned by uid 4243"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string stats = StartCollector(c.socket, c.args, c.as_4243);
    RunResult r = Job(c.socket, {}, {"--steps", "10"});
    StopCollector();
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("trust_job: all ranks finished"), std::string::npos) << r.output;
    EXPECT_EQ(Stat(ReadFile(stats), "hellos"), 0) << ReadFile(stats) << "\n" << r.output;
    EXPECT_EQ(SentinelLines(r.output), 1) << r.output;
    EXPECT_EQ(Count(r.output, "not streaming to sentineld at " + c.socket + ": "), 1) << r.output;
    EXPECT_NE(r.output.find(c.why), std::string::npos) << r.output;
  }
  // The control: the same fake as root in a directory of ours gets the stream, silently.
  const std::string good = Dir("good", 0700) + "/s.sock";
  const std::string stats = StartCollector(good, {}, false);
  RunResult r = Job(good, {}, {"--steps", "10"});
  StopCollector();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Stat(ReadFile(stats), "hellos"), 1) << ReadFile(stats) << "\n" << r.output;
  EXPECT_EQ(SentinelLines(r.output), 0) << r.output;
}

// SENTINEL_DAEMON_USER naming no user on this host: told once, whatever the log level, and only
// the job's own uid and root are trusted (never the default `sentinel` user in its place): a
// sentineld of uid 4243 in its own directory gets nothing. The control: the same variable naming
// uid 4243 streams there. Before, the unknown name was accepted silently.
TEST_F(PluginTrustTest, UnresolvableDaemonUserIsToldAndTrustsOnlyYouAndRoot) {
  const std::string socket = base_ + "/daemon/s.sock";
  std::string stats = StartCollector(socket, {"--make-dir", "0700"}, true);
  RunResult r = Job(socket, {{"SENTINEL_DAEMON_USER", "no-such-sentinel-user"}}, {"--steps", "4"});
  StopCollector();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Count(r.output,
                  "SENTINEL_DAEMON_USER='no-such-sentinel-user' is not a user on this "
                  "host; trusting only your own uid (0) and root"),
            1)
      << r.output;
  EXPECT_EQ(Stat(ReadFile(stats), "hellos"), 0) << ReadFile(stats) << "\n" << r.output;
  EXPECT_NE(r.output.find("daemon: owned by uid 4243"), std::string::npos) << r.output;
  EXPECT_EQ(SentinelLines(r.output), 2) << r.output;

  stats = StartCollector(socket, {}, true);
  r = Job(socket, {{"SENTINEL_DAEMON_USER", "4243"}}, {"--steps", "4"});
  StopCollector();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Stat(ReadFile(stats), "hellos"), 1) << ReadFile(stats) << "\n" << r.output;
  EXPECT_EQ(SentinelLines(r.output), 0) << r.output;
}

// The node default `expect` next to the socket, or SENTINEL_EXPECT_FILE, planted by someone else:
// the init goes through with one line saying why. The control (a trusted file, same text) fails
// the init, so the expectation itself does fail here.
TEST_F(PluginTrustTest, PlantedExpectationNeverFailsTheInit) {
  const std::string text = "# on_mismatch=fail\nnet=ib\n";
  const Env mismatch = {{"NCCL_IB_DISABLE", "1"}, {"SENTINEL_VERBS", "0"}};
  {
    SCOPED_TRACE("control: a trusted node default");
    const std::string d = Dir("trusted", 0700);
    WriteFile(d + "/expect", text, 0644);
    RunResult r = Job(d + "/s.sock", mismatch, {"--steps", "2"});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("rank 0 init rc=5"), std::string::npos) << r.output;
  }
  struct Case {
    const char* name;
    std::string socket;
    Env env;
    const char* line;
  };
  std::vector<Case> cases;
  {
    const std::string d = Dir("open", 0777);
    WriteFile(d + "/expect", text, 0644);
    cases.push_back({"in a directory anybody may write to", d + "/s.sock", mismatch,
                     "mode 0777 lets other users write to it"});
  }
  {
    const std::string d = Dir("foreign", 0700);
    WriteFile(d + "/expect", text, 0644);
    EXPECT_EQ(chown((d + "/expect").c_str(), 4243, 4243), 0);
    cases.push_back({"owned by uid 4243", d + "/s.sock", mismatch, "owned by uid 4243"});
  }
  {
    const std::string d = Dir("writable", 0700);
    WriteFile(d + "/expect", text, 0666);
    cases.push_back(
        {"writable by anybody", d + "/s.sock", mismatch, "mode 0666 lets other users write to it"});
  }
  {
    const std::string f = Dir("job", 0700) + "/job.expect";
    WriteFile(f, "net=ib\n", 0644);
    EXPECT_EQ(chown(f.c_str(), 4243, 4243), 0);
    Env env = mismatch;
    env.push_back({"SENTINEL_EXPECT_FILE", f});
    env.push_back({"SENTINEL_ON_MISMATCH", "abort"});
    cases.push_back({"SENTINEL_EXPECT_FILE owned by uid 4243, on_mismatch=abort",
                     base_ + "/none/s.sock", env, "owned by uid 4243"});
  }
  {
    // A trusted file, but in a directory anybody may write to: swappable before the next run.
    const std::string f = Dir("job-open", 0777) + "/job.expect";
    WriteFile(f, "net=ib\n", 0644);
    Env env = mismatch;
    env.push_back({"SENTINEL_EXPECT_FILE", f});
    env.push_back({"SENTINEL_ON_MISMATCH", "fail"});
    cases.push_back({"SENTINEL_EXPECT_FILE in a directory anybody may write to",
                     base_ + "/none/s.sock", env,
                     "/job-open: mode 0777 lets other users write to it"});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RunResult r = Job(c.socket, c.env, {"--steps", "2"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("rank 0 init rc=0"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("rank 1 init rc=0"), std::string::npos) << r.output;
    EXPECT_EQ(Count(r.output, "] ignoring "), 1) << r.output;
    EXPECT_NE(r.output.find(c.line), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("expectation not met"), std::string::npos) << r.output;
  }
}

// Forged verdicts for the communicator rank 0 waits in (rank 1 is 5 s late): 200 naming another
// seq, one claiming the young collective has been stuck 31 s, one claiming 1 ns (before, any
// claim under the 50 ms clock tolerance was acted on) and one true to the rank's clock but
// carrying a --hang-timeout of 1 ms. Under SENTINEL_ON_HANG=abort nothing is aborted, the job
// completes, and the "ignored" lines stay few.
TEST_F(PluginTrustTest, ForgedVerdictsAreIgnoredAndTheJobCompletes) {
  const std::string d = Dir("v", 0700);
  struct Case {
    const char* mode;
    const char* count;
    const char* why;
  };
  for (const Case& c : {Case{"wrong-seq", "200", "it is not this rank's oldest incomplete"},
                        Case{"young", "1", "has not been inside it that long by its own clock"},
                        Case{"tiny", "1",
                             "the claimed time is under half the --hang-timeout it carries "
                             "(claimed 0.000 s, --hang-timeout 30.000 s)"},
                        Case{"short-timeout", "1",
                             "the --hang-timeout it carries is below the 1 s a rank accepts"}}) {
    SCOPED_TRACE(c.mode);
    const std::string socket = d + "/" + c.mode + ".sock";
    const std::string stats = StartCollector(
        socket, {"--mode", c.mode, "--count", c.count, "--min-completed", "2"}, false);
    RunResult r = Job(socket, {{"SENTINEL_ON_HANG", "abort"}},
                      {"--steps", "6", "--late-ms", "5000", "--late-at", "2"});
    StopCollector();
    EXPECT_EQ(Stat(ReadFile(stats), "verdicts_sent"), std::atol(c.count)) << r.output;
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("trust_job: all ranks finished"), std::string::npos) << r.output;
    EXPECT_EQ(Count(r.output, "aborting communicator"), 0) << r.output;
    const int ignored = Count(r.output, "ignored a hang verdict from sentineld");
    EXPECT_GE(ignored, 1) << r.output;
    EXPECT_LE(ignored, 5) << r.output;
    EXPECT_NE(r.output.find(c.why), std::string::npos) << r.output;
  }
}

// A verdict (true to the rank's state) whose strings hold a newline, a forged "[sentinel]" line,
// terminal escapes and a bell: reported with every control byte escaped.
TEST_F(PluginTrustTest, VerdictStringsAreEscapedOnStderr) {
  const std::string socket = Dir("e", 0700) + "/s.sock";
  const std::string stats =
      StartCollector(socket, {"--mode", "escape", "--min-completed", "2"}, false);
  RunResult r = Job(socket, {}, {"--steps", "6", "--late-ms", "5000", "--late-at", "2"});
  StopCollector();
  EXPECT_EQ(Stat(ReadFile(stats), "verdicts_sent"), 1) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  ASSERT_NE(r.output.find("hang reported on communicator"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("culprit: rank 1\\x0a[sentinel 1] FORGED LINE\\x1b[2J\\x1b[31mred\\x07"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("exclude on restart: host-x\\x0d\\x1b]0;title\\x07"), std::string::npos)
      << r.output;
  for (char ch : {'\x1b', '\x07', '\r'}) {
    EXPECT_EQ(r.output.find(ch), std::string::npos) << "raw control byte " << int(ch);
  }
  for (const std::string& line : Lines(r.output)) {
    EXPECT_NE(line.rfind("[sentinel 1] FORGED", 0), 0u) << r.output;
  }
}

// A peer that writes verdict frames as fast as the plugin takes them, for 60 s: each rank's
// ncclCommDestroy (the final drain reads the socket on the application's thread) still returns
// within 2 s, and stderr gets a handful of lines, not one per frame.
TEST_F(PluginTrustTest, PeerThatKeepsWritingDoesNotHoldNcclCommDestroy) {
  const std::string socket = Dir("f", 0700) + "/s.sock";
  const std::string stats = StartCollector(socket, {"--mode", "flood", "--flood-s", "60"}, false);
  // Rank 1 is 3 s late once, so that the flood is in full swing when the job ends.
  RunResult r = Job(socket, {}, {"--steps", "20", "--late-ms", "3000", "--late-at", "10"});
  const std::string collector = StopCollector();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // It kept the socket full: more than the kernel buffers between two reads of a bounded plugin.
  EXPECT_GE(Stat(ReadFile(stats), "verdicts_sent"), 256) << ReadFile(stats);
  const std::vector<double> ms = DestroyMs(r.output);
  ASSERT_EQ(ms.size(), 2u) << r.output;
  for (double t : ms) EXPECT_LT(t, 2000.0) << r.output;
  std::printf(
      "ncclCommDestroy: %.1f ms and %.1f ms with the peer still writing; %zu output lines\n", ms[0],
      ms[1], Lines(r.output).size());
  EXPECT_LE(Count(r.output, "ignored a hang verdict"), 10) << r.output.substr(0, 4000);
  EXPECT_LE(Lines(r.output).size(), 40u) << r.output.substr(0, 4000);
}

}  // namespace
}  // namespace sentinel::testing
