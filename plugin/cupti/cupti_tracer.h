// CuptiTracer: the CUPTI Activity API client. It owns a fixed pool of activity buffers (our own
// request/complete callbacks), flushes CUPTI every SENTINEL_CUPTI_FLUSH_MS from its own thread
// ("sentinel-cupti", never an NCCL or application thread), parses the records by prefix, and
// feeds GpuAccounting; closed windows become GpuWindow records and NCCL kernels KernelAttribution
// records, queued to the drainer.
//
// Coexistence (docs/cupti-verbs-facts.md "2. Living with Kineto"): no cuptiSubscribe, ever. The
// Activity API is process-global, so another tool (torch.profiler/Kineto, Nsight) that registers
// its own callbacks silently takes our records. We detect that as "NCCL made progress but no
// activity record reached us for SENTINEL_CUPTI_STARVE_MS" (and timestamps that are not on CUPTI's
// normal CLOCK_REALTIME clock as a foreign timestamp callback), step aside, and report the affected
// windows as not measured. While the evidence is pending, windows are held back rather than
// closed as idle. After SENTINEL_CUPTI_REARM_S we re-register and re-enable (0 = never).
//
// Thread-safety: the buffer callbacks may run on any thread (CUPTI's worker, application threads
// with per-thread buffers, ours inside FlushAll); they take one short mutex and never allocate.
// Everything else runs on the tracer thread, except AddStepBoundary (any thread).
//
// Settings: cupti_config.h. The process's one tracer, its thread and exit: cupti_runtime.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/cupti/cupti_api.h"
#include "plugin/cupti/cupti_config.h"
#include "plugin/cupti/gpu_accounting.h"
#include "plugin/cupti/kernel_class.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin::cupti {

enum class TracerState : int { kIdle = 0, kArmed = 1, kSteppedAside = 2, kOff = 3 };

class CuptiTracer {
 public:
  // Where output goes and what time it is: production wires these to the drainer and the
  // clocks; tests substitute their own.
  struct Env {
    std::function<int64_t()> mono_now;
    std::function<int64_t()> realtime_now;
    std::function<uint64_t()> nccl_progress;  // cumulative count of completed NCCL operations
    std::function<void(const SentinelWireGpuWindow&)> emit_window;
    std::function<void(const SentinelWireKernelAttribution&)> emit_attribution;
    uint32_t pid = 0;
  };

  CuptiTracer(const CuptiApi* api, const CuptiConfig& config, Env env);
  ~CuptiTracer();
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  // Registers the buffer callbacks and enables CONCURRENT_KERNEL (+ MEMCPY, MEMSET, MEMCPY2).
  // A failure turns the feature off: CUPTI present but unusable (no GPU/driver...).
  // Only one tracer may be armed per process (the callbacks are plain functions).
  Status Arm();
  // One flush period: flush CUPTI, parse completed buffers, detect a foreign owner, close windows.
  void Tick();
  // Last flush (forced) and close every window that ended by now.
  void Finish();
  // A step starts at t (CLOCK_MONOTONIC), from the collective records. Any thread. Ignored while
  // steps come from the SENTINEL_STEP_NVTX range.
  void AddStepBoundaries(const int64_t* times, size_t n);
  void AddStepBoundary(int64_t t) { AddStepBoundaries(&t, 1); }
  // Steps come from the NVTX range (SENTINEL_STEP_NVTX set, injection present, MARKER enabled).
  bool nvtx_steps() const { return nvtx_steps_.load(std::memory_order_relaxed); }

  TracerState state() const { return state_.load(std::memory_order_relaxed); }
  const std::string& off_reason() const { return off_reason_; }

  struct Counters {
    uint64_t records = 0;           // activity records parsed
    uint64_t records_dropped = 0;   // CUPTI dropped + no timestamps
    uint64_t buffers_declined = 0;  // request callbacks we answered with no buffer
    uint64_t buffers_completed = 0;
    uint64_t foreign_clock_records = 0;
    uint64_t step_asides = 0;
    uint64_t rearms = 0;
    uint64_t windows = 0;
    uint64_t attributions = 0;
    uint64_t attributions_suppressed = 0;
    uint64_t nvtx_steps = 0;  // step boundaries taken from SENTINEL_STEP_NVTX markers
  };
  Counters counters() const;
  int64_t clock_offset_ns() const { return clock_offset_ns_; }

  // For the benchmark: parse one completed buffer as the tracer thread would.
  void ParseBufferForTest(uint8_t* buffer, size_t valid_size) { ParseBuffer(buffer, valid_size); }
  GpuAccounting& accounting() { return accounting_; }

 private:
  static void RequestTrampoline(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CompleteTrampoline(void* ctx, uint32_t stream, uint8_t* buffer, size_t size,
                                 size_t valid_size);
  void OnRequest(uint8_t** buffer, size_t* size, size_t* max_records);
  void OnComplete(uint8_t* buffer, size_t valid_size);
  Status Register();
  void SampleClock();
  void DrainCompleted();
  void TakeStepBoundaries();
  void ParseBuffer(uint8_t* buffer, size_t valid_size);
  void ParseMarker(const uint8_t* rec, int64_t offset, int64_t now_cupti);
  void Emit(int64_t watermark);
  void StepAside(int64_t from);
  void EnableNvtxSteps();
  // Whether steps can come from SENTINEL_STEP_NVTX markers (enables MARKER when they can).
  Status EnableNvtxMarkers();

  const CuptiApi* api_;
  CuptiConfig config_;
  Env env_;
  KernelClassifier classifier_;
  GpuAccounting accounting_;
  AccountingOutput out_;
  std::atomic<TracerState> state_{TracerState::kIdle};
  std::string off_reason_;

  // Buffer pool; guarded by pool_mu_.
  std::mutex pool_mu_;
  std::vector<uint8_t*> free_;
  std::vector<std::pair<uint8_t*, size_t>> completed_;
  std::vector<std::pair<uint8_t*, size_t>> work_;  // tracer thread only
  std::vector<uint8_t*> all_buffers_;
  uint64_t declined_ = 0;     // guarded by pool_mu_
  uint64_t requests_ = 0;     // guarded by pool_mu_
  uint64_t completions_ = 0;  // guarded by pool_mu_

  std::mutex steps_mu_;
  std::vector<int64_t> step_in_;  // guarded by steps_mu_
  std::vector<int64_t> step_work_;

  // Tracer-thread state.
  int64_t clock_offset_ns_ = 0;  // CUPTI clock - CLOCK_MONOTONIC
  bool clock_ok_ = true;
  int64_t last_evidence_ns_ = 0;  // last time a record (or an arm) showed we own CUPTI
  uint64_t progress_at_evidence_ = 0;
  int64_t stepped_aside_at_ = 0;
  int64_t aside_from_ = 0;
  uint64_t foreign_clock_seen_ = 0;
  std::atomic<bool> nvtx_steps_{false};
  bool nvtx_logged_ = false;
  mutable std::mutex counters_mu_;
  Counters counters_;  // guarded by counters_mu_ when read from other threads
};

}  // namespace sentinel::plugin::cupti
