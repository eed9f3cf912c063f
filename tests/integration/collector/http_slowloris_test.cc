// sentineld's HTTP server under thousands of slow clients (slowloris): /healthz and /metrics are
// still answered while 2,000 connections hold unfinished requests, and the slow connections are
// the ones that give way. The REAL sentineld, loopback only. The 100 ms figure is measured by
// tests/benchmarks/collector/http_slowloris_bench.cc; this test judges with a bound a loaded
// 2-core (or ASan) machine keeps: answered at all, within 2 s.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "tests/integration/collector/daemon_fixture.h"
#include "tests/integration/collector/slow_clients.h"

namespace sentinel::testing {
namespace {

constexpr int kSlowClients = 2000;
constexpr int kBoundMs = 2000;

class HttpSlowlorisTest : public DaemonFixture {};

TEST_F(HttpSlowlorisTest, HealthzAnsweredUnderTwoThousandSlowClients) {
  if (RaiseFdLimit() < static_cast<rlim_t>(kSlowClients + 256)) {
    GTEST_SKIP() << "this process may not open " << kSlowClients << " sockets (RLIMIT_NOFILE)";
  }
  // The slow clients must not be cut off by the deadline during the test.
  Start({"--http-timeout", "60s"});
  std::vector<int> slow = OpenSlowClients(port_, kSlowClients);
  // Each one connected (the server did not stop accepting) and none was closed yet.
  EXPECT_EQ(slow.size(), static_cast<size_t>(kSlowClients));
  for (int i = 0; i < 5; ++i) {
    for (const char* path : {"/healthz", "/metrics"}) {
      int64_t ns = 0;
      std::string reply;
      const int status = TimedGet(port_, path, kBoundMs, &ns, &reply);
      EXPECT_EQ(status, 200) << path << " under " << kSlowClients << " slow clients, after "
                             << ns / 1000000 << " ms: '" << reply.substr(0, 120) << "'";
      EXPECT_LT(ns, int64_t{kBoundMs} * 1000000) << path;
    }
  }
  // More slow clients than the server keeps: the oldest give way, the newest requests are served.
  std::vector<int> more = OpenSlowClients(port_, kSlowClients);
  int64_t ns = 0;
  EXPECT_EQ(TimedGet(port_, "/healthz", kBoundMs, &ns), 200) << "after " << 2 * kSlowClients;
  EXPECT_EQ(more.size(), static_cast<size_t>(kSlowClients)) << "the server stopped accepting";
  int open = kSlowClients;
  for (int i = 0; i < 100 && (open = CountOpen(slow)) == kSlowClients; ++i) usleep(50000);
  EXPECT_LT(open, kSlowClients) << "none of the oldest slow clients was closed";
  for (int fd : slow) close(fd);
  for (int fd : more) close(fd);
}

// libmicrohttpd's own messages (at --log-level debug) come one per bad request: a client sending
// bad requests in a loop must not flood the log. At most 20 a second are written, the rest
// counted in the next line written.
TEST(HttpServerLog, LibmicrohttpdMessagesAreRateLimited) {
  char tmpl[] = "/tmp/snd-log-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string log = dir + "/log";
  const std::string port_file = dir + "/port";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(SENTINELD_PATH, SENTINELD_PATH, "--socket", (dir + "/s.sock").c_str(), "--listen",
          "127.0.0.1:0", "--port-file", port_file.c_str(), "--log-level", "debug",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int port = 0;
  for (int i = 0; i < 200 && port == 0; ++i) {
    std::ifstream in(port_file);
    if (!(in >> port)) port = 0;
    if (port == 0) usleep(50000);
  }
  ASSERT_GT(port, 0);
  auto bad_request = [port] {
    const int fd = LoopbackConnect(port);
    if (fd < 0) return;
    const char req[] = "GET / HTTP/9.\x1b[2J\r\n\r\n";
    (void)!send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL);
    char b[512];
    while (recv(fd, b, sizeof(b), 0) > 0) {
    }
    close(fd);
  };
  for (int i = 0; i < 200; ++i) bad_request();
  usleep(1100000);
  bad_request();  // a new second: written, with the count of those suppressed
  usleep(300000);
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  std::ifstream in(log);
  std::string line;
  int lines = 0;
  bool counted = false;
  while (std::getline(in, line)) {
    if (line.find("http: Error processing request") == std::string::npos) continue;
    ++lines;
    counted = counted || line.find("more messages suppressed") != std::string::npos;
  }
  EXPECT_GT(lines, 0) << "no libmicrohttpd message at all: the test saw nothing";
  // 201 bad requests within a few seconds: a few windows of 20 at most, not one line each.
  EXPECT_LT(lines, 120) << lines << " lines for 201 bad requests";
  EXPECT_TRUE(counted) << "the suppressed messages were not counted";
  RunCommand("rm -rf " + dir);
}

}  // namespace
}  // namespace sentinel::testing
