// SENTINEL_POOL_SIZE at the registry's maximum, on the BUILT .so: a communicator's finalize and
// the drainer's grace sweep cost what the job used, not what the pools could hold. Before, both
// scanned every slot of the Coll/P2p pools: ~12 s per finalize at the old maximum of 1,048,576,
// a drainer thread busy for the whole run, and every scanned page faulted in (1.8 GB resident).
// The 100 ms figure is tests/benchmarks/plugin_finalize_benchmark.cc's (also after every slot
// was used once); these bounds hold on a loaded 2-core machine and still tell the two apart.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <fstream>
#include <string>
#include <thread>

#include "common/sentinel_env.h"
#include "tests/common/process_usage.h"
#include "tests/unit/plugin/fake_host.h"

namespace sentinel::testing {
namespace {

TEST(PluginPoolMax, FinalizeAndGraceSweepFollowTheSlotsUsed) {
  const rules::EnvVarSpec* spec = rules::FindEnvVar("SENTINEL_POOL_SIZE");
  ASSERT_NE(spec, nullptr);
  const std::string dump = MakeTempPath("sentinel-pool-max");
  setenv("SENTINEL_DUMP", dump.c_str(), 1);
  setenv("SENTINEL_SOCKET", "none", 1);
  setenv("SENTINEL_EVENTS", "default", 1);
  setenv("SENTINEL_POOL_SIZE", std::to_string(spec->hi).c_str(), 1);
  FakeHost h;
  ASSERT_TRUE(h.ok());
  const long rss0 = ProcStatusKiB(0, "VmRSS");
  const uint64_t comm = 0xB16B00Bull;
  void* ctx = h.InitV5(comm, 2, 0);
  ASSERT_NE(ctx, nullptr);
  for (uint64_t seq = 1; seq <= 200; ++seq) {
    void* coll = h.Coll(ctx, nullptr, 0, seq, "AllReduce", 4, "ncclInt32", 1);
    h.Stop(coll);
    h.KernelChs(ctx, coll, 1, 0, nullptr, nullptr);
  }
  // One collective still waiting for its GPU timers at finalize: emitted then, truncated.
  void* pending = h.Coll(ctx, nullptr, 0, 201, "AllReduce", 4, "ncclInt32", 1);
  h.Stop(pending);
  // The drainer's grace sweep runs at its periodic drains: one second of it on an idle job.
  const int64_t cpu0 = ProcessCpuNs();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const int64_t idle_cpu_ns = ProcessCpuNs() - cpu0;
  const int64_t t0 = plugin::MonoNs();
  h.v5->finalize(ctx);
  const int64_t finalize_ns = plugin::MonoNs() - t0;
  const long rss1 = ProcStatusKiB(0, "VmRSS");
  std::printf("pool %lld: finalize %.2f ms, idle CPU %.0f ms/s, RSS +%ld KiB\n",
              static_cast<long long>(spec->hi), finalize_ns / 1e6, idle_cpu_ns / 1e6, rss1 - rss0);
  EXPECT_LT(finalize_ns, 2000000000) << "finalize scanned the whole pool";
  EXPECT_LT(idle_cpu_ns, 300000000) << "the grace sweep scanned the whole pool";
  // A full scan faults in 5.5 x SENTINEL_POOL_SIZE slots of 320 bytes (115 MiB at 65536).
  EXPECT_LT(rss1 - rss0, 64 * 1024) << "scans faulted in untouched slots";
  h.v5->init(&ctx, comm + 1, &FakeHost::Mask(), nullptr, 1, 1, 0, nullptr);  // flushes the ring
  h.v5->finalize(ctx);
  bool truncated = false;
  for (const auto& r : Records(ReadDump(dump), comm)) {
    if (r.value("seq", 0) == 201) truncated = HasFlag(r, "truncated");
  }
  EXPECT_TRUE(truncated) << "the pending collective was not emitted at finalize";
  unlink(dump.c_str());
}

}  // namespace
}  // namespace sentinel::testing
