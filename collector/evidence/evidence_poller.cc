// See evidence_poller.h.
#include "collector/evidence/evidence_poller.h"

#include <utility>

#include "spdlog/spdlog.h"

#include "collector/base/thread.h"

namespace sentinel::collector {

void GpuHistory::Add(const std::vector<GpuSample>& poll) {
  absl::MutexLock lock(&mu_);
  polls_.Push(poll);
}

std::vector<GpuSample> GpuHistory::SamplesOfPid(uint32_t pid, int64_t from_ns,
                                                int64_t to_ns) const {
  absl::MutexLock lock(&mu_);
  // The GPU is the one the newest poll that lists the pid names: a process moves GPUs only when
  // it is restarted (a new pid), and NVML lists it only once it made a CUDA context.
  std::string bus;
  for (size_t k = polls_.size(); k > 0 && bus.empty(); --k) {
    const GpuSample* g = GpuOfPid(polls_[k - 1], pid);
    if (g != nullptr) bus = g->bus_id;
  }
  std::vector<GpuSample> out;
  if (bus.empty()) return out;
  for (size_t k = 0; k < polls_.size(); ++k) {
    const std::vector<GpuSample>& poll = polls_[k];
    if (poll.empty() || poll.front().mono_ns < from_ns || poll.front().mono_ns > to_ns) continue;
    const GpuSample* g = GpuOfBusId(poll, bus);
    if (g != nullptr) out.push_back(*g);
  }
  return out;
}

size_t GpuHistory::polls() const {
  absl::MutexLock lock(&mu_);
  return polls_.size();
}

EvidencePoller::EvidencePoller(EvidenceOptions options, const Clock* clock,
                               std::function<std::vector<uint32_t>()> live_pids)
    : options_(std::move(options)), clock_(clock), live_pids_(std::move(live_pids)), host_([this] {
        HostSamplerOptions o;
        o.roots = options_.roots;
        o.max_pids = options_.max_pids;
        return o;
      }()) {
  absl::MutexLock lock(&mu_);
  if (options_.period_ns <= 0) {
    availability_.host = "the evidence poll is off (--evidence-poll 0)";
    availability_.nvml = availability_.host;
  } else if (options_.nvml_library == "off") {
    availability_.nvml = "NVML is off (--nvml-library off)";
  }
}

EvidencePoller::~EvidencePoller() { Stop(); }

bool EvidencePoller::OpenNvml(int64_t now_ns) {
  nvml_tried_ns_ = now_ns;
  auto reader = std::make_unique<NvmlReader>(options_.nvml_library);
  if (!reader->Open()) {
    // Logged once; the causes say it each time (availability()).
    if (!nvml_warned_) {
      spdlog::warn("no GPU state in late-rank causes (tried again every {} s): {}",
                   kNvmlRetryNs / 1000000000, reader->unavailable_reason());
      nvml_warned_ = true;
    }
    absl::MutexLock lock(&mu_);
    availability_.nvml = reader->unavailable_reason();
    return false;
  }
  for (const std::string& note : reader->notes()) spdlog::info("NVML: {}", note);
  if (nvml_warned_) spdlog::info("NVML is available now");
  nvml_ = std::move(reader);
  absl::MutexLock lock(&mu_);
  availability_.nvml.clear();
  return true;
}

void EvidencePoller::Start() {
  if (options_.period_ns <= 0 || thread_.joinable()) return;
  if (options_.nvml_library != "off") OpenNvml(clock_->MonoNs());
  thread_ = StartThread("sentineld-evid", [this] { Loop(); });
}

void EvidencePoller::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void EvidencePoller::PollOnce() {
  const int64_t now = clock_->MonoNs();
  host_.Poll(live_pids_(), now);
  if (nvml_ == nullptr && options_.nvml_library != "off" && options_.period_ns > 0 &&
      now - nvml_tried_ns_ >= kNvmlRetryNs) {
    OpenNvml(now);
  }
  if (nvml_ != nullptr) gpus_.Add(nvml_->Poll(now));
}

EvidenceAvailability EvidencePoller::availability() const {
  absl::MutexLock lock(&mu_);
  return availability_;
}

void EvidencePoller::Loop() {
  for (;;) {
    PollOnce();  // outside mu_: /proc, cgroup and NVML reads may take milliseconds
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Nanoseconds(options_.period_ns))) {
      return;
    }
  }
}

}  // namespace sentinel::collector
