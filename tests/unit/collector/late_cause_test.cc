// The cause of a late rank (collector/aggregate/late_cause.h) on hand-made evidence: each cause,
// each bar at its edge, two causes at once, missing sources, noise that must not be claimed and
// hostile numbers.
#include "collector/aggregate/late_cause.h"

#include <cmath>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sentinel::collector {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

SpanFigure Fig(double now, double usual, double spread = -1) {
  return SpanFigure{now, usual, spread};
}

// NVML's reason bits over `polls` polls, `bits` set in `times` of them.
ReasonCounts Seen(int64_t polls, uint64_t bits = 0, int64_t times = 0) {
  ReasonCounts c;
  for (int64_t i = 0; i < polls; ++i) c.Add(i < times ? bits : 0);
  return c;
}

// A rank 10 ms late per step at 100 ms steps whose every figure holds its usual: nothing explains
// the lateness.
CauseEvidence Quiet() {
  CauseEvidence ev;
  ev.late_ms = 10;
  ev.step_ms = 100;
  ev.steps = 12;
  ev.compute_ms = Fig(80, 80, 0.5);
  ev.peer_compute_ms = 80;
  ev.gpu_idle_ms = Fig(3, 3, 0.3);
  ev.peer_gpu_idle_ms = 3;
  ev.runq_wait_ms = Fig(0.2, 0.2, 0.05);
  ev.invol_switches = Fig(20, 20, 2);
  ev.throttled_ms = Fig(0, 0, 0);
  ev.cpu_quota_cpus = 0;
  ev.cgroup_cpu_some_ms = Fig(0.5, 0.5, 0.1);
  ev.node_cpu_some_ms = Fig(1, 1, 0.2);
  ev.cgroup_memory_some_ms = Fig(0, 0, 0);
  ev.node_memory_some_ms = Fig(0, 0, 0);
  ev.cgroup_io_some_ms = Fig(0.1, 0.1, 0.05);
  ev.node_io_some_ms = Fig(0.2, 0.2, 0.05);
  ev.major_faults = Fig(0, 0, 0);
  ev.gpu.known = true;
  ev.gpu.sm_clock_mhz = Fig(1980, 1980);
  ev.gpu.sm_clock_max_mhz = 1980;
  ev.gpu.reasons_known = true;
  ev.gpu.reasons_now = Seen(12);
  ev.gpu.reasons_usual = Seen(60);
  ev.gpu.temperature_c = 65;
  ev.gpu.power_w = 500;
  ev.gpu.power_limit_w = 700;
  return ev;
}

// The GPU's kernels 15 % longer than its usual and its peers', its clock down by as much.
CauseEvidence PowerCapped() {
  CauseEvidence ev = Quiet();
  ev.late_ms = 11;
  ev.compute_ms.now = 92;
  ev.gpu.sm_clock_mhz.now = 1720;
  ev.gpu.reasons_now = Seen(12, kNvmlReasonSwPowerCap, 11);
  ev.gpu.power_w = 698;
  return ev;
}

TEST(LateCause, LabelsAreTheFixedList) {
  const char* want[kLateCauses] = {"unknown",   "gpu_slower",      "host_cpu", "cpu_quota",
                                   "host_wait", "memory_pressure", "network"};
  for (int i = 0; i < kLateCauses; ++i) {
    EXPECT_STREQ(LateCauseName(static_cast<LateCause>(i)), want[i]);
  }
  EXPECT_STREQ(LateCauseName(static_cast<LateCause>(200)), "unknown");
}

TEST(LateCause, NvmlReasonBitsDecodeAsDocumented) {
  EXPECT_EQ(NvmlReasonsText(0x4), "SW power cap");
  EXPECT_EQ(NvmlReasonsText(0x8), "HW slowdown");
  EXPECT_EQ(NvmlReasonsText(0x10), "sync boost");
  EXPECT_EQ(NvmlReasonsText(0x20), "SW thermal slowdown");
  EXPECT_EQ(NvmlReasonsText(0x40), "HW thermal slowdown");
  EXPECT_EQ(NvmlReasonsText(0x80), "HW power brake");
  // GPU idle (0x1), display clocks (0x100) and unknown bits say nothing about slower kernels.
  EXPECT_EQ(NvmlReasonsText(0x1 | 0x100 | (1ULL << 40)), "none");
  EXPECT_EQ(NvmlReasonsText(0x4 | 0x40), "HW thermal slowdown, SW power cap");
}

TEST(LateCause, QuietEvidenceNamesNothing) {
  const CauseVerdict v = JudgeLateCause(Quiet());
  EXPECT_EQ(v.Cause(), LateCause::kUnknown);
  EXPECT_THAT(v.unknown_reason, HasSubstr("no evidence explains 50 % or more of the 10.0 ms late"));
  EXPECT_THAT(CauseSentence(v), HasSubstr("cause: unknown: no evidence explains"));
}

TEST(LateCause, PowerCapNamesTheGpuWithItsClockFigures) {
  const CauseVerdict v = JudgeLateCause(PowerCapped());
  ASSERT_EQ(v.Cause(), LateCause::kGpuSlower);
  EXPECT_EQ(v.named.detail, "power cap");
  EXPECT_DOUBLE_EQ(v.named.excess_ms, 12);
  EXPECT_DOUBLE_EQ(v.named.share, 1);  // more than the lateness: all of it
  const std::string s = CauseSentence(v);
  EXPECT_THAT(s, HasSubstr("cause: GPU slower (power cap): compute kernels 92.0 ms per step (usual "
                           "80.0 ms, peers 80.0 ms) explains 100 % of 11.0 ms late per step"));
  EXPECT_THAT(s, HasSubstr("SM clock 1720 MHz (usual 1980 MHz, max 1980 MHz)"));
  EXPECT_THAT(s, HasSubstr("clock event reasons: SW power cap 91 % of polls (usual 0 %)"));
  EXPECT_THAT(s, HasSubstr("power 698 W of 700 W limit"));
  EXPECT_THAT(s, HasSubstr("what to do: check the GPU's power limit"));
  EXPECT_EQ(s.find('\n'), std::string::npos);
}

TEST(LateCause, ThermalSlowdown) {
  CauseEvidence ev = PowerCapped();
  ev.gpu.reasons_now = Seen(12, kNvmlReasonSwThermal | kNvmlReasonHwThermal, 10);
  ev.gpu.temperature_c = 91;
  const CauseVerdict v = JudgeLateCause(ev);
  ASSERT_EQ(v.Cause(), LateCause::kGpuSlower);
  EXPECT_EQ(v.named.detail, "thermal slowdown");
  EXPECT_THAT(CauseSentence(v), HasSubstr("temperature 91 C"));
  EXPECT_THAT(v.what_to_do, HasSubstr("cooling"));
}

// A bit every busy GPU brushes now and then (set in the usual span too) is not the reason when
// another one rose with the slowdown.
TEST(LateCause, TheReasonBitThatRoseWinsOverOneThatWasAlreadyUsual) {
  CauseEvidence ev = PowerCapped();
  ev.gpu.reasons_usual = Seen(60, kNvmlReasonSwPowerCap, 40);
  ev.gpu.reasons_now = Seen(12, kNvmlReasonSwPowerCap, 12);
  ev.gpu.reasons_now.set[5] = 9;  // SW thermal (0x20) in 9 of the 12 polls
  const CauseVerdict v = JudgeLateCause(ev);
  EXPECT_EQ(v.named.detail, "thermal slowdown");
  EXPECT_THAT(v.named.support, HasSubstr("clock event reasons: SW thermal slowdown 75 % of polls "
                                         "(usual 0 %), SW power cap 100 % of polls (usual 66 %)"));
  // The usual bit alone is still the reason when the clock fell with it.
  ev.gpu.reasons_now.set[5] = 0;
  EXPECT_EQ(JudgeLateCause(ev).named.detail, "power cap");
  // A bit in under half of the polls is not a reason, nor is the clock then known to be held low.
  ev.gpu.reasons_now = Seen(12, kNvmlReasonSwPowerCap, 5);
  EXPECT_EQ(JudgeLateCause(ev).named.detail,
            "why unknown: SW power cap in under half of the polls");
  ev.gpu.reasons_now = Seen(12, kNvmlReasonSwPowerCap, 6);
  EXPECT_EQ(JudgeLateCause(ev).named.detail, "power cap");
}

// One or two samples are chance: the reason waits for min_reason_polls of them.
TEST(LateCause, TooFewNvmlPollsGiveNoReason) {
  CauseEvidence ev = PowerCapped();
  ev.gpu.reasons_now = Seen(2, kNvmlReasonSwPowerCap, 2);
  EXPECT_EQ(JudgeLateCause(ev).named.detail, "why unknown: 2 NVML polls so far");
  ev.gpu.reasons_now = Seen(3, kNvmlReasonSwPowerCap, 2);
  EXPECT_EQ(JudgeLateCause(ev).named.detail, "power cap");
}

TEST(LateCause, AReasonBitWithTheClockAtItsUsualIsNotTheReason) {
  CauseEvidence ev = PowerCapped();
  ev.gpu.sm_clock_mhz.now = 1975;
  const CauseVerdict v = JudgeLateCause(ev);
  ASSERT_EQ(v.Cause(), LateCause::kGpuSlower);
  EXPECT_EQ(v.named.detail, "why unknown: the SM clock holds its usual despite SW power cap");
}

TEST(LateCause, ClockHeldLowWithoutAReasonBit) {
  CauseEvidence ev = PowerCapped();
  ev.gpu.reasons_now = Seen(12);
  EXPECT_EQ(JudgeLateCause(ev).named.detail, "clock held low");
  // The clock's edge: 15 % slower kernels need the clock at least 7.5 % under its usual.
  ev.compute_ms.now = 92;  // 12 / 80 = 15 %
  ev.gpu.sm_clock_mhz.now = 1980 / 1.075 + 0.5;
  EXPECT_THAT(JudgeLateCause(ev).named.detail, HasSubstr("why unknown"));
  ev.gpu.sm_clock_mhz.now = 1980 / 1.075 - 0.5;
  EXPECT_EQ(JudgeLateCause(ev).named.detail, "clock held low");
}

TEST(LateCause, GpuSlowerWithoutNvmlSaysWhyUnknown) {
  CauseEvidence ev = PowerCapped();
  ev.gpu = GpuState{};
  ev.gpu.unknown_reason = "no NVML: libnvidia-ml.so.1 not found";
  const CauseVerdict v = JudgeLateCause(ev);
  ASSERT_EQ(v.Cause(), LateCause::kGpuSlower);
  EXPECT_THAT(CauseSentence(v),
              HasSubstr("cause: GPU slower (why unknown: no NVML: libnvidia-ml.so.1 not found)"));
}

TEST(LateCause, XidsAndPcieAreQuotedWithTheGpu) {
  CauseEvidence ev = PowerCapped();
  ev.gpu.new_xids = 2;
  ev.gpu.last_xid = 79;
  ev.gpu.new_uncorrected_ecc = 3;
  ev.gpu.pcie_gen = 3;
  ev.gpu.pcie_gen_max = 4;
  ev.gpu.pcie_width = 8;
  ev.gpu.pcie_width_max = 16;
  ev.gpu.pcie_replay_delta = 120;
  const std::string s = CauseSentence(JudgeLateCause(ev));
  EXPECT_THAT(s, HasSubstr("2 new XIDs (last 79)"));
  EXPECT_THAT(s, HasSubstr("3 new uncorrected ECC errors"));
  EXPECT_THAT(s, HasSubstr("PCIe gen3 x8 (max gen4 x16)"));
  EXPECT_THAT(s, HasSubstr("PCIe replays +120"));
}

// Every GPU of the node got slower (a bigger batch, a new phase): not this GPU's fault.
TEST(LateCause, KernelsLongerOnThePeersTooAreNotTheGpu) {
  CauseEvidence ev = PowerCapped();
  ev.peer_compute_ms = 92;
  EXPECT_NE(JudgeLateCause(ev).Cause(), LateCause::kGpuSlower);
}

TEST(LateCause, HostCpuContention) {
  CauseEvidence ev = Quiet();
  ev.runq_wait_ms = Fig(8.5, 0.2, 0.05);
  ev.gpu_idle_ms.now = 11;  // the launch thread waited: the GPU idled as long
  ev.invol_switches.now = 400;
  ev.cgroup_cpu_some_ms.now = 9;
  const CauseVerdict v = JudgeLateCause(ev);
  ASSERT_EQ(v.Cause(), LateCause::kHostCpu);
  EXPECT_EQ(v.also.cause, LateCause::kUnknown);  // the GPU idle is the run-queue wait's
  const std::string s = CauseSentence(v);
  EXPECT_THAT(s, HasSubstr("cause: host CPU contention: run-queue wait 8.50 ms per step (usual "
                           "0.20 ms) explains 83 % of 10.0 ms late per step"));
  EXPECT_THAT(s, HasSubstr("involuntary switches 400 per step (usual 20)"));
  EXPECT_THAT(s, HasSubstr("cgroup cpu stall 9.00 ms per step (usual 0.50 ms)"));
  EXPECT_THAT(s, HasSubstr("what to do: pin the ranks away from the noisy process"));
}

TEST(LateCause, CpuQuotaWinsOverTheRunQueueWaitItCauses) {
  CauseEvidence ev = Quiet();
  ev.throttled_ms = Fig(9, 0, 0.1);
  ev.cpu_quota_cpus = 4;
  ev.runq_wait_ms = Fig(8.2, 0.2, 0.05);  // throttled threads wait in their run queue
  ev.gpu_idle_ms.now = 11;
  const CauseVerdict v = JudgeLateCause(ev);
  ASSERT_EQ(v.Cause(), LateCause::kCpuQuota);
  EXPECT_EQ(v.also.cause, LateCause::kUnknown);
  EXPECT_THAT(CauseSentence(v),
              HasSubstr("cause: CPU quota throttling: throttled 9.00 ms per step (usual 0.00 ms) "
                        "explains 90 % of 10.0 ms late per step (quota 4 CPUs)"));
  EXPECT_THAT(v.what_to_do, HasSubstr("raise the container's CPU limit"));
}

TEST(LateCause, QuotaAndContentionAtOnceNameTheLargerAndTheOtherAsAlso) {
  CauseEvidence ev = Quiet();
  ev.throttled_ms = Fig(6, 0, 0.1);
  ev.runq_wait_ms = Fig(11.2, 0.2, 0.05);  // 6 throttled + 5 taken by another process
  ev.gpu_idle_ms.now = 13;
  const CauseVerdict v = JudgeLateCause(ev);
  ASSERT_EQ(v.Cause(), LateCause::kCpuQuota);
  EXPECT_EQ(v.also.cause, LateCause::kHostCpu);
  EXPECT_NEAR(v.also.excess_ms, 5, 1e-9);
  EXPECT_THAT(CauseSentence(v), HasSubstr("; also host CPU contention: run-queue wait 11.2 ms per "
                                          "step (usual 0.20 ms), 50 %"));
}

TEST(LateCause, InputStallIsTheGpuWaitingForTheHost) {
  CauseEvidence ev = Quiet();
  ev.gpu_idle_ms.now = 13;
  const CauseVerdict v = JudgeLateCause(ev);
  ASSERT_EQ(v.Cause(), LateCause::kHostWait);
  EXPECT_EQ(v.named.detail, "input pipeline or host code");
  EXPECT_THAT(CauseSentence(v),
              HasSubstr("cause: GPU waiting for the host (input pipeline or host code): GPU idle "
                        "before the collective 13.0 ms per step (usual 3.00 ms, peers 3.00 ms) "
                        "explains 100 % of 10.0 ms late per step (run-queue wait 0.20 ms (usual "
                        "0.20 ms)"));
  EXPECT_THAT(v.what_to_do, HasSubstr("profile the input pipeline"));
  ev.cgroup_io_some_ms.now = 8;
  EXPECT_EQ(JudgeLateCause(ev).named.detail, "storage (io pressure)");
}

TEST(LateCause, MemoryPressure) {
  CauseEvidence ev = Quiet();
  ev.cgroup_memory_some_ms = Fig(7, 0, 0.1);
  ev.node_memory_some_ms = Fig(5, 0, 0.1);
  ev.major_faults = Fig(300, 0, 1);
  ev.gpu_idle_ms.now = 9;  // the host work stretched
  const CauseVerdict v = JudgeLateCause(ev);
  ASSERT_EQ(v.Cause(), LateCause::kMemoryPressure);
  EXPECT_EQ(v.also.cause, LateCause::kUnknown);
  EXPECT_THAT(
      CauseSentence(v),
      HasSubstr("cause: memory pressure: cgroup memory stall 7.00 ms per step (usual "
                "0.00 ms) explains 70 % of 10.0 ms late per step (major faults 300 per step "
                "(usual 0.0))"));
  // Without the cgroup's figure, the node's.
  ev.cgroup_memory_some_ms = SpanFigure{};
  const CauseVerdict node = JudgeLateCause(ev);
  ASSERT_EQ(node.Cause(), LateCause::kMemoryPressure);
  EXPECT_THAT(node.named.figures, HasSubstr("node memory stall 5.00 ms"));
}

TEST(LateCause, NetworkWhenTheNicAnalysisNamedOneAndNothingElseMoved) {
  CauseEvidence ev = Quiet();
  ev.network_named = true;
  ev.network_text = "network (mlx5_0 port 1: port_xmit_wait +48213)\n\x1b[2J";
  const CauseVerdict v = JudgeLateCause(ev);
  ASSERT_EQ(v.Cause(), LateCause::kNetwork);
  const std::string s = CauseSentence(v);
  EXPECT_THAT(s, HasSubstr("cause: network: network (mlx5_0 port 1: port_xmit_wait +48213)\\x0a"
                           "\\x1b[2J; no host or GPU figure explains the 10.0 ms late per step"));
  EXPECT_THAT(s, HasSubstr("what to do: check the NIC or link named"));
  EXPECT_EQ(s.find('\n'), std::string::npos);
  EXPECT_EQ(s.find('\x1b'), std::string::npos);
}

TEST(LateCause, AHostCauseThatExplainsTheLatenessWinsOverTheNetwork) {
  CauseEvidence ev = Quiet();
  ev.network_named = true;
  ev.network_text = "network (mlx5_0 port 1: port_xmit_wait +48213)";
  ev.runq_wait_ms.now = 8;
  const CauseVerdict v = JudgeLateCause(ev);
  ASSERT_EQ(v.Cause(), LateCause::kHostCpu);
  EXPECT_EQ(v.also.cause, LateCause::kNetwork);
  EXPECT_THAT(CauseSentence(v), HasSubstr("; also network: network (mlx5_0 port 1"));
}

TEST(LateCause, GpuAndHostWaitAtOnce) {
  CauseEvidence ev = Quiet();
  ev.compute_ms.now = 88;  // +8
  ev.gpu_idle_ms.now = 9;  // +6
  const CauseVerdict v = JudgeLateCause(ev);
  ASSERT_EQ(v.Cause(), LateCause::kGpuSlower);
  EXPECT_EQ(v.also.cause, LateCause::kHostWait);
  EXPECT_THAT(CauseSentence(v), HasSubstr("; also GPU waiting for the host (input pipeline or "
                                          "host code): GPU idle before the collective 9.00 ms"));
}

// The share bar: a cause must explain at least half of the lateness per step.
TEST(LateCause, ExplainedShareEdge) {
  CauseEvidence ev = Quiet();
  ev.runq_wait_ms = Fig(5, 0, 0);
  EXPECT_EQ(JudgeLateCause(ev).Cause(), LateCause::kHostCpu);
  ev.runq_wait_ms.now = 4.99;
  const CauseVerdict v = JudgeLateCause(ev);
  EXPECT_EQ(v.Cause(), LateCause::kUnknown);
  EXPECT_THAT(v.unknown_reason, HasSubstr("largest: run-queue wait 4.99 ms per step (usual "
                                          "0.00 ms): +4.99 ms, 49 %"));
  LateCauseParams p;
  p.min_explained_share = 0.4;
  EXPECT_EQ(JudgeLateCause(ev, p).Cause(), LateCause::kHostCpu);
}

// The noise floor: an excess under 1 % of the step is not claimed, even when it is most of a
// small lateness.
TEST(LateCause, NoiseFloorEdge) {
  LateCauseParams p;
  p.min_late_share = 0.01;
  CauseEvidence ev = Quiet();
  ev.late_ms = 1.5;
  ev.runq_wait_ms = Fig(1.0, 0, 0);
  EXPECT_EQ(JudgeLateCause(ev, p).Cause(), LateCause::kHostCpu);
  ev.runq_wait_ms.now = 0.99;
  const CauseVerdict v = JudgeLateCause(ev, p);
  EXPECT_EQ(v.Cause(), LateCause::kUnknown);
  EXPECT_THAT(v.unknown_reason, HasSubstr("under the noise floor of 1 % of the 100 ms step"));
}

// The figure's own noise: the excess must be at least four times the spread of its usual.
TEST(LateCause, UsualSpreadEdge) {
  CauseEvidence ev = Quiet();
  ev.runq_wait_ms = Fig(6, 1, 1.25);
  EXPECT_EQ(JudgeLateCause(ev).Cause(), LateCause::kHostCpu);
  ev.runq_wait_ms.spread = 1.3;
  const CauseVerdict v = JudgeLateCause(ev);
  EXPECT_EQ(v.Cause(), LateCause::kUnknown);
  EXPECT_THAT(v.unknown_reason, HasSubstr("within its usual spread of 1.30 ms"));
}

TEST(LateCause, LatenessWithinNoiseIsNotJudged) {
  CauseEvidence ev = Quiet();
  ev.late_ms = 2.4;
  ev.runq_wait_ms = Fig(2.4, 0, 0);
  const CauseVerdict v = JudgeLateCause(ev);
  EXPECT_EQ(v.Cause(), LateCause::kUnknown);
  EXPECT_THAT(v.unknown_reason, HasSubstr("2.40 ms late per step is within noise (under 2.5 % of"));
  ev.late_ms = 2.5;
  ev.runq_wait_ms.now = 2.5;
  EXPECT_EQ(JudgeLateCause(ev).Cause(), LateCause::kHostCpu);
}

TEST(LateCause, TheUsualLatenessIsSubtracted) {
  CauseEvidence ev = Quiet();
  ev.late_ms = 18;
  ev.late_usual_ms = 8;  // 10 beyond its usual
  ev.runq_wait_ms = Fig(5.2, 0.2, 0);
  const CauseVerdict v = JudgeLateCause(ev);
  EXPECT_EQ(v.Cause(), LateCause::kHostCpu);
  EXPECT_DOUBLE_EQ(v.late_ms, 10);
}

TEST(LateCause, TooFewStepsAreNotJudged) {
  CauseEvidence ev = PowerCapped();
  ev.steps = 2;
  const CauseVerdict v = JudgeLateCause(ev);
  EXPECT_EQ(v.Cause(), LateCause::kUnknown);
  EXPECT_EQ(v.unknown_reason, "only 2 steps in the late span: too few to judge");
}

// Scattered small rises, each under the bar: nothing is claimed, not even their sum.
TEST(LateCause, SmallRisesEverywhereAreNotClaimed) {
  CauseEvidence ev = Quiet();
  ev.compute_ms.now = 82;
  ev.gpu_idle_ms.now = 5;
  ev.runq_wait_ms.now = 2;
  ev.cgroup_memory_some_ms.now = 2;
  ev.throttled_ms.now = 2;
  ev.gpu.reasons_now = Seen(12, kNvmlReasonSwPowerCap, 12);  // a busy GPU at its power cap
  EXPECT_EQ(JudgeLateCause(ev).Cause(), LateCause::kUnknown);
}

TEST(LateCause, WithoutCuptiTheHostIsStillJudgedAndTheGapSaid) {
  CauseEvidence ev = Quiet();
  ev.compute_ms = SpanFigure{};
  ev.gpu_idle_ms = SpanFigure{};
  ev.peer_compute_ms = -1;
  ev.peer_gpu_idle_ms = -1;
  ev.missing.cupti = "no CUPTI: the plugin's GPU activity is off";
  ev.runq_wait_ms.now = 8;
  const CauseVerdict v = JudgeLateCause(ev);
  ASSERT_EQ(v.Cause(), LateCause::kHostCpu);
  EXPECT_THAT(CauseSentence(v),
              HasSubstr("; GPU not judged: no CUPTI: the plugin's GPU activity is off; host wait "
                        "not judged: no CUPTI"));
  // With nothing else moving: unknown, and the reason says the GPU could not be judged.
  ev.runq_wait_ms.now = 0.2;
  ev.gpu = GpuState{};
  ev.gpu.unknown_reason = "no NVML: libnvidia-ml.so.1 not found";
  const CauseVerdict u = JudgeLateCause(ev);
  EXPECT_EQ(u.Cause(), LateCause::kUnknown);
  EXPECT_THAT(u.unknown_reason, HasSubstr("GPU not judged: no CUPTI"));
}

// The GPU idled longer but the run-queue wait is unreadable: it could be the host's own work or
// its threads waiting to run. Never a guess.
TEST(LateCause, IdleGrowthWithoutTheRunQueueWaitIsUnknown) {
  CauseEvidence ev = Quiet();
  ev.gpu_idle_ms.now = 13;
  ev.runq_wait_ms = SpanFigure{};
  ev.invol_switches = SpanFigure{};
  ev.major_faults = SpanFigure{};
  ev.missing.proc = "no /proc/4711: sentineld does not share the host's PID namespace";
  const CauseVerdict v = JudgeLateCause(ev);
  EXPECT_EQ(v.Cause(), LateCause::kUnknown);
  EXPECT_THAT(
      v.unknown_reason,
      HasSubstr("the GPU idled 10.0 ms per step more before its collective but the run-queue "
                "wait was not read (no /proc/4711: sentineld does not share the host's PID "
                "namespace)"));
}

TEST(LateCause, NothingReadable) {
  CauseEvidence ev;
  ev.late_ms = 10;
  ev.step_ms = 100;
  ev.steps = 12;
  ev.missing.cupti = "no CUPTI";
  ev.missing.proc = "no /proc";
  ev.missing.cgroup = "no cgroup";
  ev.missing.node_psi = "no PSI";
  const CauseVerdict v = JudgeLateCause(ev);
  EXPECT_EQ(v.Cause(), LateCause::kUnknown);
  EXPECT_EQ(v.unknown_reason,
            "nothing could be judged: GPU not judged: no CUPTI; CPU quota not judged: no cgroup; "
            "host CPU not judged: no /proc; memory pressure not judged: no cgroup; host wait not "
            "judged: no CUPTI");
}

TEST(LateCause, HostileLatenessAndStep) {
  for (double bad : {kNaN, kInf, -kInf, -1.0, 1e300}) {
    CauseEvidence ev = PowerCapped();
    ev.late_ms = bad;
    EXPECT_EQ(JudgeLateCause(ev).unknown_reason, "the lateness per step was not measured") << bad;
    ev = PowerCapped();
    ev.step_ms = bad;
    EXPECT_EQ(JudgeLateCause(ev).Cause(), LateCause::kUnknown) << bad;
    ev = PowerCapped();
    ev.step_ms = 0;
    EXPECT_EQ(JudgeLateCause(ev).Cause(), LateCause::kUnknown);
  }
}

TEST(LateCause, HostileFiguresAreNotMeasurements) {
  for (double bad : {kNaN, kInf, -5.0, 1e300}) {
    CauseEvidence ev = Quiet();
    ev.runq_wait_ms = Fig(bad, 0.2, 0.05);
    ev.compute_ms = Fig(80, bad, 0.5);  // the peers still give the GPU's reference
    ev.throttled_ms = Fig(0, 0, bad);   // a garbage spread: only the floor guards it
    const CauseVerdict v = JudgeLateCause(ev);
    EXPECT_EQ(v.Cause(), LateCause::kUnknown) << bad;
    EXPECT_THAT(v.unknown_reason, HasSubstr("host CPU not judged")) << bad;
    EXPECT_THAT(v.unknown_reason, Not(HasSubstr("GPU not judged"))) << bad;
  }
  // A huge but finite run-queue wait is claimed at most as all of the lateness.
  CauseEvidence ev = Quiet();
  ev.runq_wait_ms = Fig(1e8, 0.2, 0.05);
  const CauseVerdict v = JudgeLateCause(ev);
  EXPECT_EQ(v.Cause(), LateCause::kHostCpu);
  EXPECT_DOUBLE_EQ(v.named.share, 1);
  EXPECT_LT(CauseSentence(v).size(), 600u);
}

TEST(LateCause, HostileNvmlAndText) {
  CauseEvidence ev = PowerCapped();
  ev.gpu.reasons_now = Seen(12, ~0ULL, 12);  // every bit: the most telling decoded one
  ev.gpu.reasons_usual.polls = -4;
  ev.gpu.reasons_usual.set[2] = 1LL << 62;
  ev.gpu.temperature_c = kNaN;
  ev.gpu.power_w = -3;
  ev.gpu.new_xids = -7;
  ev.gpu.pcie_gen = std::numeric_limits<int64_t>::max();
  ev.gpu.unknown_reason = std::string(5000, 'x');
  ev.network_named = true;
  ev.network_text = std::string(100000, '\x1b');
  const CauseVerdict v = JudgeLateCause(ev);
  ASSERT_EQ(v.Cause(), LateCause::kGpuSlower);
  EXPECT_EQ(v.named.detail, "HW power brake");
  const std::string s = CauseSentence(v);
  EXPECT_THAT(s, Not(HasSubstr("temperature")));
  EXPECT_THAT(s, Not(HasSubstr("XID")));
  EXPECT_THAT(s, Not(HasSubstr("PCIe")));
  EXPECT_LT(s.size(), 2000u);  // the network text is cut before it is escaped
  EXPECT_EQ(s.find('\x1b'), std::string::npos);
  // A hostile reason for a missing NVML is cut too.
  ev.gpu.known = false;
  EXPECT_LT(CauseSentence(JudgeLateCause(ev)).size(), 2000u);
  // Negative step counts.
  ev.steps = -5;
  EXPECT_EQ(JudgeLateCause(ev).unknown_reason, "only 0 steps in the late span: too few to judge");
}

}  // namespace
}  // namespace sentinel::collector
