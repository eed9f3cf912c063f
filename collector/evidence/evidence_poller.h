// sentineld's evidence of why a rank is late, polled from one thread of its own (never the job's):
// every live rank process's /proc and cgroup files (HostSampler) and the node's GPUs through NVML
// (NvmlReader), once per --evidence-poll. The aggregator reads the histories when it judges a late
// rank's cause (aggregate/cause_evidence.h); each history has its own lock, so a poll never holds
// the aggregator's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "collector/base/clock.h"
#include "collector/base/ring.h"
#include "collector/evidence/gpu_sample.h"
#include "collector/evidence/host_sampler.h"
#include "collector/evidence/nvml_reader.h"

namespace sentinel::collector {

// The node's GPUs over time: one entry per NVML poll (every GPU's sample), bounded.
class GpuHistory {
 public:
  explicit GpuHistory(size_t polls = 300) : polls_(polls) {}
  void Add(const std::vector<GpuSample>& poll) ABSL_LOCKS_EXCLUDED(mu_);
  // The samples of the GPU that runs `pid` (as the newest poll listing it says) taken in
  // [from_ns, to_ns], oldest first; empty when no poll lists the pid.
  std::vector<GpuSample> SamplesOfPid(uint32_t pid, int64_t from_ns, int64_t to_ns) const
      ABSL_LOCKS_EXCLUDED(mu_);
  size_t polls() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  Ring<std::vector<GpuSample>> polls_ ABSL_GUARDED_BY(mu_);
};

struct EvidenceOptions {
  int64_t period_ns = 1000000000;  // 0: off (no thread; every source says so)
  EvidenceRoots roots;
  std::string nvml_library = "libnvidia-ml.so.1";  // "off": no NVML
  size_t max_pids = 1024;
};

// Why a source gives no evidence on this node (empty: it does), one line each; fixed at Start.
struct EvidenceAvailability {
  std::string host;  // the /proc and cgroup poll
  std::string nvml;  // NVML
};

class EvidencePoller {
 public:
  // `live_pids` returns the pids of the rank processes connected now (called on the poll thread;
  // it may take the aggregator's lock briefly). `clock` outlives the poller.
  EvidencePoller(EvidenceOptions options, const Clock* clock,
                 std::function<std::vector<uint32_t>()> live_pids);
  ~EvidencePoller();
  EvidencePoller(const EvidencePoller&) = delete;
  EvidencePoller& operator=(const EvidencePoller&) = delete;

  // Opens NVML (its reason logged once when unavailable) and starts the thread; nothing when off.
  void Start();
  void Stop();
  // One poll now, on the caller's thread (tests; the thread calls it every period).
  void PollOnce();

  const HostSampler& host() const { return host_; }
  int64_t period_ns() const { return options_.period_ns; }
  const GpuHistory& gpus() const { return gpus_; }
  EvidenceAvailability availability() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop();

  const EvidenceOptions options_;
  const Clock* const clock_;
  const std::function<std::vector<uint32_t>()> live_pids_;
  HostSampler host_;
  GpuHistory gpus_;
  // Touched only by the polling thread. Null when off or not (yet) available: NVML is opened
  // again every kNvmlRetryNs (the driver may load after sentineld starts).
  bool OpenNvml(int64_t now_ns);
  static constexpr int64_t kNvmlRetryNs = 30LL * 1000000000;
  std::unique_ptr<NvmlReader> nvml_;
  int64_t nvml_tried_ns_ = 0;
  bool nvml_warned_ = false;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  EvidenceAvailability availability_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace sentinel::collector
