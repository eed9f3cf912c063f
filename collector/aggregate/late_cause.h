// Why a rank is late: the cause named from the evidence the node can read about the rank's process,
// cgroup and GPU, with the figures quoted and what to do. Pure data and functions: the daemon
// turns its readers' samples (collector/evidence/, the CUPTI activity of gpu_activity.h, the NIC
// analysis of slow_cause.h) into a CauseEvidence and appends CauseSentence to the straggler and
// slow-node alerts.
//
// The rule: every cause has an *excess time per step* measured from its own evidence against the
// rank's usual (before the late span) and, for GPU figures, against its local peers. A cause is
// named only when its excess explains at least `min_explained_share` of the rank's lateness per
// step AND clears both the noise floor (a share of the step) and the spread of the figure's own
// usual. No absolute threshold: the step, the lateness and the rank's own history set every scale.
// When no cause clears its bars the verdict is "unknown", with one line saying why.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "collector/evidence/nvml_api.h"

namespace sentinel::collector {

// The causes, in the order of the `cause` label's fixed list (LateCauseName): an export of one
// info series per late rank whose label takes only these values is bounded.
enum class LateCause : uint8_t {
  kUnknown = 0,
  kGpuSlower = 1,       // the same kernels take longer than the rank's usual and its peers'
  kHostCpu = 2,         // the rank's threads wait to run (a noisy neighbour, too many threads)
  kCpuQuota = 3,        // its container's CPU quota throttles it (cgroup cpu.max)
  kHostWait = 4,        // the GPU sits idle before the collective while the host is not waiting
                        // to run: input pipeline, storage, checkpoint, host code
  kMemoryPressure = 5,  // reclaim and major faults stall the rank's host work
  kNetwork = 6,         // the slow-cause analysis named a NIC or link (slow_cause.h)
};
inline constexpr int kLateCauses = 7;

// The label value: "unknown", "gpu_slower", "host_cpu", "cpu_quota", "host_wait",
// "memory_pressure", "network". Fixed: dashboards and rules match them.
const char* LateCauseName(LateCause cause);
// For people: "unknown", "GPU slower", "host CPU contention", "CPU quota throttling",
// "GPU waiting for the host", "memory pressure", "network".
const char* LateCauseTitle(LateCause cause);

// NVML's clocks-event (formerly "clocks throttle") reason bits, as NVIDIA's NVML reference
// documents them (nvmlClocksEventReasons; values unchanged since the throttle-reason names).
// Only the ones that slow a busy GPU are decoded; GpuIdle (0x1) says nothing about a slow kernel.
inline constexpr uint64_t kNvmlReasonAppClocks = nvml::kReasonApplicationsClocksSetting;
inline constexpr uint64_t kNvmlReasonSwPowerCap = nvml::kReasonSwPowerCap;
inline constexpr uint64_t kNvmlReasonHwSlowdown = nvml::kReasonHwSlowdown;
inline constexpr uint64_t kNvmlReasonSyncBoost = nvml::kReasonSyncBoost;
inline constexpr uint64_t kNvmlReasonSwThermal = nvml::kReasonSwThermalSlowdown;
inline constexpr uint64_t kNvmlReasonHwThermal = nvml::kReasonHwThermalSlowdown;
inline constexpr uint64_t kNvmlReasonHwPowerBrake = nvml::kReasonHwPowerBrakeSlowdown;

// A figure per step: its mean over the late span, its mean over the rank's usual span (the steps
// before the late run began, not the ones just before the span: by then the usual would be the
// late run itself), and the robust standard deviation of the usual span's per-poll values (each
// poll's per-step mean). Negative, NaN, infinite or implausibly large (over kMaxCauseFigure):
// not measured.
struct SpanFigure {
  double now = -1;
  double usual = -1;
  double spread = -1;  // optional: without it only the noise floor guards the figure
};

// Any figure above this (ms, counts, MHz, W per step) is not a measurement but garbage.
inline constexpr double kMaxCauseFigure = 1e9;

// How many polls had each of the low 8 clocks-event reason bits set.
struct ReasonCounts {
  int64_t polls = 0;
  std::array<int64_t, 8> set{};  // set[i]: polls with bit (1 << i)

  void Add(uint64_t reasons) {
    ++polls;
    for (size_t i = 0; i < set.size(); ++i) set[i] += static_cast<int64_t>((reasons >> i) & 1);
  }
};

// NVML over the span, for the GPU the rank runs on (mapped by PCI bus id or device UUID).
struct GpuState {
  bool known = false;          // false: NVML could not be read for this GPU ...
  std::string unknown_reason;  // ... and why, one line ("libnvidia-ml.so.1 not found", "GPU lost")
  // nvmlDeviceGetClockInfo(NVML_CLOCK_SM), MHz: its mean over the span and the usual span.
  SpanFigure sm_clock_mhz;
  double sm_clock_max_mhz = -1;  // nvmlDeviceGetMaxClockInfo(NVML_CLOCK_SM)
  // nvmlDeviceGetCurrentClocksEventReasons (ThrottleReasons on old drivers), read once per poll:
  // over the late run (since it began, not only the span: one or two samples are chance) and over
  // the usual span. A bit that flickers on every busy GPU (a power cap brushed now and then) is
  // thus not read as the reason, and one that rose with the slowdown is.
  bool reasons_known = false;
  ReasonCounts reasons_now;
  ReasonCounts reasons_usual;
  double temperature_c = -1;  // nvmlDeviceGetTemperature(GPU), mean over the span
  double power_w = -1;        // nvmlDeviceGetPowerUsage / 1000, mean over the span
  double power_limit_w = -1;  // nvmlDeviceGetEnforcedPowerLimit / 1000
  int64_t new_xids = -1;      // XID events over the span (nvmlEventTypeXidCriticalError); -1 n/a
  int64_t last_xid = -1;      // the last one's code
  int64_t new_uncorrected_ecc = -1;  // volatile uncorrected ECC errors' growth over the span
  int64_t pcie_gen = -1;             // nvmlDeviceGetCurrPcieLinkGeneration
  int64_t pcie_gen_max = -1;         // nvmlDeviceGetMaxPcieLinkGeneration
  int64_t pcie_width = -1;           // nvmlDeviceGetCurrPcieLinkWidth
  int64_t pcie_width_max = -1;       // nvmlDeviceGetMaxPcieLinkWidth
  int64_t pcie_replay_delta = -1;    // nvmlDeviceGetPcieReplayCounter's growth over the span
};

// One line per source that could not be read (empty: available), e.g. "no CUPTI: the plugin's GPU
// activity is off", "no /proc/4711: sentineld does not share the host's PID namespace",
// "cgroup unreadable: permission denied", "no PSI: the kernel has no /proc/pressure".
struct MissingSources {
  std::string cupti;     // the rank's kernels and GPU idle
  std::string proc;      // /proc/<pid>/task/*/schedstat, /proc/<pid>/stat and status
  std::string cgroup;    // the process's cgroup: cpu.stat, cpu.max, cpu/memory/io.pressure
  std::string node_psi;  // /proc/pressure/{cpu,memory,io}
};

struct CauseEvidence {
  // The lateness to explain (the straggler detector's figures, straggler_text.h / wait_evidence.h):
  // the rank's late time per step over the late span, in ms, beyond `late_usual_ms` (its usual
  // lateness before the late run; negative: none known, the figure is already beyond its usual).
  double late_ms = -1;
  double late_usual_ms = -1;
  double step_ms = -1;  // the step (or the compute segment between collectives), usual, in ms
  int64_t steps = 0;    // steps in the late span

  // GPU kernels (the CUPTI activity the plugin already collects, gpu_activity.h), ms per step.
  SpanFigure compute_ms;         // the rank's compute-kernel time (NCCL's kernels excluded)
  double peer_compute_ms = -1;   // the median of its local peers' over the same span
  SpanFigure gpu_idle_ms;        // its GPU idle (no kernel running) before its collective
  double peer_gpu_idle_ms = -1;  // the median of its local peers'

  // Host, per step (collector/evidence/ readers). Run-queue wait: /proc/<pid>/task/*/schedstat's
  // second field (run_delay), of the thread that launches the kernels (the process's busiest
  // thread): summed over every thread, waits that overlap would be counted many times. Under a
  // CPU quota a throttled thread waits in its run queue, so this includes throttled time.
  SpanFigure runq_wait_ms;
  SpanFigure invol_switches;      // nonvoluntary_ctxt_switches of the process's threads
  SpanFigure throttled_ms;        // cgroup cpu.stat throttled_usec growth / 1000 per step
  double cpu_quota_cpus = -1;     // cpu.max quota / period (v1: cfs_quota_us / cfs_period_us);
                                  // 0: no quota ("max"); negative: not read
  SpanFigure cgroup_cpu_some_ms;  // the cgroup's cpu.pressure "some" total growth per step
  SpanFigure node_cpu_some_ms;    // /proc/pressure/cpu "some"
  SpanFigure cgroup_memory_some_ms;
  SpanFigure node_memory_some_ms;
  SpanFigure cgroup_io_some_ms;
  SpanFigure node_io_some_ms;
  SpanFigure major_faults;  // /proc/<pid>/stat majflt growth per step

  GpuState gpu;

  // The slow-cause analysis (slow_cause.h) named a NIC port or link for this rank's slow span,
  // and its one-line verdict (SlowSpanVerdict). Text from outside: escaped and bounded here.
  bool network_named = false;
  std::string network_text;

  MissingSources missing;
};

struct LateCauseParams {
  // A cause must explain at least this share of the lateness per step: below it, something else
  // made most of the rank late and naming this one would send the operator the wrong way.
  double min_explained_share = 0.5;
  // ... and its excess must be at least this share of the step. A fifth of the smallest slowdown
  // the straggler detector alerts on (straggler-rel, 5 %): any cause worth naming for a flagged
  // rank explains half of its reference (2.5 %) or more, so this floor never hides a real cause,
  // while it keeps figures that are tiny against the step (a 0.05 ms scheduler blip at 100 ms
  // steps, a rounding of cumulative counters) from being claimed.
  double noise_floor_share = 0.01;
  // ... and at least this many standard deviations of the figure's own usual (SpanFigure::spread,
  // of per-poll values: the span's mean over several polls is quieter still). Four, not three: the
  // judgement runs for every flagged rank at every poll, and a rank flagged by chance is late
  // because its figures were high, so a three-sigma excess came up about once in a few thousand
  // such judgements in the evaluation's 5 % jitter (tests/eval/cause_eval.h).
  double spread_factor = 4.0;
  // A lateness under this share of the step is within noise: nothing is judged. The integrator
  // passes straggler-rel / 2 (the detector's CUSUM reference); below it no alert fires.
  double min_late_share = 0.025;
  int64_t min_steps = 3;  // fewer steps in the late span: too early to judge
  // A clock counts as the GPU's reason when it fell by at least this share of the slowdown it
  // would explain (kernels 15 % longer, clock at least 7.5 % lower than its usual).
  double clock_explains_share = 0.5;
  // A reason bit counts when it was set in at least half of at least this many polls.
  int64_t min_reason_polls = 3;
};

// One candidate cause's figures (also the "also" cause).
// One cause's figures: the named one, or a second one that also cleared every bar.
struct CauseFinding {
  LateCause cause = LateCause::kUnknown;
  double excess_ms = 0;  // per step, against the usual (and the peers for GPU figures)
  double share = 0;      // excess / lateness, in [0, 1]
  std::string detail;    // "power cap", "storage (io pressure)", "why unknown: no NVML ..."
  std::string figures;   // the figure whose excess explains: "run-queue wait 4.1 ms per step
                         // (usual 0.2 ms)"
  std::string support;   // figures that back it: "SM clock 1710 MHz (usual 1980 MHz), ..."
};

struct CauseVerdict {
  CauseFinding named;          // cause kUnknown: nothing named
  std::string what_to_do;      // one sentence for the named cause
  double late_ms = -1;         // the lateness to explain, per step (-1: not measured)
  std::string unknown_reason;  // nothing named: why, one line
  CauseFinding also;           // a second cause that cleared every bar (kUnknown: none)
  std::string not_judged;      // causes that could not be judged and why ("GPU not judged: ...")

  LateCause Cause() const { return named.cause; }
};

CauseVerdict JudgeLateCause(const CauseEvidence& ev, const LateCauseParams& params = {});

// One line for the alerts: "cause: host CPU contention: run-queue wait 4.1 ms per step (usual
// 0.2 ms) explains 85 % of 4.8 ms late per step; what to do: ...", or "cause: unknown: <why>".
std::string CauseSentence(const CauseVerdict& verdict);

// The reason bits of `reasons` that slow a busy GPU, for people: "SW power cap, HW slowdown".
std::string NvmlReasonsText(uint64_t reasons);

}  // namespace sentinel::collector
