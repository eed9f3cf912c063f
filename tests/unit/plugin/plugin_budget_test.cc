// The overhead budget through the BUILT .so: with a tiny SENTINEL_BUDGET the plugin steps down
// (proxy events off in NCCL's mask, then KernelCh on 1 of 8 collectives, then 1 record in 8),
// says so in its log and in every heartbeat, and marks what it skipped or sampled.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/unit/plugin/fake_host.h"

namespace sentinel::testing {
namespace {

constexpr int64_t kGpuSkew = 7'000'000'000'000;

struct BudgetEnv {
  std::string dump = MakeTempPath("sentinel-budget");
  std::string log = MakeTempPath("sentinel-budget-log");
  BudgetEnv() {
    setenv("SENTINEL_DUMP", dump.c_str(), 1);
    setenv("SENTINEL_EVENTS", "proxy", 1);    // default (Coll, KernelCh...) | ProxyOp | ProxyStep
    setenv("SENTINEL_BUDGET", "0.00001", 1);  // 0.1 us of plugin time per second
    setenv("SENTINEL_PROXY_GRACE_MS", "20", 1);
    // The plugin logs to stderr when NCCL gives no logger: keep it in a file to read back.
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
  }
};

int MaxBudgetLevel(const std::vector<nlohmann::json>& all, bool* monotone) {
  int level = 0;
  *monotone = true;
  for (const auto& j : all) {
    if (j.value("type", "") != "heartbeat") continue;
    int l = j.value("budget_level", -1);
    if (l < level) *monotone = false;
    if (l > level) level = l;
  }
  return level;
}

TEST(OverheadBudget, TinyBudgetStepsDownAndSaysSo) {
  static BudgetEnv setup;
  FakeHost host;
  ASSERT_TRUE(host.ok());
  const uint64_t comm = 0xB0D6E7ull;
  void* ctx = host.InitV5(comm, 8, 0);
  ASSERT_NE(FakeHost::Mask() & kSentinelProfileProxyOp, 0);
  ASSERT_NE(FakeHost::Mask() & kSentinelProfileKernelCh, 0);

  // Collectives (Coll, a ProxyOp while the mask still asks for it, 2 KernelCh) until the plugin
  // reaches the last step, or 90 s. Each step needs 3 windows of 1 s over budget in a row, so 9 s
  // at the least; a window's few timed callbacks (1 in 1024) are dropped when the thread was
  // descheduled in them, which on a loaded host under ASan left a 20 s limit at step 1.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  bool proxy_off_seen = false;
  int level = 0;
  uint64_t seq = 0;
  while (std::chrono::steady_clock::now() < deadline && level < 3) {
    for (int i = 0; i < 2000; ++i) {
      void* c = host.Coll(ctx, nullptr, 0, seq++, "AllReduce", 1024, "ncclFloat32", 2);
      if ((FakeHost::Mask() & kSentinelProfileProxyOp) != 0) {
        void* op = host.ProxyOp(ctx, c, 1);
        host.Stop(op);
      }
      host.Stop(c);
      host.KernelChs(ctx, c, 2, kGpuSkew, nullptr, nullptr);
    }
    if ((FakeHost::Mask() & (kSentinelProfileProxyOp | kSentinelProfileProxyStep)) == 0) {
      proxy_off_seen = true;
    }
    bool monotone = true;
    level = MaxBudgetLevel(ReadDump(setup.dump), &monotone);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // One more batch at the last step, so sampled records exist.
  for (int i = 0; i < 2000; ++i) {
    void* c = host.Coll(ctx, nullptr, 0, seq++, "AllReduce", 1024, "ncclFloat32", 2);
    host.Stop(c);
    host.KernelChs(ctx, c, 2, kGpuSkew, nullptr, nullptr);
  }
  host.v5->finalize(ctx);
  auto all = ReadDump(setup.dump);
  bool monotone = true;
  ASSERT_EQ(MaxBudgetLevel(all, &monotone), 3);
  EXPECT_TRUE(monotone);
  EXPECT_TRUE(proxy_off_seen);
  // NCCL's mask keeps Coll and KernelCh; only the proxy family went.
  EXPECT_EQ(FakeHost::Mask() & (kSentinelProfileProxyOp | kSentinelProfileProxyStep), 0);
  EXPECT_NE(FakeHost::Mask() & kSentinelProfileKernelCh, 0);

  // Records: skipped KernelCh means no GPU times, never made-up ones; sampled records say so.
  size_t skipped = 0;
  size_t sampled = 0;
  size_t gpu_valid = 0;
  for (const auto& r : Records(all, comm)) {
    bool skip = HasFlag(r, "gpu_skipped");
    bool valid = HasFlag(r, "gpu_time_valid");
    EXPECT_FALSE(skip && valid);
    EXPECT_FALSE(HasFlag(r, "truncated"));  // skipped KernelCh must not leave records waiting
    skipped += skip;
    gpu_valid += valid;
    sampled += HasFlag(r, "sampled");
  }
  EXPECT_GT(skipped, 0u);
  EXPECT_GT(gpu_valid, 0u);  // 1 collective in 8 keeps its KernelCh
  EXPECT_GT(sampled, 0u);

  // What is kept comes in bursts of consecutive ordinals (8 out of every 64), so consecutive
  // collectives with GPU times remain at levels 2 and 3: the ordinal travels in each record.
  uint64_t prev_ordinal = 0;
  bool prev_gpu = false;
  size_t consecutive_sampled = 0;
  size_t consecutive_gpu_while_skipping = 0;
  bool skipping = false;
  for (const auto& r : Records(all, comm)) {
    const uint64_t ordinal = r.value("ordinal", uint64_t{0});
    ASSERT_GT(ordinal, prev_ordinal);  // every collective numbered, in order
    const bool burst = ordinal % 64 < 8;
    const bool gpu = HasFlag(r, "gpu_time_valid");
    if (HasFlag(r, "gpu_skipped")) {
      skipping = true;
      EXPECT_FALSE(burst) << ordinal;
    }
    if (HasFlag(r, "sampled")) {
      EXPECT_TRUE(burst) << ordinal;
      if (ordinal == prev_ordinal + 1) ++consecutive_sampled;
    }
    if (skipping && gpu && prev_gpu && ordinal == prev_ordinal + 1) {
      ++consecutive_gpu_while_skipping;
    }
    prev_ordinal = ordinal;
    prev_gpu = gpu;
  }
  EXPECT_GT(consecutive_sampled, 0u);
  EXPECT_GT(consecutive_gpu_while_skipping, 0u);

  std::ifstream in(setup.log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("exceeds SENTINEL_BUDGET"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("proxy events off"), std::string::npos);
  EXPECT_NE(text.str().find("records sampled 1 of 8"), std::string::npos);
}

}  // namespace
}  // namespace sentinel::testing
