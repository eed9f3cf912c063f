// sentineld's HTTP server under thousands of slow clients (slowloris): /healthz and /metrics are
// still answered while 2,000 connections hold unfinished requests, and the slow connections are
// the ones that give way. The REAL sentineld, loopback only. The 100 ms figure is measured by
// tests/benchmarks/collector/http_slowloris_bench.cc; this test judges with a bound a loaded
// 2-core (or ASan) machine keeps: answered at all, within 2 s.
#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "tests/unit/collector/daemon_fixture.h"
#include "tests/unit/collector/slow_clients.h"

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

}  // namespace
}  // namespace sentinel::testing
