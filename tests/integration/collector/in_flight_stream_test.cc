// The plugin's InFlight frames (type 9) on a real sentineld socket: a simulated job hangs
// (kernel-stuck rank) while it streams to the real sentineld, so every rank sends in-flight states
// between its collective records. Until sentineld handles type 9 it must skip it (unknown types
// are skipped by the wire contract): no connection is closed as malformed and every collective
// record of the job arrives. The same states reach the JSONL dump (SENTINEL_DUMP), which shows
// what was streamed.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "gtest/gtest.h"

#include "httplib.h"
#include "tests/integration/fake_nccl/test_util.h"

namespace sentinel::testing {
namespace {

// The value of an unlabelled Prometheus sample ("name value" line), -1 if absent.
double MetricValue(const std::string& text, const std::string& name) {
  size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::atof(text.c_str() + at + name.size() + 2);
}

TEST(InFlightStream, SentinelDSkipsInFlightFramesAndKeepsEveryRecord) {
  if (std::string(SENTINEL_SIM_PATH).empty()) GTEST_SKIP() << "sentinel-sim is not built";
  std::string dir = MakeTempDir();
  std::string socket = dir + "/s.sock";
  std::string port_file = dir + "/port";
  Started daemon = StartProgram({SENTINEL_SENTINELD_PATH, "--socket", socket, "--listen",
                                 "127.0.0.1:0", "--port-file", port_file},
                                {}, 120);
  int port = 0;
  for (int i = 0; i < 200 && port == 0; ++i) {
    port = std::atoi(ReadFile(port_file).c_str());
    if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(port, 0);

  constexpr int kRanks = 4;
  constexpr int kHangStep = 3;
  RunResult sim = RunProgram(
      {SENTINEL_SIM_PATH, "--ranks", std::to_string(kRanks), "--steps", "20", "--compute-ms", "2",
       "--bytes", "64K", "--hang", "rank=1,at=" + std::to_string(kHangStep) + ",kind=kernel-stuck",
       "--timeout-s", "3", "--plugin", SENTINEL_PLUGIN_PATH, "--quiet"},
      // A fixed stuck threshold: the adaptive one would follow a rank preempted in the first
      // steps past the job's 3 s hang (it has its own tests in in_flight_test).
      {{"SENTINEL_SOCKET", socket},
       {"SENTINEL_DUMP", dir + "/dump.%p.jsonl"},
       {"SENTINEL_INFLIGHT_STUCK_MS", "300"}},
      60);
  EXPECT_EQ(sim.exit_code, 3) << sim.output;

  // The dumps show the states the drainer sent to both sinks: several per rank, stuck ones too.
  int states = 0;
  int stuck = 0;
  for (const std::string& name : Lines(RunProgram({"/bin/ls", dir}, {}).output)) {
    if (name.rfind("dump.", 0) != 0) continue;
    for (const std::string& line : Lines(ReadFile(dir + "/" + name))) {
      if (JsonField(line, "type") != "in_flight") continue;
      ++states;
      if (line.find("\"stuck\"") != std::string::npos) ++stuck;
    }
  }
  EXPECT_GE(states, 2 * kRanks);
  EXPECT_GE(stuck, kRanks);

  // sentineld took the streams whole: no malformed frame, every completed collective received.
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(5, 0);
  std::string metrics;
  double received = 0;
  for (int i = 0; i < 100; ++i) {
    auto res = cli.Get("/metrics");
    if (res && res->status == 200) {
      metrics = res->body;
      received = MetricValue(metrics, "sentinel_records_received_total");
      if (received >= kRanks * kHangStep) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(received, kRanks * kHangStep) << metrics;
  EXPECT_EQ(MetricValue(metrics, "sentinel_malformed_frames_total"), 0) << metrics;

  kill(daemon.pid, SIGTERM);
  WaitProgram(daemon);
  RunProgram({"/bin/rm", "-rf", dir}, {});
}

}  // namespace
}  // namespace sentinel::testing
