// The late-cause evaluation (collector/aggregate/late_cause.h): a per-step model of the ranks of a
// job on N nodes x R ranks, one true straggler per cause family, and noise families where nothing
// may be claimed. Each family produces the evidence its real counterpart would, with noise on
// every rank and never kinder (the node's PSI moves for every rank on it, a CPU hog also delays the
// rank beside it, a power cap also slows the NCCL kernels, a throttled thread's wait shows in its
// run queue, GPUs brush their power cap now and then). CauseEvidence is built as the daemon builds
// it from its readers: per-step means over the late span (the polls covering the last 16 steps,
// 1 s polls) against the 60 polls before the late run began, each figure's spread over those
// polls, NVML sampled once per poll. A rank is judged when a stand-in for the straggler detector
// flags it: its median lateness beyond its usual over the span at least 3/4 of straggler-rel of its
// compute at three polls in a row (the detector's own floor and its 2 s late run), without the
// detector's noise threshold (far stricter).
//
//   cause_eval --seeds 20 --nodes 8,64 --ranks 8 [--family SUBSTR]... [--check]
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "collector/aggregate/late_cause.h"

namespace sentinel::collector::eval {

enum class CauseFamily : uint8_t {
  kPowerCap,
  kThermal,
  kCpuContention,
  kCpuQuota,
  kInputStall,
  kMemoryPressure,
  kSlowLink,
  kNoiseJitter,
  kNoiseScheduler,
  kNoisePsi,
  kNoiseNvml,
  kNoiseSlowStep,
};

// Columns of the confusion table: the cause named, the GPU's split by its reason.
enum CauseColumn : uint8_t {
  kColUnknown,
  kColGpuPowerCap,
  kColGpuThermal,
  kColGpuOther,       // GPU slower, another reason named
  kColGpuWhyUnknown,  // GPU slower, its reason not (yet) shown by NVML
  kColHostCpu,
  kColCpuQuota,
  kColHostWait,
  kColMemory,
  kColNetwork,
  kCauseColumns,
};

struct CauseFamilyInfo {
  CauseFamily family;
  const char* name;
  bool noise;         // no straggler: nothing may be claimed
  CauseColumn right;  // the cause to name (cause families)
};

const std::vector<CauseFamilyInfo>& CauseFamilies();

struct CauseEvalConfig {
  int nodes = 8;
  int ranks = 8;  // per node
  int seeds = 4;
  uint64_t first_seed = 1;
  double warmup_s = 60;  // before the onset: the usual span
  double after_s = 30;   // judged after the onset (noise families: this long after the warm-up)
  LateCauseParams params;
};

struct FamilyResult {
  CauseFamilyInfo info;
  int runs = 0;
  // Cause families: per run, the first cause named for the straggler (unknown: never named; a
  // "GPU slower (why unknown)" counts only when no reason followed).
  // Noise families: per judged rank-poll, the verdict.
  std::array<int, kCauseColumns> confusion{};
  int right = 0;             // runs whose straggler got the right cause first and never a wrong one
  int64_t judged = 0;        // rank-polls judged (flagged by the stand-in detector)
  int64_t wrong = 0;         // judged rank-polls that named a wrong cause (noise: any cause)
  int64_t worst_judged = 0;  // noise families: the node's latest rank judged every poll anyway
  int64_t worst_claims = 0;  // ... and named a cause
  std::vector<double> latency_s;  // onset -> first poll naming the right cause
  std::string example;            // one alert sentence naming the right cause
};

FamilyResult RunCauseFamily(const CauseFamilyInfo& family, const CauseEvalConfig& config);

// The table for people.
std::string CauseTable(const std::vector<FamilyResult>& results, const CauseEvalConfig& config);

// The targets: every cause family's straggler right in >= 0.95 of runs, no wrong cause anywhere,
// nothing claimed in the noise families (on the flagged ranks). Empty when met, else why not.
std::string CauseTargetsMissed(const std::vector<FamilyResult>& results);

}  // namespace sentinel::collector::eval
