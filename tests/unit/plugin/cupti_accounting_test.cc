// GpuAccounting: exact window, step and attribution figures for known activity.
#include <gtest/gtest.h>

#include "plugin/cupti/gpu_accounting.h"

namespace sentinel::plugin::cupti {
namespace {

Interval Iv(Activity k, int64_t s, int64_t e, uint32_t stream = 1) {
  Interval iv;
  iv.kind = k;
  iv.start = s;
  iv.end = e;
  iv.stream = stream;
  return iv;
}

TEST(GpuAccountingTest, OverlappingStreamsGiveExactSplit) {
  GpuAccounting acc(1000);
  acc.Begin(0);
  acc.Add(Iv(Activity::kCompute, 100, 500, 1));
  acc.Add(Iv(Activity::kNccl, 300, 700, 2));
  acc.Add(Iv(Activity::kCompute, 350, 450, 3));  // a second compute stream inside the first
  acc.Add(Iv(Activity::kMemcpy, 800, 900, 4));
  AccountingOutput out;
  acc.Advance(999, &out);
  EXPECT_TRUE(out.windows.empty());  // the window has not ended yet
  acc.Advance(1000, &out);
  ASSERT_EQ(out.windows.size(), 1u);
  const WindowResult& w = out.windows[0];
  EXPECT_EQ(w.start_ns, 0);
  EXPECT_EQ(w.end_ns, 1000);
  EXPECT_EQ(w.compute_ns, 400);
  EXPECT_EQ(w.nccl_ns, 400);
  EXPECT_EQ(w.overlap_ns, 200);
  EXPECT_EQ(w.memcpy_ns, 100);
  EXPECT_EQ(w.idle_ns, 300);
  EXPECT_EQ(w.kernels, 3u);
  EXPECT_EQ(w.nccl_kernels, 1u);
  EXPECT_EQ(w.not_measured, 0u);
  ASSERT_EQ(out.attributions.size(), 1u);
  EXPECT_EQ(out.attributions[0].kernel.start, 300);
  EXPECT_EQ(out.attributions[0].kernel.end, 700);
  EXPECT_EQ(out.attributions[0].overlap_ns, 200);
}

TEST(GpuAccountingTest, KernelSpanningWindowEdgesIsSplit) {
  GpuAccounting acc(1000);
  acc.Begin(0);
  acc.Add(Iv(Activity::kCompute, 800, 2300));
  acc.Add(Iv(Activity::kNccl, 900, 1100));
  AccountingOutput out;
  acc.Advance(3000, &out);
  ASSERT_EQ(out.windows.size(), 3u);
  EXPECT_EQ(out.windows[0].compute_ns, 200);
  EXPECT_EQ(out.windows[0].nccl_ns, 100);
  EXPECT_EQ(out.windows[0].overlap_ns, 100);
  EXPECT_EQ(out.windows[0].idle_ns, 800);
  EXPECT_EQ(out.windows[0].kernels, 2u);  // counted where they start
  EXPECT_EQ(out.windows[1].compute_ns, 1000);
  EXPECT_EQ(out.windows[1].nccl_ns, 100);
  EXPECT_EQ(out.windows[1].idle_ns, 0);
  EXPECT_EQ(out.windows[1].kernels, 0u);
  EXPECT_EQ(out.windows[2].compute_ns, 300);
  EXPECT_EQ(out.windows[2].idle_ns, 700);
  // The NCCL kernel spans the first edge: attributed once, with its whole overlap.
  ASSERT_EQ(out.attributions.size(), 1u);
  EXPECT_EQ(out.attributions[0].overlap_ns, 200);
}

TEST(GpuAccountingTest, EmptyWindowsAreAllIdle) {
  GpuAccounting acc(1000);
  acc.Begin(0);
  AccountingOutput out;
  acc.Advance(2500, &out);
  ASSERT_EQ(out.windows.size(), 2u);
  for (const WindowResult& w : out.windows) {
    EXPECT_EQ(w.compute_ns + w.nccl_ns + w.overlap_ns + w.memcpy_ns, 0);
    EXPECT_EQ(w.idle_ns, 1000);
    EXPECT_EQ(w.not_measured, 0u);
  }
}

TEST(GpuAccountingTest, BeginStartsAtTheNextEdge) {
  GpuAccounting acc(1000);
  acc.Begin(1500);
  acc.Add(Iv(Activity::kCompute, 1600, 1700));  // before the first full window: ignored
  acc.Add(Iv(Activity::kCompute, 2100, 2200));
  AccountingOutput out;
  acc.Advance(3000, &out);
  ASSERT_EQ(out.windows.size(), 1u);
  EXPECT_EQ(out.windows[0].start_ns, 2000);
  EXPECT_EQ(out.windows[0].compute_ns, 100);
}

TEST(GpuAccountingTest, OutOfOrderAndLateRecords) {
  GpuAccounting acc(1000);
  acc.Begin(0);
  acc.Add(Iv(Activity::kNccl, 600, 700));
  acc.Add(Iv(Activity::kCompute, 100, 200));  // earlier, delivered later: same result
  AccountingOutput out;
  acc.Advance(1000, &out);
  ASSERT_EQ(out.windows.size(), 1u);
  EXPECT_EQ(out.windows[0].compute_ns, 100);
  EXPECT_EQ(out.windows[0].nccl_ns, 100);
  EXPECT_EQ(out.windows[0].late, 0u);
  // Late: the first window is closed. One record wholly inside it is lost; one that crosses the
  // edge keeps its part after the edge. Both are counted in the next window.
  acc.Add(Iv(Activity::kCompute, 900, 950));
  acc.Add(Iv(Activity::kCompute, 950, 1100));
  out.clear();
  acc.Advance(2000, &out);
  ASSERT_EQ(out.windows.size(), 1u);
  EXPECT_EQ(out.windows[0].compute_ns, 100);
  EXPECT_EQ(out.windows[0].late, 2u);
  EXPECT_EQ(acc.late_total(), 2u);
}

TEST(GpuAccountingTest, DroppedAndTimestamplessRecordsAreCounted) {
  GpuAccounting acc(1000);
  acc.Begin(0);
  acc.AddDropped(5);
  acc.Add(Iv(Activity::kCompute, 0, 0));  // start = end = 0: no timestamps
  acc.Add(Iv(Activity::kCompute, 10, 20));
  AccountingOutput out;
  acc.Advance(2000, &out);
  ASSERT_EQ(out.windows.size(), 2u);
  EXPECT_EQ(out.windows[0].dropped, 6u);
  EXPECT_EQ(out.windows[0].compute_ns, 10);
  EXPECT_EQ(out.windows[1].dropped, 0u);
}

TEST(GpuAccountingTest, NotMeasuredWindowsCarryNoFigures) {
  GpuAccounting acc(1000);
  acc.Begin(0);
  acc.Add(Iv(Activity::kCompute, 0, 3000));
  acc.MarkNotMeasured(1200, 1500, kReasonForeignOwner);
  AccountingOutput out;
  acc.Advance(3000, &out);
  ASSERT_EQ(out.windows.size(), 3u);
  EXPECT_EQ(out.windows[0].not_measured, 0u);
  EXPECT_EQ(out.windows[0].compute_ns, 1000);
  EXPECT_EQ(out.windows[1].not_measured, static_cast<uint32_t>(kReasonForeignOwner));
  EXPECT_EQ(out.windows[1].compute_ns, 0);
  EXPECT_EQ(out.windows[1].idle_ns, 0);  // not "idle": not measured
  EXPECT_EQ(out.windows[2].not_measured, 0u);
  EXPECT_EQ(out.windows[2].compute_ns, 1000);
}

TEST(GpuAccountingTest, StepsSplitIntoComputeExposedCommAndIdle) {
  GpuAccounting acc(1000);
  acc.Begin(0);
  acc.AddStepBoundary(100);
  acc.AddStepBoundary(1100);
  acc.AddStepBoundary(2100);
  // Step 1 [100, 1100): compute [100, 600), NCCL [500, 900) -> overlap 100, exposed 300, idle 200.
  acc.Add(Iv(Activity::kCompute, 100, 600));
  acc.Add(Iv(Activity::kNccl, 500, 900));
  // Step 2 [1100, 2100): compute [1500, 2500) clipped to 600, memcpy-only [1200, 1300).
  acc.Add(Iv(Activity::kCompute, 1500, 2500));
  acc.Add(Iv(Activity::kMemcpy, 1200, 1300));
  AccountingOutput out;
  acc.Advance(3000, &out);
  ASSERT_EQ(out.steps.size(), 2u);
  const StepResult& s1 = out.steps[0];
  EXPECT_EQ(s1.start_ns, 100);
  EXPECT_EQ(s1.end_ns, 1100);
  EXPECT_EQ(s1.compute_ns, 500);
  EXPECT_EQ(s1.exposed_comm_ns, 300);
  EXPECT_EQ(s1.idle_ns, 200);
  EXPECT_EQ(s1.memcpy_only_ns, 0);
  const StepResult& s2 = out.steps[1];
  EXPECT_EQ(s2.start_ns, 1100);
  EXPECT_EQ(s2.end_ns, 2100);
  EXPECT_EQ(s2.compute_ns, 600);
  EXPECT_EQ(s2.exposed_comm_ns, 0);
  EXPECT_EQ(s2.memcpy_only_ns, 100);
  EXPECT_EQ(s2.idle_ns, 300);
  EXPECT_EQ(s2.compute_ns + s2.exposed_comm_ns + s2.memcpy_only_ns + s2.idle_ns,
            s2.end_ns - s2.start_ns);
}

TEST(GpuAccountingTest, StepTouchingANotMeasuredSpanIsNotMeasured) {
  GpuAccounting acc(1000);
  acc.Begin(0);
  acc.AddStepBoundary(100);
  acc.AddStepBoundary(1900);
  acc.AddStepBoundary(2900);
  acc.Add(Iv(Activity::kCompute, 100, 2900));
  acc.MarkNotMeasured(1000, 1200, kReasonForeignClock);
  AccountingOutput out;
  acc.Advance(3000, &out);
  ASSERT_EQ(out.steps.size(), 2u);
  EXPECT_NE(out.steps[0].not_measured, 0u);
  EXPECT_EQ(out.steps[0].compute_ns, 0);
  EXPECT_EQ(out.steps[1].not_measured, 0u);
  EXPECT_EQ(out.steps[1].compute_ns, 1000);
}

TEST(GpuAccountingTest, AttributionsAreCappedPerWindowTheKernelEndsIn) {
  GpuAccounting acc(1000);
  acc.set_attributions_per_window(2);
  acc.Begin(0);
  acc.Add(Iv(Activity::kCompute, 0, 3000));
  // Window 0: three NCCL kernels end in it; the first two to arrive are attributed.
  acc.Add(Iv(Activity::kNccl, 500, 600, 11));
  acc.Add(Iv(Activity::kNccl, 100, 200, 12));
  acc.Add(Iv(Activity::kNccl, 300, 400, 13));
  // One starts in window 0 and ends in window 1: it counts against window 1's cap.
  acc.Add(Iv(Activity::kNccl, 900, 1100, 14));
  acc.Add(Iv(Activity::kNccl, 1200, 1300, 15));
  acc.Add(Iv(Activity::kNccl, 1400, 1500, 16));
  AccountingOutput out;
  acc.Advance(2000, &out);
  ASSERT_EQ(out.windows.size(), 2u);
  EXPECT_EQ(out.windows[0].nccl_kernels, 4u);  // counted where they start, cap or not
  EXPECT_EQ(out.windows[1].nccl_kernels, 2u);
  ASSERT_EQ(out.attributions.size(), 4u);
  EXPECT_EQ(out.attributions[0].kernel.stream, 11u);
  EXPECT_EQ(out.attributions[1].kernel.stream, 12u);
  EXPECT_EQ(out.attributions[2].kernel.stream, 14u);
  EXPECT_EQ(out.attributions[2].overlap_ns, 200);  // whole, across the edge
  EXPECT_EQ(out.attributions[3].kernel.stream, 15u);
  EXPECT_EQ(acc.attributions_suppressed(), 2u);
}

TEST(GpuAccountingTest, FarOutOfOrderRecordsMergeExactly) {
  // More than a short tail behind the newest record: the side list path, merged at close.
  GpuAccounting acc(100000);
  acc.Begin(0);
  for (int64_t t = 50000; t < 90000; t += 100) acc.Add(Iv(Activity::kCompute, t, t + 50));
  for (int64_t t = 0; t < 40000; t += 100) acc.Add(Iv(Activity::kCompute, t, t + 50));
  acc.Add(Iv(Activity::kCompute, 10025, 10175));  // joins two early segments: 75 ns new
  acc.Add(Iv(Activity::kNccl, 0, 100000));
  AccountingOutput out;
  acc.Advance(100000, &out);
  ASSERT_EQ(out.windows.size(), 1u);
  // 800 segments of 50, plus the joining one's 75 of new time.
  EXPECT_EQ(out.windows[0].compute_ns, 800 * 50 + 75);
  EXPECT_EQ(out.windows[0].overlap_ns, 800 * 50 + 75);
  EXPECT_EQ(out.windows[0].idle_ns, 0);
  EXPECT_EQ(out.windows[0].kernels, 802u);
}

TEST(GpuAccountingTest, PendingStaysBoundedOverManyWindows) {
  GpuAccounting acc(1000);
  acc.Begin(0);
  AccountingOutput out;
  for (int64_t t = 0; t < 100000; t += 10) {
    acc.Add(Iv(Activity::kCompute, t, t + 5));
    if (t % 1000 == 990) {
      out.clear();
      acc.Advance(t + 10, &out);
      ASSERT_EQ(out.windows.size(), 1u);
      EXPECT_EQ(out.windows[0].compute_ns, 500);
    }
  }
  EXPECT_EQ(acc.pending(), 0u);
}

}  // namespace
}  // namespace sentinel::plugin::cupti
