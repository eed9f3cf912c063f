// The CUPTI Activity API client (see cupti_tracer.h).
#include "plugin/cupti/cupti_tracer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"

#include "common/mono_clock.h"
#include "plugin/base/clock.h"
#include "plugin/base/log.h"
#include "plugin/base/no_destructor.h"

namespace sentinel::plugin::cupti {
namespace {

// The one armed tracer (CUPTI's callbacks carry no user pointer).
ABSL_CONST_INIT std::atomic<CuptiTracer*> g_armed{nullptr};

// CUPTI's normal clock is CLOCK_REALTIME ns; a timestamp callback installed by another tool
// (Kineto's TSC) moves it far away. Farther than this from the real time = foreign clock.
constexpr int64_t kClockTolerance = 10LL * 1000 * 1000 * 1000;
constexpr int64_t kRecordTolerance = 3600LL * 1000 * 1000 * 1000;

template <typename T>
T Read(const uint8_t* rec, size_t off) {
  T v;
  memcpy(&v, rec + off, sizeof(v));
  return v;
}

}  // namespace

CuptiTracer::CuptiTracer(const CuptiApi* api, const CuptiConfig& config, Env env)
    : api_(api),
      config_(config),
      env_(std::move(env)),
      classifier_(config.comm_kernels),
      accounting_(static_cast<int64_t>(config.window_ms) * 1000000) {
  accounting_.set_attributions_per_window(config.attributions_per_window);
  if (!env_.mono_now) env_.mono_now = [] { return MonoNs(); };
  if (!env_.realtime_now) env_.realtime_now = [] { return rules::RealNowNs(); };
  if (!env_.nccl_progress) env_.nccl_progress = [] { return uint64_t{0}; };
}

CuptiTracer::~CuptiTracer() {
  CuptiTracer* self = this;
  g_armed.compare_exchange_strong(self, nullptr);
  // Buffers are leaked on purpose when CUPTI may still hold them (armed at some point): a late
  // completion must never write into freed memory. Tests that never armed free them.
  if (state_.load() == TracerState::kIdle) {
    for (uint8_t* b : all_buffers_) free(b);
  } else {
    // Kept for the process in a list that is itself never freed, so they stay reachable (a leaked
    // singleton to LeakSanitizer, not a leak).
    static NoDestructor<std::mutex> kept_mu;
    static NoDestructor<std::vector<uint8_t*>> kept;
    std::lock_guard<std::mutex> lk(*kept_mu);
    try {
      kept->insert(kept->end(), all_buffers_.begin(), all_buffers_.end());
    } catch (...) {
      // Out of memory: the buffers stay allocated without a reference (never freed under CUPTI).
    }
  }
}

void CuptiTracer::RequestTrampoline(uint8_t** buffer, size_t* size, size_t* max_records) {
  CuptiTracer* t = g_armed.load(std::memory_order_acquire);
  if (t == nullptr) {
    *buffer = nullptr;
    *size = 0;
    *max_records = 0;
    return;
  }
  t->OnRequest(buffer, size, max_records);
}

void CuptiTracer::CompleteTrampoline(void*, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  CuptiTracer* t = g_armed.load(std::memory_order_acquire);
  if (t != nullptr && buffer != nullptr) t->OnComplete(buffer, valid_size);
}

void CuptiTracer::OnRequest(uint8_t** buffer, size_t* size, size_t* max_records) {
  std::lock_guard<std::mutex> lk(pool_mu_);
  ++requests_;
  *max_records = 0;
  if (free_.empty()) {
    ++declined_;  // CUPTI drops records and counts them (GetNumDroppedRecords)
    *buffer = nullptr;
    *size = 0;
    return;
  }
  *buffer = free_.back();
  free_.pop_back();
  *size = static_cast<size_t>(config_.buffer_kib) * 1024;
}

void CuptiTracer::OnComplete(uint8_t* buffer, size_t valid_size) {
  std::lock_guard<std::mutex> lk(pool_mu_);
  ++completions_;
  // The vector was reserved for every buffer: no allocation here.
  if (completed_.size() < completed_.capacity()) completed_.emplace_back(buffer, valid_size);
}

Status CuptiTracer::Register() {
  {
    std::lock_guard<std::mutex> lk(pool_mu_);
    // Top the pool up: buffers another tool's callbacks received while it owned CUPTI are gone.
    size_t held = all_buffers_.size();
    size_t bytes = static_cast<size_t>(config_.buffer_kib) * 1024;
    size_t outstanding = held - free_.size() - completed_.size();
    size_t want = config_.buffers + outstanding;
    while (all_buffers_.size() < want) {
      auto* b = static_cast<uint8_t*>(aligned_alloc(kRecordAlignment, bytes));
      if (b == nullptr) break;
      memset(b, 0, bytes);
      all_buffers_.push_back(b);
      free_.push_back(b);
    }
    free_.reserve(all_buffers_.size() * 2);
    completed_.reserve(all_buffers_.size() * 2);
    work_.reserve(all_buffers_.size() * 2);
    if (free_.empty()) {
      return Status(StatusCode::kResourceExhausted, "cannot allocate CUPTI activity buffers");
    }
  }
  if (api_->activity_set_attribute != nullptr) {
    uint8_t one = 1;
    size_t sz = sizeof(one);
    api_->activity_set_attribute(kAttrZeroedOutActivityBuffer, &sz, &one);  // best effort
  }
  g_armed.store(this, std::memory_order_release);
  int rc = api_->activity_register_callbacks(&RequestTrampoline, &CompleteTrampoline);
  if (rc != kSuccess) {
    return Status::Format(StatusCode::kUnavailable, "cuptiActivityRegisterCallbacks: %s",
                          ResultName(*api_, rc).c_str());
  }
  rc = api_->activity_enable(kKindConcurrentKernel);
  if (rc != kSuccess) {
    return Status::Format(
        StatusCode::kUnavailable, "cuptiActivityEnable(CONCURRENT_KERNEL): %s%s",
        ResultName(*api_, rc).c_str(),
        rc == kErrorUnknown || rc == kErrorNotInitialized ? " (no usable GPU driver?)" : "");
  }
  // Copies are optional: without them memcpy_ns stays 0.
  for (uint32_t k : {kKindMemcpy, kKindMemset, kKindMemcpy2}) api_->activity_enable(k);
  EnableNvtxSteps();
  return Status::Ok();
}

void CuptiTracer::EnableNvtxSteps() {
  if (config_.step_nvtx.empty()) return;
  // NVTX calls reach CUPTI only when the job injected NVTX into a libcupti; another injection
  // (Nsight Systems' own) gets them instead. We never set NVTX_INJECTION64_PATH ourselves: NVTX
  // reads it once per module at its first call, and overriding another tool's would break it.
  const Status usable = EnableNvtxMarkers();
  nvtx_steps_.store(usable.ok(), std::memory_order_relaxed);
  if (!usable.ok() && !nvtx_logged_) {
    nvtx_logged_ = true;
    Log(LogLevel::kWarn,
        "CUPTI: SENTINEL_STEP_NVTX=%s is not used: %s. Steps come from the first collective.",
        config_.step_nvtx.c_str(), usable.message());
  }
}

Status CuptiTracer::EnableNvtxMarkers() {
  const std::string& inj = config_.nvtx_injection;
  const size_t slash = inj.rfind('/');
  if (inj.empty()) {
    return Status(StatusCode::kFailedPrecondition,
                  "NVTX_INJECTION64_PATH is not set (set it to the path of libcupti.so)");
  }
  if (inj.find("cupti", slash == std::string::npos ? 0 : slash) == std::string::npos) {
    return Status::Format(StatusCode::kFailedPrecondition,
                          "NVTX_INJECTION64_PATH=%s is another tool's, not libcupti", inj.c_str());
  }
  int rc = api_->activity_enable(kKindMarker);
  if (rc != kSuccess) {
    return Status::Format(StatusCode::kUnavailable, "cuptiActivityEnable(MARKER): %s",
                          ResultName(*api_, rc).c_str());
  }
  return Status::Ok();
}

Status CuptiTracer::Arm() {
  CuptiTracer* expected = nullptr;
  if (!g_armed.compare_exchange_strong(expected, this) && expected != this) {
    return Status(StatusCode::kFailedPrecondition,
                  "another sentinel CUPTI tracer is armed in this process");
  }
  Status registered = Register();
  if (!registered.ok()) {
    off_reason_ = registered.message();
    state_.store(TracerState::kOff);
    return registered;
  }
  SampleClock();
  int64_t now = env_.mono_now();
  accounting_.Begin(now);
  last_evidence_ns_ = now;
  progress_at_evidence_ = env_.nccl_progress();
  state_.store(TracerState::kArmed);
  return Status::Ok();
}

void CuptiTracer::SampleClock() {
  uint64_t cupti_now = 0;
  int64_t m0 = env_.mono_now();
  int rc = api_->get_timestamp(&cupti_now);
  int64_t m1 = env_.mono_now();
  int64_t real = env_.realtime_now();
  if (rc != kSuccess) return;
  clock_offset_ns_ = static_cast<int64_t>(cupti_now) - (m0 + (m1 - m0) / 2);
  int64_t diff = static_cast<int64_t>(cupti_now) - real;
  clock_ok_ = diff < kClockTolerance && diff > -kClockTolerance;
}

void CuptiTracer::AddStepBoundaries(const int64_t* times, size_t n) {
  if (nvtx_steps()) return;
  std::lock_guard<std::mutex> lk(steps_mu_);
  for (size_t i = 0; i < n && step_in_.size() < 4096; ++i) step_in_.push_back(times[i]);
}

void CuptiTracer::TakeStepBoundaries() {
  {
    std::lock_guard<std::mutex> lk(steps_mu_);
    step_work_.swap(step_in_);
  }
  for (int64_t t : step_work_) accounting_.AddStepBoundary(t);
  step_work_.clear();
}

void CuptiTracer::ParseBuffer(uint8_t* buffer, size_t valid_size) {
  void* rec_ptr = nullptr;
  uint64_t parsed = 0, foreign = 0;
  const int64_t offset = clock_offset_ns_;
  const int64_t now_cupti = env_.mono_now() + offset;
  while (api_->activity_get_next_record(buffer, valid_size, &rec_ptr) == kSuccess) {
    const auto* rec = static_cast<const uint8_t*>(rec_ptr);
    uint32_t kind = Read<uint32_t>(rec, 0);
    Interval iv;
    uint64_t start, end;
    if (kind == kKindConcurrentKernel || kind == kKindKernel) {
      start = Read<uint64_t>(rec, kernel::kStart);
      end = Read<uint64_t>(rec, kernel::kEnd);
      iv.device = Read<uint32_t>(rec, kernel::kDeviceId);
      iv.stream = Read<uint32_t>(rec, kernel::kStreamId);
      iv.correlation = Read<uint32_t>(rec, kernel::kCorrelationId);
      iv.graph_node = Read<uint64_t>(rec, kernel::kGraphNodeId);
      iv.kind =
          classifier_.ClassifyCached(Read<const char*>(rec, kernel::kName)) == KernelClass::kNccl
              ? Activity::kNccl
              : Activity::kCompute;
    } else if (kind == kKindMemcpy || kind == kKindMemset || kind == kKindMemcpy2) {
      start = Read<uint64_t>(rec, copy::kStart);
      end = Read<uint64_t>(rec, copy::kEnd);
      iv.device = Read<uint32_t>(rec, copy::kDeviceId);
      iv.stream = Read<uint32_t>(rec, copy::kStreamId);
      iv.correlation = Read<uint32_t>(rec, copy::kCorrelationId);
      iv.kind = Activity::kMemcpy;
    } else if (kind == kKindMarker) {
      ParseMarker(rec, offset, now_cupti);
      continue;
    } else {
      continue;  // a kind we did not enable (another client's): skip
    }
    ++parsed;
    if (start == 0 && end == 0) {
      accounting_.AddDropped(1);
      continue;
    }
    int64_t d = static_cast<int64_t>(start) - now_cupti;
    if (!clock_ok_ || d > kRecordTolerance || d < -kRecordTolerance) {
      ++foreign;
      continue;
    }
    iv.start = static_cast<int64_t>(start) - offset;
    iv.end = static_cast<int64_t>(end) - offset;
    accounting_.Add(iv);
  }
  std::lock_guard<std::mutex> lk(counters_mu_);
  counters_.records += parsed;
  counters_.foreign_clock_records += foreign;
}

void CuptiTracer::ParseMarker(const uint8_t* rec, int64_t offset, int64_t now_cupti) {
  // A step starts where the named range starts (or a mark of that name is placed). End records
  // carry no name and are not needed.
  if (!nvtx_steps()) return;
  if ((Read<uint32_t>(rec, marker::kFlags) & (kFlagMarkerStart | kFlagMarkerInstantaneous)) == 0) {
    return;
  }
  const char* name = Read<const char*>(rec, marker::kName);
  if (name == nullptr || strcmp(name, config_.step_nvtx.c_str()) != 0) return;
  const uint64_t ts = Read<uint64_t>(rec, marker::kTimestamp);
  const int64_t d = static_cast<int64_t>(ts) - now_cupti;
  if (ts == 0 || !clock_ok_ || d > kRecordTolerance || d < -kRecordTolerance) return;
  accounting_.AddStepBoundary(static_cast<int64_t>(ts) - offset);
  std::lock_guard<std::mutex> lk(counters_mu_);
  ++counters_.nvtx_steps;
}

void CuptiTracer::DrainCompleted() {
  work_.clear();
  {
    std::lock_guard<std::mutex> lk(pool_mu_);
    work_.swap(completed_);
    completed_.reserve(work_.capacity());
  }
  for (auto& [buf, valid] : work_) {
    ParseBuffer(buf, valid);
    memset(buf, 0, static_cast<size_t>(config_.buffer_kib) * 1024);  // we promised zeroed buffers
  }
  std::lock_guard<std::mutex> lk(pool_mu_);
  for (auto& [buf, valid] : work_) free_.push_back(buf);
  std::lock_guard<std::mutex> ck(counters_mu_);
  counters_.buffers_completed += work_.size();
  counters_.buffers_declined = declined_;
}

void CuptiTracer::StepAside(int64_t from) {
  int64_t now = env_.mono_now();
  state_.store(TracerState::kSteppedAside);
  stepped_aside_at_ = now;
  aside_from_ = from;
  accounting_.MarkNotMeasured(from, now, kReasonForeignOwner);
  {
    std::lock_guard<std::mutex> lk(counters_mu_);
    ++counters_.step_asides;
  }
  Log(LogLevel::kInfo,
      "CUPTI: no activity record reached sentinel for %u ms while NCCL made progress; another "
      "tool owns CUPTI's activity buffers. Stepping aside: GPU windows are reported as not "
      "measured%s",
      config_.starve_ms, config_.rearm_s > 0 ? " until a re-arm succeeds" : "");
}

void CuptiTracer::Tick() {
  TracerState st = state_.load();
  if (st != TracerState::kArmed && st != TracerState::kSteppedAside) return;
  SampleClock();
  // Never flush while stepped aside: the buffers now belong to the other tool.
  if (st == TracerState::kArmed) api_->activity_flush_all(0);
  uint64_t before;
  {
    std::lock_guard<std::mutex> lk(counters_mu_);
    before = counters_.records;
  }
  DrainCompleted();
  if (st == TracerState::kArmed) {
    size_t dropped = 0;
    if (api_->activity_get_num_dropped_records(nullptr, 0, &dropped) == kSuccess && dropped > 0) {
      accounting_.AddDropped(dropped);
      std::lock_guard<std::mutex> lk(counters_mu_);
      counters_.records_dropped += dropped;
    }
  }
  TakeStepBoundaries();

  const int64_t now = env_.mono_now();
  const uint64_t progress = env_.nccl_progress();
  const int64_t grace =
      std::max<int64_t>(500000000LL, 3LL * static_cast<int64_t>(config_.flush_ms) * 1000000);
  uint64_t after;
  uint64_t foreign_clock;
  {
    std::lock_guard<std::mutex> lk(counters_mu_);
    after = counters_.records;
    foreign_clock = counters_.foreign_clock_records;
  }
  if (!clock_ok_ || foreign_clock != foreign_clock_seen_) {
    // Records on another clock cannot be placed: the recent past is not measured.
    accounting_.MarkNotMeasured(accounting_.closed_until(), now, kReasonForeignClock);
    foreign_clock_seen_ = foreign_clock;
  }
  int64_t watermark = now - grace;
  if (st == TracerState::kArmed) {
    if (after != before) {
      last_evidence_ns_ = now;
      progress_at_evidence_ = progress;
    } else if (progress != progress_at_evidence_) {
      // NCCL ran but no record came: either late buffers or another owner. Hold the windows
      // back until we know, so that they are never closed as idle by mistake.
      if (now - last_evidence_ns_ > static_cast<int64_t>(config_.starve_ms) * 1000000) {
        StepAside(last_evidence_ns_ - grace);
      } else {
        watermark = std::min(watermark, last_evidence_ns_ - grace);
      }
    }
  }
  if (state_.load() == TracerState::kSteppedAside) {
    accounting_.MarkNotMeasured(aside_from_, now, kReasonForeignOwner);
    if (config_.rearm_s > 0 &&
        now - stepped_aside_at_ >= static_cast<int64_t>(config_.rearm_s) * 1000000000LL) {
      if (Register().ok()) {  // a failure keeps the tracer aside; the next interval retries
        state_.store(TracerState::kArmed);
        last_evidence_ns_ = now;
        progress_at_evidence_ = progress;
        std::lock_guard<std::mutex> lk(counters_mu_);
        ++counters_.rearms;
        Log(LogLevel::kInfo, "CUPTI: re-armed after stepping aside");
      } else {
        stepped_aside_at_ = now;  // try again after another interval
      }
    }
  }
  Emit(watermark);
}

void CuptiTracer::Finish() {
  TracerState st = state_.load();
  if (st != TracerState::kArmed && st != TracerState::kSteppedAside) return;
  if (st == TracerState::kArmed) {
    api_->activity_flush_all(kFlushForced);
    DrainCompleted();
    size_t dropped = 0;
    if (api_->activity_get_num_dropped_records(nullptr, 0, &dropped) == kSuccess) {
      accounting_.AddDropped(dropped);
    }
  } else {
    accounting_.MarkNotMeasured(aside_from_, env_.mono_now(), kReasonForeignOwner);
  }
  TakeStepBoundaries();
  Emit(env_.mono_now());
}

void CuptiTracer::Emit(int64_t watermark) {
  out_.clear();
  accounting_.Advance(watermark, &out_);
  size_t step_i = 0;
  for (const WindowResult& w : out_.windows) {
    SentinelWireGpuWindow r;
    memset(&r, 0, sizeof(r));
    r.start_ns = w.start_ns;
    r.end_ns = w.end_ns;
    r.compute_ns = w.compute_ns;
    r.nccl_ns = w.nccl_ns;
    r.overlap_ns = w.overlap_ns;
    r.idle_ns = w.idle_ns;
    r.device = static_cast<int32_t>(w.device);
    r.pid = env_.pid;
    r.memcpy_ns = w.memcpy_ns;
    r.kernels = w.kernels;
    r.nccl_kernels = w.nccl_kernels;
    r.records_dropped = w.dropped;
    r.records_late = w.late;
    r.clock_offset_ns = clock_offset_ns_;
    r.status = 0;
    if (w.not_measured & kReasonForeignOwner) r.status |= kSentinelGpuWindowForeignOwner;
    if (w.not_measured & kReasonForeignClock) r.status |= kSentinelGpuWindowForeignClock;
    if (w.not_measured & kReasonOff) r.status |= kSentinelGpuWindowOff;
    // Steps come out in time order, interleaved with windows: a step belongs to the window in
    // which it ended.
    while (step_i < out_.steps.size() && out_.steps[step_i].end_ns <= w.end_ns) {
      const StepResult& s = out_.steps[step_i++];
      ++r.steps;
      r.step_start_ns = s.start_ns;
      r.step_end_ns = s.end_ns;
      r.step_compute_ns = s.compute_ns;
      r.step_exposed_comm_ns = s.exposed_comm_ns;
      r.step_idle_ns = s.idle_ns;
      if (s.not_measured != 0) r.status |= kSentinelGpuWindowForeignOwner;
    }
    if (env_.emit_window) env_.emit_window(r);
  }
  // The accounting already capped them at SENTINEL_CUPTI_ATTRIBUTIONS per window.
  uint64_t sent = 0;
  for (const Attribution& a : out_.attributions) {
    SentinelWireKernelAttribution r;
    memset(&r, 0, sizeof(r));
    r.start_ns = a.kernel.start;
    r.end_ns = a.kernel.end;
    r.overlap_ns = a.overlap_ns;
    r.graph_node_id = a.kernel.graph_node;
    r.pid = env_.pid;
    r.device = a.kernel.device;
    r.stream_id = a.kernel.stream;
    r.correlation_id = a.kernel.correlation;
    if (env_.emit_attribution) env_.emit_attribution(r);
    ++sent;
  }
  std::lock_guard<std::mutex> lk(counters_mu_);
  counters_.windows += out_.windows.size();
  counters_.attributions += sent;
  counters_.attributions_suppressed = accounting_.attributions_suppressed();
}

CuptiTracer::Counters CuptiTracer::counters() const {
  std::lock_guard<std::mutex> lk(counters_mu_);
  return counters_;
}

}  // namespace sentinel::plugin::cupti
