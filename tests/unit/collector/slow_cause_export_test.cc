// The "why a collective is slow" exports: the /metrics families (bounded per communicator), the
// /v1/telemetry "slow_windows" section (valid against schemas/api/telemetry.schema.json) and the
// `sentinelctl slow` table, from spans made by the real SlowCause; hostile names are escaped.
#include "collector/export/slow_cause_export.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "collector/aggregate/api_snapshot.h"
#include "collector/aggregate/slow_cause.h"
#include "collector/aggregate/stats.h"
#include "collector/ctl_slow.h"
#include "collector/export/api_json.h"

namespace sentinel::collector {
namespace {

constexpr int64_t kMs = 1000000;
constexpr int64_t kS = 1000000000;

struct Port {
  NicState state;
  NicPortReading reading;
  explicit Port(const std::string& device) {
    state.enabled = true;
    reading.device = device;
    reading.port = 1;
    reading.active = true;
    reading.present = (1u << kNicPortXmitWait) | (1u << kNicSymbolError);
  }
  void Poll(int64_t t) { UpdateNicState(&state, {reading}, t); }
};

// Communicator `comm` of 4 local ranks and 4 on another node: 40 usual windows (2 ms), then 5
// with rank 2 late 6 ms, then 5 with a 3 ms transfer while port_xmit_wait climbs. Settled.
void RunComm(SlowCause* sc, Port* nic, uint64_t comm) {
  uint64_t seq = 1;
  auto window = [&](int64_t t, int64_t transfer, int64_t late2) {
    std::vector<WindowRank> rs = {{0, t}, {1, t + 10000}, {2, t + late2}, {3, t}};
    WindowObservation w;
    w.comm_hash = comm;
    w.nranks = 8;  // the NIC carries its transfers
    w.local_ranks = 4;
    w.func = 2;
    w.bucket = SizeBucket(1 << 20);
    w.seq = seq++;
    w.min_arrival_ns = t;
    w.max_arrival_ns = t + std::max<int64_t>(late2, 10000);
    w.max_end_ns = w.max_arrival_ns + transfer;
    w.ranks = rs.data();
    w.nranks_seen = rs.size();
    sc->OnWindow(w, &nic->state);
  };
  int64_t t = kS;
  nic->Poll(t - 50 * kMs);
  for (int i = 0; i < 40; ++i, t += 10 * kMs) {
    window(t, 2 * kMs + (i % 2) * 5000, 0);
    if (i % 5 == 4) {  // 8 polls: a usual rate and its spread
      nic->reading.value[kNicPortXmitWait] += 50;
      nic->Poll(t + 5 * kMs);
    }
  }
  for (int i = 0; i < 5; ++i, t += 10 * kMs) window(t, 2 * kMs, 6 * kMs);
  nic->reading.value[kNicPortXmitWait] += 100;
  nic->Poll(t);
  sc->Settle(nic->state, t + 2 * kS);
  t += 3 * kS;                                  // a separate span
  nic->reading.value[kNicPortXmitWait] += 300;  // its usual pace meanwhile
  nic->Poll(t - 5 * kMs);
  for (int i = 0; i < 5; ++i, t += 10 * kMs) window(t, 3 * kMs, 0);
  nic->reading.value[kNicPortXmitWait] += 5000;
  nic->Poll(t);
  sc->Settle(nic->state, t + 2 * kS);
}

TEST(SlowCauseExportTest, MetricsArePerCommunicatorAndNameTheLastCause) {
  SlowCause sc;
  Port nic("mlx5_0");
  RunComm(&sc, &nic, 0x11);
  RunComm(&sc, &nic, 0x22);
  const SlowCauseSnapshot snap = sc.Snapshot();
  const std::string text = SlowCausePrometheusText(snap, {0x11});  // 0x22 over the series budget
  EXPECT_NE(text.find("# TYPE sentinel_comm_slow_seconds_total counter"), std::string::npos);
  EXPECT_NE(text.find("sentinel_comm_slow_seconds_total{comm=\"0x0000000000000011\",uid=\"0\","
                      "cause=\"late_rank\"} 0.0299"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sentinel_comm_slow_windows_total{comm=\"0x0000000000000011\",uid=\"0\","
                      "cause=\"network\"} 5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sentinel_comm_slow_windows_total{comm=\"0x0000000000000011\",uid=\"0\","
                      "cause=\"late_rank\"} 5\n"),
            std::string::npos);
  EXPECT_NE(
      text.find(
          "sentinel_comm_slow_last_info{comm=\"0x0000000000000011\",uid=\"0\",cause=\"network\","
          "late_rank=\"\",nic=\"mlx5_0:1\"} 1\n"),
      std::string::npos)
      << text;
  EXPECT_EQ(text.find("0x0000000000000022"), std::string::npos);
  // Bounded: 3 causes x 2 counters + 1 info line per communicator, whatever the collectives.
  size_t samples = 0;
  for (size_t p = 0; (p = text.find("\nsentinel_comm_slow", p)) != std::string::npos; ++p) {
    ++samples;
  }
  EXPECT_EQ(samples, 7u);
}

TEST(SlowCauseExportTest, TelemetryIsSchemaValidAndSentinelctlPrintsTheVerdicts) {
  SlowCause sc;
  Port nic("mlx5_0");
  RunComm(&sc, &nic, 0x11);
  TelemetrySnapshot snap;
  snap.host = "node-a";
  snap.window_ns = 900 * kS;
  snap.since_mono_ns = 0;
  snap.slow = sc.Snapshot();
  const nlohmann::json t = TelemetryJson(snap);
  const nlohmann::json& spans = t["slow_windows"]["spans"];
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0]["cause"], "network");  // newest first
  EXPECT_EQ(spans[1]["cause"], "late_rank");
  EXPECT_EQ(spans[1]["late_ranks"][0]["rank"], 2);
  EXPECT_EQ(t["slow_windows"]["by_comm"][0]["windows"], 10);

  const std::string path = ::testing::TempDir() + "/slow_telemetry.json";
  std::ofstream(path) << t.dump();
  const std::string cmd =
      std::string("python3 ") + VALIDATOR_PATH + " " + SCHEMA_DIR + " telemetry=" + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  const int status = pclose(p);
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << out;
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;

  const std::string table = ctl::SlowTable(t);
  EXPECT_NE(table.find("network (mlx5_0 port 1: port_xmit_wait +"), std::string::npos) << table;
  EXPECT_NE(table.find("late rank 2 ("), std::string::npos) << table;
  EXPECT_NE(table.find("EXCESS BY CAUSE"), std::string::npos) << table;
  // A window that starts after the spans lists none of them (the telemetry window).
  EXPECT_TRUE(SlowWindowsJson(snap.slow, 1000 * kS)["spans"].empty());
  EXPECT_EQ(ctl::SlowTable(nlohmann::json::object()), "no slow collectives in the window\n");
}

TEST(SlowCauseExportTest, HostileNamesAreEscapedInTheVerdictTheTableAndTheLabel) {
  SlowCause sc;
  Port nic("mlx5\x1b[31m\"\n");
  RunComm(&sc, &nic, 0x11);
  const SlowCauseSnapshot snap = sc.Snapshot();
  ASSERT_TRUE(snap.comms[0].has_last);
  const std::string verdict = SlowSpanVerdict(snap.comms[0].last);
  EXPECT_EQ(verdict.find('\x1b'), std::string::npos) << verdict;
  EXPECT_NE(verdict.find("mlx5\\x1b[31m\"\\x0a port 1"), std::string::npos) << verdict;
  TelemetrySnapshot t;
  t.slow = snap;
  const std::string table = ctl::SlowTable(TelemetryJson(t));
  EXPECT_EQ(table.find('\x1b'), std::string::npos) << table;
  const std::string text = SlowCausePrometheusText(snap, {0x11});
  EXPECT_NE(text.find("nic=\"mlx5\x1b[31m\\\"\\n:1\"}"), std::string::npos) << text;
}

}  // namespace
}  // namespace sentinel::collector
