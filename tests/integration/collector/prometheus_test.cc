// A real Prometheus server (Debian's /usr/bin/prometheus) scrapes the real sentineld every
// second; a PromQL query over the scraped data must return the per-rank series.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "tests/integration/collector/daemon_fixture.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::testing {
namespace {

constexpr uint64_t kComm = 0x00000000CAFEF00DULL;

class PrometheusTest : public DaemonFixture {
 protected:
  void TearDown() override {
    if (prom_pid_ > 0) {
      kill(prom_pid_, SIGTERM);
      waitpid(prom_pid_, nullptr, 0);
    }
    DaemonFixture::TearDown();
  }
  pid_t prom_pid_ = -1;
};

TEST_F(PrometheusTest, ScrapesPerRankSeries) {
  const char* prometheus = "/usr/bin/prometheus";
  if (access(prometheus, X_OK) != 0) GTEST_SKIP() << "prometheus not installed";
  Start();
  std::vector<std::unique_ptr<WireClient>> clients;
  for (int r = 0; r < 4; ++r) {
    clients.push_back(std::make_unique<WireClient>());
    ASSERT_TRUE(clients.back()->Connect(socket_, static_cast<uint32_t>(7000 + r)));
    Bytes b = Frame(kSentinelWireCommInit, MakeCommInit(kComm, r, 4));
    for (uint64_t seq = 0; seq < 10; ++seq) {
      const int64_t t = MonoNow() + static_cast<int64_t>(seq) * 1000000;
      const auto rec = MakeColl(kComm, r, 4, seq, t + r * 1000, 500000);
      AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
    }
    ASSERT_TRUE(clients.back()->Send(b));
  }
  const int prom_port = FreePortBelowEphemeral();
  ASSERT_GT(prom_port, 0) << "no free TCP port below the ephemeral range";
  const std::string config = dir_ + "/prometheus.yml";
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                        << "scrape_configs:\n  - job_name: sentineld\n    static_configs:\n"
                        << "      - targets: ['" << Addr() << "']\n";
  prom_pid_ = fork();
  ASSERT_GE(prom_pid_, 0);
  if (prom_pid_ == 0) {
    const std::string cfg = "--config.file=" + config;
    const std::string tsdb = "--storage.tsdb.path=" + dir_ + "/tsdb";
    const std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(prom_port);
    const std::string log = dir_ + "/prometheus.log";
    freopen(log.c_str(), "w", stdout);
    freopen(log.c_str(), "a", stderr);
    execl(prometheus, prometheus, cfg.c_str(), tsdb.c_str(), listen.c_str(), "--log.level=warn",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  nlohmann::json result;
  httplib::Client c("127.0.0.1", prom_port);
  c.set_read_timeout(5, 0);
  for (int i = 0; i < 120; ++i) {
    auto res = c.Get("/api/v1/query?query=sentinel_rank_last_seq%7Bjob%3D%22sentineld%22%7D");
    if (res && res->status == 200) {
      result = nlohmann::json::parse(res->body, nullptr, false);
      if (!result.is_discarded() && result["data"]["result"].size() == 4) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  ASSERT_FALSE(result.is_discarded());
  ASSERT_EQ(result["data"]["result"].size(), 4u) << result.dump();
  std::vector<int> ranks;
  for (const auto& series : result["data"]["result"]) {
    EXPECT_EQ(series["metric"]["comm"], "0x00000000cafef00d");
    EXPECT_EQ(series["value"][1], "9");
    ranks.push_back(std::stoi(series["metric"]["rank"].get<std::string>()));
  }
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace sentinel::testing
