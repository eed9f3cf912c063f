// Plugin connections on a node shared by several users, against the REAL sentineld (root, with
// --allow-group) and clients of two real uids (cross_uid_util.h: 4242 the victim, 4243 the
// other user): one uid's idle connections leave the other's job streaming; under a 1,024
// open-file limit /healthz answers while peers hold every connection they may; a job that is
// refused hears why on its stderr, once; a uid's own flood of hello-less connections does not
// push out its job's connection; a bad hello is logged with what was wrong. Skips unless root.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "plugin/transport/collector_sink.h"
#include "tests/integration/collector/cross_uid_util.h"
#include "tests/integration/collector/daemon_fixture.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::testing {
namespace {

constexpr uint64_t kJobComm = 0x7E0A000000000001ULL;
constexpr int kJobRecords = 1600;

// Drops this (forked) process to `uid` and `gid` with room for `fds` open files.
bool BecomeUser(uid_t uid, gid_t gid, rlim_t fds) {
  const rlimit lim{fds, fds};
  return setrlimit(RLIMIT_NOFILE, &lim) == 0 && setgroups(0, nullptr) == 0 &&
         setresgid(gid, gid, gid) == 0 && setresuid(uid, uid, uid) == 0;
}

int ConnectBlocking(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// In a child process of its own as `uid`: up to `tries` connections that each say hello, the
// accepted ones kept open until the holder is destroyed. accepted() is how many sentineld took.
class HelloHolder {
 public:
  HelloHolder(const std::string& path, uid_t uid, gid_t gid, int tries) {
    int report[2];
    int hold[2];
    if (pipe2(report, O_CLOEXEC) != 0 || pipe2(hold, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(report[0]);
      close(hold[1]);
      if (!BecomeUser(uid, gid, static_cast<rlim_t>(tries) + 64)) _exit(2);
      std::vector<int> kept;
      for (int i = 0; i < tries; ++i) {
        const int fd = ConnectBlocking(path);
        if (fd < 0) continue;
        timeval tv{5, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        const Bytes hello = Frame(kSentinelWireHello, MakeHello(static_cast<uint32_t>(i + 1)));
        uint8_t reply[24] = {};
        size_t got = 0;
        if (send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(hello.size())) {
          while (got < sizeof(reply)) {
            const ssize_t n = read(fd, reply + got, sizeof(reply) - got);
            if (n <= 0) break;
            got += static_cast<size_t>(n);
          }
        }
        SentinelWireFrameHeader h{};
        SentinelWireHelloAck ack{};
        std::memcpy(&h, reply, sizeof(h));
        std::memcpy(&ack, reply + sizeof(h), sizeof(ack));
        if (got == sizeof(reply) && h.type == kSentinelWireHelloAck &&
            ack.status == kSentinelHelloAccepted) {
          kept.push_back(fd);
        } else {
          close(fd);
        }
      }
      const int n = static_cast<int>(kept.size());
      (void)!write(report[1], &n, sizeof(n));
      char b;
      (void)!read(hold[0], &b, 1);  // until the parent lets go
      _exit(0);
    }
    close(report[1]);
    close(hold[0]);
    hold_fd_ = hold[1];
    if (pid_ < 0 || read(report[0], &accepted_, sizeof(accepted_)) != sizeof(accepted_)) {
      accepted_ = -1;
    }
    close(report[0]);
  }
  ~HelloHolder() {
    if (hold_fd_ >= 0) close(hold_fd_);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }
  HelloHolder(const HelloHolder&) = delete;
  HelloHolder& operator=(const HelloHolder&) = delete;
  int accepted() const { return accepted_; }

 private:
  pid_t pid_ = -1;
  int hold_fd_ = -1;
  int accepted_ = -1;
};

// In a child process of its own as `uid`: connections that never say hello, opened as fast as
// sentineld takes them, each kept until sentineld closes it, until Stop().
class HelloLessFlood {
 public:
  HelloLessFlood(const std::string& path, uid_t uid, gid_t gid) {
    int stop[2];
    if (pipe2(stop, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(stop[1]);
      if (!BecomeUser(uid, gid, 1024)) _exit(2);
      std::vector<int> open_fds;
      pollfd pfd{stop[0], POLLIN, 0};
      while (poll(&pfd, 1, 0) == 0) {
        if (open_fds.size() < 900) {
          const int fd = ConnectBlocking(path);
          if (fd >= 0) open_fds.push_back(fd);
          continue;
        }
        // Full: let go of the connections sentineld closed, then open more.
        size_t kept = 0;
        for (const int fd : open_fds) {
          char b;
          if (recv(fd, &b, 1, MSG_DONTWAIT | MSG_PEEK) == 0) {
            close(fd);
          } else {
            open_fds[kept++] = fd;
          }
        }
        if (kept == open_fds.size()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        open_fds.resize(kept);
      }
      _exit(0);
    }
    close(stop[0]);
    stop_fd_ = stop[1];
  }
  ~HelloLessFlood() { Stop(); }
  HelloLessFlood(const HelloLessFlood&) = delete;
  HelloLessFlood& operator=(const HelloLessFlood&) = delete;
  void Stop() {
    if (stop_fd_ >= 0) close(stop_fd_);
    stop_fd_ = -1;
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int stop_fd_ = -1;
};

class TenantConnectionsTest : public DaemonFixture {
 protected:
  void SetUp() override { SetUpForOtherUsers("to connect clients as uids 4242 and 4243"); }
  // Start() with --allow-group, the daemon's stderr in log_ (--log-level info).
  void StartLogged(std::vector<std::string> extra = {}) {
    log_ = dir_ + "/sentineld.log";
    std::vector<std::string> args = {SENTINELD_PATH, "--socket",    socket_,    "--listen",
                                     "127.0.0.1:0",  "--port-file", port_file_, "--tick",
                                     "100ms",        "--log-level", "info",     "--allow-group",
                                     group_};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = SpawnProgram(std::move(args), max_fds_, log_);
    ASSERT_GE(pid_, 0);
    port_ = WaitForPortFile(port_file_);
    ASSERT_GT(port_, 0) << "sentineld did not write its port file:\n" << ReadAll(log_);
  }
  // The victim's job: one rank that says hello, joins kJobComm and streams kJobRecords
  // collectives; false when sentineld did not take its hello.
  // `hello_after`: how long after connecting its hello comes (a plugin thread that a loaded host
  // did not run at once).
  bool StreamVictimJob(std::chrono::milliseconds hello_after = std::chrono::milliseconds(0)) {
    job_ = std::make_unique<WireClient>();
    job_->ConnectAsOwnProcess(static_cast<int>(kVictim), gid_);
    if (hello_after.count() > 0) {
      const int fd = ConnectFromChild(socket_, static_cast<int>(kVictim), gid_);
      if (fd < 0) return false;
      std::this_thread::sleep_for(hello_after);
      const Bytes hello = Frame(kSentinelWireHello, MakeHello(3000));
      uint8_t reply[24] = {};
      size_t got = 0;
      if (send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(hello.size())) {
        timeval tv{5, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        while (got < sizeof(reply)) {
          const ssize_t n = read(fd, reply + got, sizeof(reply) - got);
          if (n <= 0) break;
          got += static_cast<size_t>(n);
        }
      }
      SentinelWireFrameHeader h{};
      std::memcpy(&h, reply, sizeof(h));
      raw_job_fd_ = fd;
      if (got != sizeof(reply) || h.type != kSentinelWireHelloAck) return false;
      return SendJobFrames([fd](const Bytes& b) {
        return send(fd, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
      });
    }
    if (!job_->Connect(socket_, 3000)) return false;
    return SendJobFrames([this](const Bytes& b) { return job_->Send(b); });
  }
  template <typename SendFn>
  static bool SendJobFrames(SendFn send_bytes) {
    if (!send_bytes(Frame(kSentinelWireCommInit, MakeCommInit(kJobComm, 0, 1)))) return false;
    const int64_t base = MonoNow() - 60LL * 1000 * 1000000;
    Bytes b;
    for (int i = 0; i < kJobRecords; ++i) {
      const auto rec = MakeColl(kJobComm, 0, 1, static_cast<uint64_t>(i),
                                base + static_cast<int64_t>(i) * 1000000, 500000);
      AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
    }
    return send_bytes(b);
  }
  // Records sentineld took in all, as /healthz counts them, once they stop growing short of
  // `want` (or reach it).
  int64_t RecordsReaching(int64_t want) {
    int64_t records = -1;
    for (int i = 0; i < 200; ++i) {
      const nlohmann::json h = GetJson("/healthz");
      records = h.is_discarded() ? -1 : h.value("records", int64_t{-1});
      if (records >= want) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return records;
  }

  // A job's process as the plugin runs it: a CollectorSink (its 200 ms wait for the ack, a short
  // backoff) in a child process of `kVictim` with stderr in dir_/job.err, polling for `seconds`,
  // then writing "refusals connects" to dir_/job.out. Returns the child's wait status.
  int RunSinkJob(double seconds) {
    const std::string err = dir_ + "/job.err";
    const std::string out = dir_ + "/job.out";
    const pid_t child = fork();
    if (child == 0) {
      const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (e < 0 || o < 0 || dup2(e, 2) < 0) _exit(2);
      if (!BecomeUser(kVictim, static_cast<gid_t>(gid_), 256)) _exit(3);
      plugin::CollectorSinkOptions options;
      options.socket_path = socket_.c_str();
      options.backoff_min_ns = 20'000'000;
      options.backoff_max_ns = 40'000'000;
      plugin::CollectorSink sink(options);
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
      while (std::chrono::steady_clock::now() < until) {
        sink.Poll();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      const plugin::CollectorSinkStats s = sink.Stats();
      const std::string line = std::to_string(s.refusals) + " " + std::to_string(s.connects) + "\n";
      (void)!write(o, line.data(), line.size());
      _exit(0);
    }
    if (child < 0) return -1;
    int status = 0;
    if (waitpid(child, &status, 0) != child) return -1;
    return status;
  }

  void TearDown() override {
    if (raw_job_fd_ >= 0) close(raw_job_fd_);
    DaemonFixture::TearDown();
  }

  std::string log_;
  std::unique_ptr<WireClient> job_;
  int raw_job_fd_ = -1;
};

// Another user holding 1,024 idle connections that said hello: before, every slot of
// --max-clients 1024 was theirs and the victim's job was refused as too_many; now a uid holds at
// most half, and the job streams every record.
TEST_F(TenantConnectionsTest, AnotherUsersIdleConnectionsLeaveTheJobStreaming) {
  max_fds_ = 8192;  // the descriptors are not the bound here: --max-clients is
  StartLogged({"--max-clients", "1024"});
  HelloHolder other(socket_, kAttacker, static_cast<gid_t>(gid_), 1024);
  ASSERT_GT(other.accepted(), 0) << ReadAll(log_);
  EXPECT_LE(other.accepted(), 512) << "one uid holds more than half of --max-clients";
  ASSERT_TRUE(StreamVictimJob()) << "the victim's job was refused:\n" << ReadAll(log_);
  EXPECT_EQ(RecordsReaching(kJobRecords), kJobRecords);
}

// A full table shared by two uids at their share (half each): a third uid below its fair share
// takes the idlest slot of a uid holding the most, and its job streams.
TEST_F(TenantConnectionsTest, FullTableGivesAUidBelowItsFairShareASlot) {
  StartLogged({"--max-clients", "8"});
  HelloHolder root_jobs(socket_, 0, static_cast<gid_t>(gid_), 4);
  HelloHolder other(socket_, kAttacker, static_cast<gid_t>(gid_), 4);
  ASSERT_EQ(root_jobs.accepted(), 4);
  ASSERT_EQ(other.accepted(), 4);
  ASSERT_TRUE(StreamVictimJob()) << "refused behind a full table:\n" << ReadAll(log_);
  EXPECT_EQ(RecordsReaching(kJobRecords), kJobRecords);
  EXPECT_NE(ReadAll(log_).find("(fair share 2)"), std::string::npos) << ReadAll(log_);
}

// A 1,024 open-file limit: before, a peer's connections took every descriptor and /healthz timed
// out. Now --max-clients is clamped to what the HTTP server's share and our own files leave
// (logged), and /healthz answers while two users hold every connection they may.
TEST_F(TenantConnectionsTest, HealthzAnswersUnderTheOpenFileLimit) {
  max_fds_ = 1024;
  StartLogged();
  HelloHolder other(socket_, kAttacker, static_cast<gid_t>(gid_), 1024);
  HelloHolder victim(socket_, kVictim, static_cast<gid_t>(gid_), 1024);
  for (int i = 0; i < 3; ++i) {
    std::string body;
    EXPECT_EQ(Get("/healthz", &body), 200) << "try " << i;
  }
  EXPECT_GT(other.accepted(), 0);
  EXPECT_GT(victim.accepted(), 0) << "one user took every connection";
  EXPECT_LE(other.accepted() + victim.accepted(), 1024 - 512 - 64)
      << "more plugin connections than the descriptors leave";
  EXPECT_NE(ReadAll(log_).find("plugin connections: at most 448, not --max-clients 1024, 224 per "
                               "uid (open-file limit 1024: 512 for HTTP connections, 64 for "
                               "sentineld's own files"),
            std::string::npos)
      << ReadAll(log_);
}

// A process of the victim's uid opening connection after connection that never say hello, while
// the victim's job connects (its hello comes a little later, from another process): before, the
// flood pushed the job's connection out before its hello (0 of 1,600 records); now a flood only
// evicts the connections of the process holding the most.
TEST_F(TenantConnectionsTest, SameUidFloodOfHelloLessConnectionsLeavesItsJob) {
  max_fds_ = 8192;
  StartLogged();
  HelloLessFlood flood(socket_, kVictim, static_cast<gid_t>(gid_));
  // The flood at its bound: sentineld closes its hello-less connections to make room.
  for (int i = 0; i < 400 && ReadAll(log_).find("slot needed, no hello yet") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(ReadAll(log_).find("slot needed, no hello yet"), std::string::npos)
      << "the flood never reached its bound: the test would prove nothing\n"
      << ReadAll(log_);
  ASSERT_TRUE(StreamVictimJob(std::chrono::milliseconds(300)))
      << "the job's connection was pushed out before its hello";
  EXPECT_EQ(RecordsReaching(kJobRecords), kJobRecords);
}

// A job whose uid holds its share: its plugin's stderr says once why sentineld refused it, with
// the reason in the plugin's words, however many times it retries.
TEST_F(TenantConnectionsTest, RefusedJobIsToldOnceOnItsStderr) {
  StartLogged({"--max-clients", "4"});
  HelloHolder mine(socket_, kVictim, static_cast<gid_t>(gid_), 2);
  ASSERT_EQ(mine.accepted(), 2);
  ASSERT_EQ(RunSinkJob(1.5), 0);
  const std::string out = ReadAll(dir_ + "/job.out");
  const std::string err = dir_ + "/job.err";
  int refusals = 0;
  int connects = 0;
  std::istringstream(out) >> refusals >> connects;
  EXPECT_GE(refusals, 2) << "the plugin did not retry, or never heard a reason";
  EXPECT_EQ(connects, 0);
  const std::string text = ReadAll(err);
  size_t lines = 0;
  for (size_t at = text.find("refused this process's connection"); at != std::string::npos;
       at = text.find("refused this process's connection", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << text;
  EXPECT_NE(text.find("your uid holds its share of the plugin connections (2 of 2)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("[sentinel "), std::string::npos) << text;
}

// A first frame that is not a hello: the log says what was wrong, not "bad_hello (none)".
TEST_F(TenantConnectionsTest, BadHelloIsLoggedWithWhatWasWrong) {
  StartLogged();
  const int fd = ConnectUnix(socket_);
  ASSERT_GE(fd, 0);
  const auto rec = MakeColl(kJobComm, 0, 1, 1, MonoNow(), 1000);
  const Bytes b = Frame(kSentinelWireColl, rec);
  ASSERT_EQ(send(fd, b.data(), b.size(), MSG_NOSIGNAL), static_cast<ssize_t>(b.size()));
  std::string log;
  for (int i = 0; i < 100 && log.find("bad_hello") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    log = ReadAll(log_);
  }
  close(fd);
  EXPECT_NE(log.find("bad_hello (the first frame is of type 3, not a hello)"), std::string::npos)
      << log;
  EXPECT_EQ(log.find("bad_hello (none)"), std::string::npos) << log;
}

}  // namespace
}  // namespace sentinel::testing
