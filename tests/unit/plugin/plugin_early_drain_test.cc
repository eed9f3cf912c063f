// On the BUILT .so: a thread that completes collectives faster than its ring holds for one drain
// period wakes the drainer early (a quarter of the ring), so nothing is dropped although the
// period (SENTINEL_DRAIN_INTERVAL_MS, here its maximum, 1 s) is far longer than the ring lasts.
// Before, the drainer slept its whole period and the ring's overflow was dropped (about 40,000
// collectives a second was the most a thread could complete without loss at the defaults).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "tests/unit/plugin/fake_host.h"

namespace sentinel::testing {
namespace {

TEST(PluginEarlyDrain, AFastThreadLosesNothingToALongDrainPeriod) {
  const std::string dump = MakeTempPath("sentinel-early-drain");
  setenv("SENTINEL_DUMP", dump.c_str(), 1);
  setenv("SENTINEL_SOCKET", "none", 1);
  setenv("SENTINEL_EVENTS", "default", 1);
  setenv("SENTINEL_BUDGET", "0", 1);
  setenv("SENTINEL_RING_RECORDS", "256", 1);
  setenv("SENTINEL_DRAIN_INTERVAL_MS", "1000", 1);
  FakeHost h;
  ASSERT_TRUE(h.ok());
  const uint64_t comm = 0xEA51D2A1ull;
  void* ctx = h.InitV5(comm, 2, 0);
  ASSERT_NE(ctx, nullptr);
  // 400 collectives in bursts of 16, 20 ms apart: about half a second, so the periodic drain
  // (1 s after init) comes after the ring (256) would have overflowed. A drainer woken at 64
  // records has (256 - 64) / 16 bursts = 240 ms to run.
  constexpr int kBursts = 25, kPerBurst = 16;
  const int64_t t0 = plugin::MonoNs();
  uint64_t seq = 1;
  for (int b = 0; b < kBursts; ++b) {
    for (int i = 0; i < kPerBurst; ++i, ++seq) {
      void* coll = h.Coll(ctx, nullptr, 0, seq, "AllReduce", 4, "ncclInt32", 1);
      h.Stop(coll);
      h.KernelChs(ctx, coll, 1, 0, nullptr, nullptr);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const int64_t took_ns = plugin::MonoNs() - t0;
  h.v5->finalize(ctx);  // the last drain, and a heartbeat with the drop counters
  const auto all = ReadDump(dump);
  const nlohmann::json hb = LastHeartbeat(all);
  std::printf("%d collectives in %.0f ms\n", kBursts * kPerBurst, took_ns / 1e6);
  ASSERT_FALSE(hb.is_null());
  EXPECT_EQ(hb.value("records_dropped_ring", uint64_t{99}), 0u);
  EXPECT_EQ(Records(all, comm).size(), static_cast<size_t>(kBursts * kPerBurst));
  unlink(dump.c_str());
}

}  // namespace
}  // namespace sentinel::testing
