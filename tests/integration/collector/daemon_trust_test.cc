// sentineld against another local user: the real daemon runs as a victim uid (4242, through
// setpriv, XDG_RUNTIME_DIR unset) while an attacker uid (4243) prepares the directories and links
// it will meet. The socket directory must be the victim's own (created, or brought to its mode),
// files are never written through a planted name, and a flood of hello-less connections from one
// uid never evicts another uid's job in its handshake. Needs root (to switch uids): skipped
// otherwise.
#include <fcntl.h>
#include <grp.h>
#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "tests/integration/collector/cross_uid_util.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::testing {
namespace {

class DaemonTrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0)
      GTEST_SKIP() << "needs root to run sentineld and an attacker as uids 4242/4243";
    if (Shell("command -v setpriv >/dev/null") != 0) GTEST_SKIP() << "setpriv (util-linux) missing";
    char tmpl[] = "/tmp/sntrust-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    ASSERT_EQ(chmod(base_.c_str(), 0755), 0);  // root's, traversable by both uids
    if (ShellAs(kVictim, kVictim, std::string(SENTINEL_SENTINELD_PATH) + " --help >/dev/null") !=
        0) {
      GTEST_SKIP() << "uid 4242 cannot run " << SENTINEL_SENTINELD_PATH;
    }
    // The victim's private directory: its port file, its log, a private file of its own.
    victim_ = base_ + "/victim";
    ASSERT_EQ(mkdir(victim_.c_str(), 0700), 0);
    ASSERT_EQ(chown(victim_.c_str(), kVictim, kVictim), 0);
    secret_ = victim_ + "/secret";
    { std::ofstream(secret_) << "victim's private data\n"; }
    ASSERT_EQ(chown(secret_.c_str(), kVictim, kVictim), 0);
    ASSERT_EQ(chmod(secret_.c_str(), 0600), 0);
  }
  void TearDown() override {
    if (!base_.empty()) Shell("rm -rf '" + base_ + "'");
    if (!default_dir_.empty()) Shell("rm -rf '" + default_dir_ + "'");
  }
  // A directory of the attacker's, open to everyone, under base_ (which only root may write).
  static void AttackerDir(const std::string& dir) {
    ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(chown(dir.c_str(), kAttacker, kAttacker), 0);
    ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  }
  std::vector<std::string> Args(const std::vector<std::string>& extra) const {
    std::vector<std::string> a = {"--listen",    "127.0.0.1:0", "--port-file", victim_ + "/port",
                                  "--log-level", "info",        "--tick",      "100ms"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  void ExpectSecretUntouched() {
    EXPECT_EQ(ReadAll(secret_), "victim's private data\n") << "the victim's file was overwritten";
    EXPECT_EQ(ModeOf(secret_), 0600u) << "the victim's file changed mode";
  }
  // The per-uid default socket directory when XDG_RUNTIME_DIR is unset (common/socket_path.h).
  std::string DefaultDir() {
    default_dir_ = "/tmp/sentinel-" + std::to_string(kVictim);
    Shell("rm -rf '" + default_dir_ + "'");
    return default_dir_;
  }

  std::string base_;
  std::string victim_;
  std::string secret_;
  std::string default_dir_;
};

// The socket-directory takeover: another user creates /tmp/sentinel-<victim uid> first, mode 0777,
// and plants a link at the expectation file's old temporary name. The victim's sentineld must
// refuse the directory in one line, not listen there, and leave the victim's file alone.
TEST_F(DaemonTrustTest, AttackerPrecreatedDefaultDirectoryIsRefused) {
  const std::string dir = DefaultDir();
  ASSERT_EQ(ShellAs(kAttacker, kAttacker, "mkdir " + dir + " && chmod 0777 " + dir), 0);
  VictimDaemon d(Args({"--expect", "net=ib"}), base_ + "/log");
  ASSERT_GT(d.pid(), 0);
  ASSERT_EQ(ShellAs(kAttacker, kAttacker,
                    "ln -s " + secret_ + " " + dir + "/expect.tmp." + std::to_string(d.pid())),
            0);
  d.Go();
  const int code = d.WaitExit(20);
  EXPECT_EQ(code, 1) << "sentineld did not refuse (still running: -1): " << d.Log();
  const std::string log = d.Log();
  EXPECT_NE(log.find("socket directory: " + dir + ": owned by uid 4243, not by you (uid 4242)"),
            std::string::npos)
      << log;
  EXPECT_FALSE(Exists(dir + "/sentineld.sock")) << "sentineld listened in the attacker's directory";
  EXPECT_FALSE(Exists(victim_ + "/port"));
  ExpectSecretUntouched();
}

// A symlink at the default directory's name (to a directory the attacker controls) is refused.
TEST_F(DaemonTrustTest, SymlinkAtTheDefaultDirectoryIsRefused) {
  const std::string dir = DefaultDir();
  const std::string trap = base_ + "/trap";
  AttackerDir(trap);
  ASSERT_EQ(ShellAs(kAttacker, kAttacker, "ln -s " + trap + " " + dir), 0);
  VictimDaemon d(Args({}), base_ + "/log");
  d.Go();
  EXPECT_EQ(d.WaitExit(20), 1) << d.Log();
  EXPECT_NE(d.Log().find(dir + ": a symbolic link (not followed)"), std::string::npos) << d.Log();
  EXPECT_FALSE(Exists(trap + "/sentineld.sock"));
}

// A directory the victim owns but left open (0777) is brought to 0700, and the daemon starts.
TEST_F(DaemonTrustTest, OwnOpenDirectoryIsFixedTo0700) {
  const std::string dir = victim_ + "/run";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chown(dir.c_str(), kVictim, kVictim), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  VictimDaemon d(Args({"--socket", dir + "/s.sock"}), base_ + "/log");
  d.Go();
  ASSERT_TRUE(d.WaitForFile(victim_ + "/port")) << d.Log();
  EXPECT_EQ(ModeOf(dir), 0700u);
  EXPECT_EQ(ModeOf(dir + "/s.sock"), 0600u);
  EXPECT_NE(d.Log().find("mode set to 0700 (was 0777)"), std::string::npos) << d.Log();
}

// --allow-group: an existing directory gets 0750 and the group, as a new one would.
TEST_F(DaemonTrustTest, AllowGroupIsAppliedToAnExistingDirectory) {
  group* g = getgrgid(kUsersGid);
  if (g == nullptr) GTEST_SKIP() << "no group with gid 100 to allow";
  const std::string name = g->gr_name;
  const std::string dir = victim_ + "/run";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chown(dir.c_str(), kVictim, kVictim), 0);
  VictimDaemon d(Args({"--socket", dir + "/s.sock", "--allow-group", name}), base_ + "/log",
                 {kUsersGid});
  d.Go();
  ASSERT_TRUE(d.WaitForFile(victim_ + "/port")) << d.Log();
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  EXPECT_EQ(st.st_gid, kUsersGid);
  EXPECT_EQ(ModeOf(dir + "/s.sock"), 0660u);
}

// --socket under a missing directory two levels up: refused naming it, nothing created.
TEST_F(DaemonTrustTest, MissingGrandparentIsRefusedAndNothingIsCreated) {
  const std::string sock = victim_ + "/a/b/s.sock";
  VictimDaemon d(Args({"--socket", sock}), base_ + "/log");
  d.Go();
  EXPECT_EQ(d.WaitExit(20), 1) << d.Log();
  EXPECT_NE(d.Log().find("its parent " + victim_ + "/a does not exist"), std::string::npos)
      << d.Log();
  EXPECT_FALSE(Exists(victim_ + "/a")) << "sentineld created a missing path";
}

// --port-file in a directory the attacker can write, with a link planted at the port file's old
// temporary name: refused before anything is written; the victim's file is untouched.
TEST_F(DaemonTrustTest, PortFileTempLinkIsNeverFollowed) {
  const std::string shared = base_ + "/shared";
  AttackerDir(shared);
  const std::string dir = victim_ + "/run";
  std::vector<std::string> args = Args({"--socket", dir + "/s.sock"});
  args.insert(args.end(), {"--port-file", shared + "/port"});
  VictimDaemon d(args, base_ + "/log");
  ASSERT_GT(d.pid(), 0);
  ASSERT_EQ(ShellAs(kAttacker, kAttacker,
                    "ln -s " + secret_ + " " + shared + "/port.tmp." + std::to_string(d.pid())),
            0);
  d.Go();
  const int code = d.WaitExit(20);
  EXPECT_GT(code, 0) << "sentineld wrote its port file into a directory others can write: "
                     << d.Log();
  EXPECT_NE(d.Log().find("--port-file: " + shared + ": owned by uid 4243"), std::string::npos)
      << d.Log();
  ExpectSecretUntouched();
  EXPECT_FALSE(Exists(shared + "/port"));
}

// In the victim's own directory the port and expectation files are written whole, 0644, through
// temporary names that leave nothing behind.
TEST_F(DaemonTrustTest, FilesInATrustedDirectoryAreWrittenWhole) {
  const std::string dir = victim_ + "/run";
  VictimDaemon d(Args({"--socket", dir + "/s.sock", "--expect", "net=ib"}), base_ + "/log");
  d.Go();
  ASSERT_TRUE(d.WaitForFile(victim_ + "/port")) << d.Log();
  EXPECT_EQ(ModeOf(victim_ + "/port"), 0644u);
  EXPECT_EQ(ModeOf(dir + "/expect"), 0644u);
  EXPECT_NE(ReadAll(dir + "/expect").find("net=ib"), std::string::npos);
  std::string names;
  Shell("ls -A '" + dir + "' '" + victim_ + "' > '" + base_ + "/ls' 2>&1");
  names = ReadAll(base_ + "/ls");
  EXPECT_EQ(names.find(".tmp"), std::string::npos) << names;
}

// A uid churning connections that never say hello must not evict another uid's job while that
// job is in its handshake. The job takes 100 ms between connect and hello (a plugin connecting
// from a busy process); the flood opens thousands of connections in that time.
TEST_F(DaemonTrustTest, HelloLessFloodOfOneUidDoesNotEvictAnotherUidsJob) {
  group* g = getgrgid(kUsersGid);
  if (g == nullptr) GTEST_SKIP() << "no group with gid 100 to allow";
  const std::string run = base_ + "/run";
  const std::string sock = run + "/s.sock";
  const std::string port_file = base_ + "/port";
  // Ready for the group as --allow-group documents it (0750, group users), so that the flood
  // reaches the socket whichever way sentineld treats an existing directory.
  ASSERT_EQ(mkdir(run.c_str(), 0750), 0);
  ASSERT_EQ(chown(run.c_str(), 0, kUsersGid), 0);
  // The daemon runs as root (the job's uid); the flood comes from uid 4243 in --allow-group.
  pid_t daemon = fork();
  ASSERT_GE(daemon, 0);
  if (daemon == 0) {
    execl(SENTINEL_SENTINELD_PATH, SENTINEL_SENTINELD_PATH, "--socket", sock.c_str(), "--listen",
          "127.0.0.1:0", "--port-file", port_file.c_str(), "--allow-group", g->gr_name,
          "--log-level", "error", static_cast<char*>(nullptr));
    _exit(127);
  }
  int port = 0;
  for (int i = 0; i < 400 && port == 0; ++i) {
    std::ifstream in(port_file);
    if (!(in >> port)) port = 0;
    if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(port, 0) << "sentineld did not start";
  // The flood: connect, never write, keep the newest 300 open, for 30 s at most (killed sooner).
  const std::string flood_py =
      "import socket,collections,time\n"
      "q=collections.deque();n=0;end=time.time()+30\n"
      "while time.time()<end:\n"
      " s=socket.socket(socket.AF_UNIX,socket.SOCK_STREAM)\n"
      " try:\n  s.connect('" +
      sock +
      "')\n"
      " except OSError:\n  s.close();continue\n"
      " q.append(s);n+=1\n"
      " if len(q)>300: q.popleft().close()\n";
  const std::string flood_file = base_ + "/flood.py";
  std::ofstream(flood_file) << flood_py;
  std::vector<pid_t> floods;
  for (int i = 0; i < 2; ++i) {
    const pid_t f = fork();
    ASSERT_GE(f, 0);
    if (f == 0) {
      execl("/usr/bin/setpriv", "setpriv", "--reuid=4243", "--regid=100", "--clear-groups", "--",
            "/usr/bin/python3", flood_file.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    floods.push_back(f);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // the flood is under way
  constexpr int kJobs = 20;
  constexpr int kRecords = 20;
  int handshakes = 0;
  for (int j = 0; j < kJobs; ++j) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock.c_str());
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd);
      continue;
    }
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Bytes out = Frame(kSentinelWireHello, MakeHello(static_cast<uint32_t>(5000 + j)));
    bool ok = send(fd, out.data(), out.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(out.size());
    uint8_t ack[24];
    size_t got = 0;
    while (ok && got < sizeof(ack)) {
      const ssize_t n = read(fd, ack + got, sizeof(ack) - got);
      if (n <= 0) ok = false;
      if (n > 0) got += static_cast<size_t>(n);
    }
    if (ok) {
      ++handshakes;
      out.clear();
      const uint64_t comm = 0x7000 + static_cast<uint64_t>(j);
      const auto init = MakeCommInit(comm, 0, 1);
      AppendFrame(&out, kSentinelWireCommInit, &init, sizeof(init));
      for (int r = 1; r <= kRecords; ++r) {
        const auto rec = MakeColl(comm, 0, 1, static_cast<uint64_t>(r), MonoNow(), 1000);
        AppendFrame(&out, kSentinelWireColl, &rec, sizeof(rec));
      }
      (void)!send(fd, out.data(), out.size(), MSG_NOSIGNAL);
    }
    close(fd);
  }
  for (pid_t f : floods) {
    kill(f, SIGKILL);
    waitpid(f, nullptr, 0);
  }
  // Records received, from /metrics (polled: the last job's frames may still be in flight).
  const auto metric = [](const std::string& metrics, const std::string& series) {
    const std::string key = "\n" + series + " ";
    const size_t at = metrics.find(key);
    return at == std::string::npos ? -1.0 : std::atof(metrics.c_str() + at + key.size());
  };
  double received = -1;
  double evicted = -1;
  for (int i = 0; i < 100; ++i) {
    httplib::Client http("127.0.0.1", port);
    http.set_read_timeout(10, 0);
    auto res = http.Get("/metrics");
    const std::string metrics = res ? res->body : std::string();
    received = metric(metrics, "sentinel_records_received_total");
    evicted = metric(metrics, "sentinel_clients_refused_total{reason=\"hello_timeout\"}");
    if (received >= kJobs * kRecords) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(daemon, SIGTERM);
  waitpid(daemon, nullptr, 0);
  // The flood really reached the daemon: thousands of its hello-less connections were closed.
  EXPECT_GE(evicted, 1000) << "the flood did not reach sentineld; the test proves nothing";
  EXPECT_EQ(handshakes, kJobs) << "jobs lost their handshake to another uid's flood";
  EXPECT_EQ(received, kJobs * kRecords) << "records delivered of " << kJobs * kRecords;
  std::printf("handshakes %d/%d, records %.0f/%d, flood connections closed without hello %.0f\n",
              handshakes, kJobs, received, kJobs * kRecords, evicted);
}

}  // namespace
}  // namespace sentinel::testing
