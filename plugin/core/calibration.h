// GpuClockCalibration: maps KernelCh pTimer values (GPU %globaltimer ns) onto CLOCK_MONOTONIC.
// offset = running minimum over KernelCh starts of (host ns at the start callback - pTimer).
// The callback always runs after the GPU wrote pTimer, so every sample is >= the true offset and
// the minimum converges on it from above; the error is the smallest proxy polling delay seen.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>

namespace sentinel::plugin {

class GpuClockCalibration {
 public:
  void Reset() noexcept { offset_.store(kUnset, std::memory_order_relaxed); }
  // Hot path: a relaxed CAS loop that only ever lowers the value. relaxed is enough: the offset
  // is a self-contained number (no other memory is published with it).
  void Observe(int64_t host_ns, uint64_t gpu_ns) noexcept {
    if (gpu_ns == 0) return;
    int64_t sample = host_ns - static_cast<int64_t>(gpu_ns);
    int64_t cur = offset_.load(std::memory_order_relaxed);
    while (sample < cur && !offset_.compare_exchange_weak(cur, sample, std::memory_order_relaxed)) {
    }
  }
  bool Valid() const noexcept { return offset_.load(std::memory_order_relaxed) != kUnset; }
  // GPU ns -> host CLOCK_MONOTONIC ns (0 when no sample yet).
  int64_t ToHost(uint64_t gpu_ns) const noexcept {
    int64_t off = offset_.load(std::memory_order_relaxed);
    return off == kUnset ? 0 : static_cast<int64_t>(gpu_ns) + off;
  }
  int64_t offset() const noexcept { return offset_.load(std::memory_order_relaxed); }

 private:
  static constexpr int64_t kUnset = std::numeric_limits<int64_t>::max();
  std::atomic<int64_t> offset_{kUnset};
};

}  // namespace sentinel::plugin
