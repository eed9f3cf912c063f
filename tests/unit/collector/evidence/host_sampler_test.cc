// The sampler on fake trees: thread folds, pid reuse, windows, gone processes, bounds.
#include "collector/evidence/host_sampler.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "tests/unit/collector/evidence/fake_host_tree.h"

namespace sentinel::collector {
namespace {

using testing::FakeHostTree;

constexpr int64_t kSec = 1'000'000'000;

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

HostSamplerOptions OptionsFor(const FakeHostTree& tree) {
  HostSamplerOptions o;
  o.roots = tree.roots();
  return o;
}

// A v2 process with one cgroup, PSI and node PSI, all counters at the given scale.
void WriteProcess(const FakeHostTree& tree, uint32_t pid, uint64_t start, uint64_t scale) {
  const std::string p = std::to_string(pid);
  tree.WriteStat(pid, "rank", 'R', 10 * scale, start);
  FakeHostTree::Write(tree.Proc(p + "/cgroup"), "0::/job" + p + "\n");
  FakeHostTree::Write(tree.Cgroup("cgroup.controllers"), "cpu memory io\n");
  FakeHostTree::Write(tree.Cgroup("job" + p + "/cpu.max"), "50000 100000\n");
  FakeHostTree::Write(tree.Cgroup("job" + p + "/cpu.stat"),
                      "nr_periods " + std::to_string(10 * scale) + "\nnr_throttled " +
                          std::to_string(2 * scale) + "\nthrottled_usec " +
                          std::to_string(1000 * scale) + "\n");
  tree.WritePsi(tree.Cgroup("job" + p + "/cpu.pressure"), 3000 * scale, 1000 * scale);
  tree.WritePsi(tree.Cgroup("job" + p + "/memory.pressure"), 100 * scale, 50 * scale);
  tree.WritePsi(tree.Cgroup("job" + p + "/io.pressure"), 0, 0);
  tree.WritePsi(tree.Proc("pressure/cpu"), 5000 * scale, 0);
  tree.WritePsi(tree.Proc("pressure/memory"), 200 * scale, 100 * scale);
  tree.WritePsi(tree.Proc("pressure/io"), 0, 0);
}

TEST(ThreadFoldTest, ExitedThreadNeverMakesTheSumGoBackwards) {
  ThreadFold fold;
  ProcSample s;
  s.threads = 2;
  s.tasks = {{10, true, 100, 50, true, 1, 2}, {11, true, 1000, 500, true, 10, 20}};
  FoldThreads(s, &fold);
  EXPECT_EQ(fold.wait_ns, 0u);  // the first poll is the baseline
  // Thread 11 (the busiest) exited; thread 10 grew by 30 ns of CPU and 20 ns of wait.
  s.threads = 1;
  s.tasks = {{10, true, 130, 70, true, 2, 5}};
  FoldThreads(s, &fold);
  EXPECT_EQ(fold.cpu_ns, 30u);
  EXPECT_EQ(fold.wait_ns, 20u);
  EXPECT_EQ(fold.voluntary, 1u);
  EXPECT_EQ(fold.involuntary, 3u);
  // A summed-per-poll reading would have fallen from 550 to 70 ns of wait here.
}

TEST(ThreadFoldTest, NewAndReusedTidsCountWhatTheyHave) {
  ThreadFold fold;
  ProcSample s;
  s.threads = 1;
  s.tasks = {{10, true, 100, 50, true, 1, 1}};
  FoldThreads(s, &fold);
  // Thread 12 was born after the last (complete) listing: all it has is in the window.
  // Thread 10's counters fell: a new thread under a reused tid.
  s.threads = 2;
  s.tasks = {{10, true, 40, 5, true, 0, 1}, {12, true, 7, 3, true, 2, 2}};
  FoldThreads(s, &fold);
  EXPECT_EQ(fold.cpu_ns, 47u);
  EXPECT_EQ(fold.wait_ns, 8u);
  // A thread without schedstat this time keeps its baseline: its growth is counted next time.
  s.tasks = {{10, false, 0, 0, true, 0, 1}, {12, true, 9, 3, true, 2, 2}};
  FoldThreads(s, &fold);
  EXPECT_EQ(fold.cpu_ns, 49u);
  s.tasks = {{10, true, 60, 6, true, 0, 1}, {12, true, 9, 3, true, 2, 2}};
  FoldThreads(s, &fold);
  EXPECT_EQ(fold.cpu_ns, 69u);
  EXPECT_EQ(fold.wait_ns, 9u);
}

TEST(ThreadFoldTest, AfterATruncatedListingANewTidHasNoBaseline) {
  ThreadFold fold;
  ProcSample s;
  s.threads = kMaxTasksPerProcess + 1;
  s.tasks_truncated = true;
  s.tasks = {{10, true, 100, 50, true, 1, 1}};
  FoldThreads(s, &fold);
  s.threads = 2;
  s.tasks_truncated = false;
  s.tasks = {{10, true, 100, 50, true, 1, 1}, {9000, true, 1'000'000, 1'000'000, true, 9, 9}};
  FoldThreads(s, &fold);
  EXPECT_EQ(fold.cpu_ns, 0u);  // tid 9000 may have been there unread: it starts counting now
  EXPECT_EQ(fold.wait_ns, 0u);
}

TEST(HostSamplerTest, WindowFiguresFromTwoPolls) {
  FakeHostTree tree;
  WriteProcess(tree, 100, 777, 1);
  tree.WriteTask(100, 100, 1'000'000, 2'000'000, 5, 6);
  HostSampler sampler(OptionsFor(tree));
  sampler.Poll({100}, 10 * kSec);
  WriteProcess(tree, 100, 777, 2);
  tree.WriteTask(100, 100, 501'000'000, 252'000'000, 15, 26);
  sampler.Poll({100}, 12 * kSec);
  const std::optional<HostWindow> w = sampler.Window(100, 10 * kSec, 12 * kSec);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->from_ns, 10 * kSec);
  EXPECT_EQ(w->to_ns, 12 * kSec);
  EXPECT_DOUBLE_EQ(w->wall_s, 2.0);
  ASSERT_TRUE(w->run_queue_wait.known) << w->run_queue_wait.why;
  EXPECT_DOUBLE_EQ(w->run_queue_wait.ms, 250);
  EXPECT_DOUBLE_EQ(w->run_queue_wait.share, 0.125);
  EXPECT_DOUBLE_EQ(w->cpu.ms, 500);
  EXPECT_EQ(w->involuntary_switches.count, 20u);
  EXPECT_DOUBLE_EQ(w->involuntary_switches.per_s, 10);
  EXPECT_EQ(w->voluntary_switches.count, 10u);
  EXPECT_EQ(w->major_faults.count, 10u);
  ASSERT_TRUE(w->throttled.known) << w->throttled.why;
  EXPECT_DOUBLE_EQ(w->throttled.ms, 1);  // 1000 us
  EXPECT_EQ(w->nr_throttled.count, 2u);
  EXPECT_EQ(w->nr_periods.count, 10u);
  ASSERT_TRUE(w->quota_known);
  EXPECT_DOUBLE_EQ(w->quota_cpus, 0.5);
  ASSERT_TRUE(w->cgroup_psi[kPsiCpu].some.known) << w->cgroup_psi[kPsiCpu].some.why;
  EXPECT_DOUBLE_EQ(w->cgroup_psi[kPsiCpu].some.ms, 3);
  EXPECT_DOUBLE_EQ(w->cgroup_psi[kPsiCpu].full.ms, 1);
  EXPECT_DOUBLE_EQ(w->cgroup_psi[kPsiMemory].some.share, 100e-6 / 2);
  EXPECT_DOUBLE_EQ(w->node_psi[kPsiCpu].some.ms, 5);
  EXPECT_DOUBLE_EQ(w->node_psi[kPsiMemory].full.ms, 0.1);
  EXPECT_FALSE(w->gone);
  EXPECT_EQ(w->state, 'R');
  EXPECT_EQ(w->threads, 1u);
}

TEST(HostSamplerTest, ReusedPidIsNeverDiffedAgainstItsPredecessor) {
  FakeHostTree tree;
  WriteProcess(tree, 200, 1000, 5);
  tree.WriteTask(200, 200, 9'000'000, 9'000'000, 50, 50);
  HostSampler sampler(OptionsFor(tree));
  sampler.Poll({200}, 1 * kSec);
  // The pid now belongs to a younger process with smaller counters.
  WriteProcess(tree, 200, 2000, 1);
  tree.WriteTask(200, 200, 1'000, 1'000, 1, 1);
  sampler.Poll({200}, 2 * kSec);
  std::optional<HostWindow> w = sampler.Window(200, 1 * kSec, 2 * kSec);
  ASSERT_TRUE(w.has_value());
  EXPECT_FALSE(w->run_queue_wait.known);
  EXPECT_FALSE(w->throttled.known);
  EXPECT_TRUE(Has(w->run_queue_wait.why, "one poll only")) << w->run_queue_wait.why;
  tree.WriteTask(200, 200, 3'000, 2'000, 1, 4);
  sampler.Poll({200}, 3 * kSec);
  w = sampler.Window(200, 1 * kSec, 3 * kSec);
  ASSERT_TRUE(w->run_queue_wait.known) << w->run_queue_wait.why;
  EXPECT_EQ(w->from_ns, 2 * kSec);  // the old process's point is gone from the history
  EXPECT_DOUBLE_EQ(w->run_queue_wait.ms, 0.001);
  EXPECT_EQ(w->involuntary_switches.count, 3u);
}

TEST(HostSamplerTest, DiffOfDifferentStartTimesIsUnknown) {
  HostPoint a;
  a.mono_ns = kSec;
  a.present = ~0u;
  a.starttime_ticks = 1;
  HostPoint b = a;
  b.mono_ns = 2 * kSec;
  b.starttime_ticks = 2;
  b.wait_ns = 5;
  const HostWindow w = DiffPoints(1, a, b, HostReasons{});
  EXPECT_FALSE(w.run_queue_wait.known);
  EXPECT_TRUE(Has(w.run_queue_wait.why, "pid reused")) << w.run_queue_wait.why;
  EXPECT_FALSE(w.nr_throttled.known);
  EXPECT_TRUE(w.node_psi[kPsiCpu].some.known);  // the node's figures do not depend on the pid
}

TEST(HostSamplerTest, CounterThatWentBackwardsIsUnknownWithAReason) {
  FakeHostTree tree;
  WriteProcess(tree, 300, 5, 3);
  tree.WriteTask(300, 300, 10, 10, 1, 1);
  HostSampler sampler(OptionsFor(tree));
  sampler.Poll({300}, 1 * kSec);
  WriteProcess(tree, 300, 5, 1);  // the cgroup was recreated under the same path: counters fell
  tree.WriteTask(300, 300, 20, 20, 1, 1);
  sampler.Poll({300}, 2 * kSec);
  const std::optional<HostWindow> w = sampler.Window(300, 1 * kSec, 2 * kSec);
  ASSERT_TRUE(w.has_value());
  EXPECT_FALSE(w->nr_throttled.known);
  EXPECT_TRUE(Has(w->nr_throttled.why, "nr_throttled went backwards")) << w->nr_throttled.why;
  EXPECT_FALSE(w->throttled.known);
  EXPECT_FALSE(w->major_faults.known);
  EXPECT_TRUE(w->run_queue_wait.known);
  EXPECT_DOUBLE_EQ(w->run_queue_wait.ms, 10e-6);
}

TEST(HostSamplerTest, MovedToAnotherCgroupMakesCgroupFiguresUnknown) {
  FakeHostTree tree;
  WriteProcess(tree, 310, 5, 1);
  tree.WriteTask(310, 310, 10, 10, 1, 1);
  HostSampler sampler(OptionsFor(tree));
  sampler.Poll({310}, 1 * kSec);
  FakeHostTree::Write(tree.Proc("310/cgroup"), "0::/other\n");
  FakeHostTree::Write(tree.Cgroup("other/cpu.stat"),
                      "nr_periods 100\nnr_throttled 90\nthrottled_usec 100000\n");
  sampler.Poll({310}, 2 * kSec);
  const std::optional<HostWindow> w = sampler.Window(310, 1 * kSec, 2 * kSec);
  ASSERT_TRUE(w.has_value());
  EXPECT_FALSE(w->nr_throttled.known);
  EXPECT_TRUE(Has(w->nr_throttled.why, "moved to another cgroup")) << w->nr_throttled.why;
  EXPECT_FALSE(w->cgroup_psi[kPsiCpu].some.known);
  EXPECT_TRUE(w->run_queue_wait.known);
}

TEST(HostSamplerTest, GoneProcessSaysSoAndKeepsItsLastFigures) {
  FakeHostTree tree;
  WriteProcess(tree, 400, 5, 1);
  tree.WriteTask(400, 400, 10, 10, 1, 1);
  HostSampler sampler(OptionsFor(tree));
  sampler.Poll({400}, 1 * kSec);
  tree.WriteTask(400, 400, 30, 40, 1, 1);
  sampler.Poll({400}, 2 * kSec);
  tree.RemoveTask(400, 400);
  unlink(tree.Proc("400/stat").c_str());
  sampler.Poll({400}, 3 * kSec);
  std::optional<HostWindow> w = sampler.Window(400, 1 * kSec, 3 * kSec);
  ASSERT_TRUE(w.has_value());
  EXPECT_TRUE(w->gone);
  EXPECT_TRUE(Has(w->gone_why, "/400: process gone")) << w->gone_why;
  ASSERT_TRUE(w->run_queue_wait.known);
  EXPECT_EQ(w->to_ns, 2 * kSec);
  EXPECT_DOUBLE_EQ(w->run_queue_wait.ms, 30e-6);
  // Before it went, the window is not marked gone.
  w = sampler.Window(400, 1 * kSec, 2 * kSec);
  EXPECT_FALSE(w->gone);
  // Never seen alive: gone, every figure unknown with that reason.
  sampler.Poll({401}, 4 * kSec);
  w = sampler.Window(401, 3 * kSec, 4 * kSec);
  ASSERT_TRUE(w.has_value());
  EXPECT_TRUE(w->gone);
  EXPECT_FALSE(w->cpu.known);
  EXPECT_TRUE(Has(w->cpu.why, "process gone")) << w->cpu.why;
}

TEST(HostSamplerTest, MissingFiguresCarryTheirReasonNeverAZero) {
  FakeHostTree tree;
  // A v1-only node without PSI: stat and threads but no cgroup v2, no /proc/pressure.
  tree.WriteStat(500, "rank", 'S', 1, 9);
  tree.WriteTask(500, 500, 10, 10, 1, 1);
  FakeHostTree::Write(tree.Proc("500/cgroup"), "3:cpu,cpuacct:/gone-dir\n");
  FakeHostTree::MakeDirs(tree.Cgroup("cpu,cpuacct"));
  HostSampler sampler(OptionsFor(tree));
  sampler.Poll({500}, 1 * kSec);
  tree.WriteTask(500, 500, 20, 20, 1, 1);
  sampler.Poll({500}, 2 * kSec);
  const std::optional<HostWindow> w = sampler.Window(500, 1 * kSec, 2 * kSec);
  ASSERT_TRUE(w.has_value());
  EXPECT_TRUE(w->run_queue_wait.known);
  EXPECT_FALSE(w->throttled.known);
  EXPECT_TRUE(Has(w->throttled.why, "no such directory")) << w->throttled.why;
  EXPECT_FALSE(w->quota_known);
  EXPECT_FALSE(w->quota_why.empty());
  EXPECT_FALSE(w->cgroup_psi[kPsiMemory].some.known);
  EXPECT_TRUE(Has(w->cgroup_psi[kPsiMemory].some.why, "cgroup v1 only"))
      << w->cgroup_psi[kPsiMemory].some.why;
  EXPECT_FALSE(w->node_psi[kPsiIo].full.known);
  EXPECT_TRUE(Has(w->node_psi[kPsiIo].full.why, "CONFIG_PSI")) << w->node_psi[kPsiIo].full.why;
}

TEST(HostSamplerTest, WindowPicksTheEnclosingPoints) {
  FakeHostTree tree;
  WriteProcess(tree, 600, 5, 1);
  HostSampler sampler(OptionsFor(tree));
  for (int i = 0; i < 10; ++i) {
    tree.WriteTask(600, 600, 0, static_cast<uint64_t>(i) * 1'000'000, 0, 0);
    sampler.Poll({600}, i * kSec);
  }
  // [2.5 s, 4.5 s] is covered by the points at 2 s and 5 s.
  std::optional<HostWindow> w = sampler.Window(600, 2 * kSec + kSec / 2, 4 * kSec + kSec / 2);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->from_ns, 2 * kSec);
  EXPECT_EQ(w->to_ns, 5 * kSec);
  EXPECT_DOUBLE_EQ(w->run_queue_wait.ms, 3);
  // A range past the newest point ends at the newest; one before the oldest starts at the oldest.
  w = sampler.Window(600, 8 * kSec, 20 * kSec);
  EXPECT_EQ(w->from_ns, 8 * kSec);
  EXPECT_EQ(w->to_ns, 9 * kSec);
  w = sampler.Window(600, -5 * kSec, 1 * kSec);
  EXPECT_EQ(w->from_ns, 0);
  EXPECT_EQ(w->to_ns, 1 * kSec);
  EXPECT_FALSE(sampler.Window(601, 0, kSec).has_value());
  // A pid passed twice, or a poll stamped into the past, adds no point out of order.
  tree.WriteTask(600, 600, 0, 50'000'000, 0, 0);
  sampler.Poll({600, 600}, 10 * kSec);
  sampler.Poll({600}, 7 * kSec);
  w = sampler.Window(600, 9 * kSec, 11 * kSec);
  ASSERT_TRUE(w->run_queue_wait.known) << w->run_queue_wait.why;
  EXPECT_EQ(w->from_ns, 9 * kSec);
  EXPECT_EQ(w->to_ns, 10 * kSec);
  EXPECT_DOUBLE_EQ(w->run_queue_wait.ms, 41);
}

TEST(HostSamplerTest, BoundedHistoryPidsAndForgetting) {
  FakeHostTree tree;
  for (uint32_t pid = 700; pid < 704; ++pid) {
    WriteProcess(tree, pid, 5, 1);
    tree.WriteTask(pid, pid, 1, 1, 1, 1);
  }
  HostSamplerOptions o = OptionsFor(tree);
  o.max_pids = 2;
  o.samples_per_pid = 3;
  o.forget_after_ns = 10 * kSec;
  HostSampler sampler(o);
  sampler.Poll({700, 701}, 1 * kSec);
  sampler.Poll({701}, 2 * kSec);
  // 702 evicts 700 (polled least recently); 703 finds both slots polled in this same Poll.
  sampler.Poll({701, 702, 703}, 3 * kSec);
  EXPECT_EQ(sampler.TrackedPids(), 2u);
  EXPECT_FALSE(sampler.Window(700, 0, 3 * kSec).has_value());
  EXPECT_TRUE(sampler.Window(701, 0, 3 * kSec).has_value());
  EXPECT_TRUE(sampler.Window(702, 0, 3 * kSec).has_value());
  EXPECT_EQ(sampler.RefusedPids(), 1u);
  // Three points kept per pid: the oldest of four polls is gone.
  for (int64_t t = 4; t <= 6; ++t) sampler.Poll({702}, t * kSec);
  std::optional<HostWindow> w = sampler.Window(702, 0, 6 * kSec);
  EXPECT_EQ(w->from_ns, 4 * kSec);
  // 701 is not passed for more than 10 s: forgotten.
  sampler.Poll({702}, 14 * kSec);
  EXPECT_EQ(sampler.TrackedPids(), 1u);
  EXPECT_FALSE(sampler.Window(701, 0, 14 * kSec).has_value());
}

// Poll on one thread (sentineld's poller), Window on another (the aggregator's): under TSan this is
// the check of the internal locking; everywhere, every window seen is a consistent pair of points.
TEST(HostSamplerTest, PollAndWindowFromTwoThreads) {
  FakeHostTree tree;
  WriteProcess(tree, 800, 5, 1);
  tree.WriteTask(800, 800, 0, 0, 0, 0);
  HostSampler sampler(OptionsFor(tree));
  std::atomic<bool> done{false};
  std::thread poller([&] {
    for (int64_t i = 1; i <= 100; ++i) {
      tree.WriteTask(800, 800, 0, static_cast<uint64_t>(i) * 1'000'000, 0, 0);
      sampler.Poll({800, 801}, i * kSec);
    }
    done = true;
  });
  bool consistent = true;
  while (!done && consistent) {
    const std::optional<HostWindow> w = sampler.Window(800, 0, 1000 * kSec);
    std::this_thread::yield();
    if (!w || !w->run_queue_wait.known) continue;
    // One ms of wait was added per second polled: the window's wait matches its span.
    consistent = w->to_ns > w->from_ns && w->run_queue_wait.ms == w->wall_s;
    EXPECT_TRUE(consistent) << w->from_ns << " " << w->to_ns << " " << w->run_queue_wait.ms;
  }
  poller.join();
  const std::optional<HostWindow> w = sampler.Window(800, 0, 1000 * kSec);
  ASSERT_TRUE(w.has_value());
  EXPECT_DOUBLE_EQ(w->run_queue_wait.ms, 99);
  EXPECT_EQ(sampler.TrackedPids(), 2u);
}

}  // namespace
}  // namespace sentinel::collector
