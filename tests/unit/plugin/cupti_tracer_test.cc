// CuptiTracer against the fake CUPTI table: synthetic activity buffers with known overlap, checked
// exactly, through the real buffer callbacks, record parsing, windows, steps and coexistence.
#include "plugin/cupti/cupti_tracer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/fakes/fake_cupti/fake_cupti.h"
#include "tests/fakes/fake_cupti/fake_cupti_api.h"

namespace sentinel::plugin::cupti {
namespace {

constexpr int64_t kMs = 1000000;
constexpr int64_t kSec = 1000 * kMs;
constexpr int64_t kMono0 = 1000 * kSec;                   // a window edge
constexpr int64_t kRealOffset = 1790000000LL * kSec - 7;  // CUPTI (realtime) - mono
const char kGemm[] = "_Z11gemm_kernelPKfS0_Pfiii";
const char kNccl[] =
    "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";
const char kSymk[] = "_Z29ncclSymkDevKernel_AllGather_ST21ncclSymkDevWorkArgs4K";

class CuptiTracerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_cupti_reset();
    api_ = testing::FakeCuptiApi();
    config_.window_ms = 1000;
    config_.flush_ms = 100;
    config_.starve_ms = 2000;
    config_.rearm_s = 5;
    SetNow(kMono0 + 10 * kMs);
  }
  void SetNow(int64_t mono) {
    now_ = mono;
    fake_cupti_set_fixed_time(mono + kRealOffset);
  }
  std::unique_ptr<CuptiTracer> Make() {
    CuptiTracer::Env env;
    env.mono_now = [this] { return now_; };
    env.realtime_now = [this] { return now_ + kRealOffset; };
    env.nccl_progress = [this] { return progress_; };
    env.emit_window = [this](const SentinelWireGpuWindow& w) { windows_.push_back(w); };
    env.emit_attribution = [this](const SentinelWireKernelAttribution& a) {
      attributions_.push_back(a);
    };
    env.pid = 4242;
    return std::make_unique<CuptiTracer>(&api_, config_, std::move(env));
  }
  // A kernel in mono time.
  static void Kernel(int64_t s, int64_t e, uint32_t stream, const char* name, uint64_t node = 0) {
    fake_cupti_push_kernel(static_cast<uint64_t>(s + kRealOffset),
                           static_cast<uint64_t>(e + kRealOffset), stream, name, node, 0);
  }
  // Compute [100, 300) ms and NCCL [250, 450) ms of window w0, then the window closes. With step
  // boundaries at 100 and 600 ms, its one step is compute 200, exposed comm 150, idle 150 ms.
  const SentinelWireGpuWindow* CloseWindowWithOneStep(CuptiTracer* t, int64_t w0) {
    Kernel(w0 + 100 * kMs, w0 + 300 * kMs, 7, kGemm);
    Kernel(w0 + 250 * kMs, w0 + 450 * kMs, 13, kNccl);
    SetNow(w0 + kSec + 500 * kMs);
    t->Tick();
    const SentinelWireGpuWindow* w = WindowAt(w0);
    if (w == nullptr) return nullptr;
    EXPECT_EQ(w->steps, 1u);
    EXPECT_EQ(w->step_start_ns, w0 + 100 * kMs);
    EXPECT_EQ(w->step_end_ns, w0 + 600 * kMs);
    EXPECT_EQ(w->step_compute_ns, 200 * kMs);
    EXPECT_EQ(w->step_exposed_comm_ns, 150 * kMs);
    EXPECT_EQ(w->step_idle_ns, 150 * kMs);
    return w;
  }
  const SentinelWireGpuWindow* WindowAt(int64_t start) const {
    for (const auto& w : windows_) {
      if (w.start_ns == start) return &w;
    }
    return nullptr;
  }

  CuptiApi api_;
  CuptiConfig config_;
  int64_t now_ = 0;
  uint64_t progress_ = 0;
  std::vector<SentinelWireGpuWindow> windows_;
  std::vector<SentinelWireKernelAttribution> attributions_;
};

TEST_F(CuptiTracerTest, ArmsConcurrentKernelNeverTheSerialisingKind) {
  auto t = Make();
  const Status armed = t->Arm();
  ASSERT_TRUE(armed.ok()) << armed.message();
  EXPECT_EQ(t->state(), TracerState::kArmed);
  EXPECT_TRUE(fake_cupti_enabled(kKindConcurrentKernel));
  EXPECT_FALSE(fake_cupti_enabled(kKindKernel));
  EXPECT_TRUE(fake_cupti_enabled(kKindMemcpy));
  EXPECT_TRUE(fake_cupti_enabled(kKindMemset));
  EXPECT_EQ(t->clock_offset_ns(), kRealOffset);
}

TEST_F(CuptiTracerTest, NoDriverTurnsTheFeatureOffWithTheReason) {
  fake_cupti_set_enable_error(kErrorUnknown);
  auto t = Make();
  const Status armed = t->Arm();
  EXPECT_FALSE(armed.ok());
  const std::string why = armed.message();
  EXPECT_EQ(t->state(), TracerState::kOff);
  EXPECT_NE(why.find("CONCURRENT_KERNEL"), std::string::npos) << why;
  EXPECT_NE(why.find("CUPTI_ERROR_UNKNOWN (999)"), std::string::npos) << why;
  t->Tick();  // harmless when off
  EXPECT_TRUE(windows_.empty());
}

TEST_F(CuptiTracerTest, OverlappingStreamsGraphKernelsAndCopiesExactly) {
  auto t = Make();
  const Status armed = t->Arm();
  ASSERT_TRUE(armed.ok()) << armed.message();
  const int64_t w0 = kMono0 + kSec;  // first full window
  Kernel(w0 + 100 * kMs, w0 + 500 * kMs, 7, kGemm);
  Kernel(w0 + 300 * kMs, w0 + 700 * kMs, 13, kNccl);
  Kernel(w0 + 600 * kMs, w0 + 650 * kMs, 9, kGemm, /*graph node*/ 77);  // graph-launched
  fake_cupti_push_copy(kKindMemcpy, static_cast<uint64_t>(w0 + 800 * kMs + kRealOffset),
                       static_cast<uint64_t>(w0 + 900 * kMs + kRealOffset), 3);
  SetNow(w0 + kSec + 500 * kMs);  // window end + grace
  t->Tick();
  const SentinelWireGpuWindow* w = WindowAt(w0);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->end_ns, w0 + kSec);
  EXPECT_EQ(w->compute_ns, 450 * kMs);
  EXPECT_EQ(w->nccl_ns, 400 * kMs);
  EXPECT_EQ(w->overlap_ns, 250 * kMs);
  EXPECT_EQ(w->memcpy_ns, 100 * kMs);
  EXPECT_EQ(w->idle_ns, 300 * kMs);
  EXPECT_EQ(w->kernels, 3u);
  EXPECT_EQ(w->nccl_kernels, 1u);
  EXPECT_EQ(w->status, 0u);
  EXPECT_EQ(w->pid, 4242u);
  EXPECT_EQ(w->clock_offset_ns, kRealOffset);
  ASSERT_EQ(attributions_.size(), 1u);
  EXPECT_EQ(attributions_[0].start_ns, w0 + 300 * kMs);
  EXPECT_EQ(attributions_[0].end_ns, w0 + 700 * kMs);
  EXPECT_EQ(attributions_[0].overlap_ns, 250 * kMs);
  EXPECT_EQ(attributions_[0].stream_id, 13u);
  EXPECT_EQ(t->counters().records, 4u);
}

TEST_F(CuptiTracerTest, OutOfOrderAndLateBuffers) {
  auto t = Make();
  const Status armed = t->Arm();
  ASSERT_TRUE(armed.ok()) << armed.message();
  const int64_t w0 = kMono0 + kSec;
  // Two buffers, the later activity first.
  Kernel(w0 + 600 * kMs, w0 + 700 * kMs, 13, kSymk);
  SetNow(w0 + 800 * kMs);
  t->Tick();
  Kernel(w0 + 100 * kMs, w0 + 200 * kMs, 7, kGemm);
  SetNow(w0 + kSec + 500 * kMs);
  t->Tick();
  const SentinelWireGpuWindow* w = WindowAt(w0);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->compute_ns, 100 * kMs);
  EXPECT_EQ(w->nccl_ns, 100 * kMs);
  EXPECT_EQ(w->records_late, 0u);
  // A buffer for the closed window arrives: counted late in the next window, not re-reported.
  Kernel(w0 + 900 * kMs, w0 + 950 * kMs, 7, kGemm);
  SetNow(w0 + 2 * kSec + 500 * kMs);
  t->Tick();
  const SentinelWireGpuWindow* w1 = WindowAt(w0 + kSec);
  ASSERT_NE(w1, nullptr);
  EXPECT_EQ(w1->records_late, 1u);
  EXPECT_EQ(w1->compute_ns, 0);
  EXPECT_EQ(w1->idle_ns, kSec);
}

TEST_F(CuptiTracerTest, DroppedRecordsAreCounted) {
  config_.buffers = 2;
  config_.buffer_kib = 64;  // 303 kernel records per buffer
  auto t = Make();
  const Status armed = t->Arm();
  ASSERT_TRUE(armed.ok()) << armed.message();
  const int64_t w0 = kMono0 + kSec;
  Kernel(0 - kRealOffset, 0 - kRealOffset, 7, kGemm);  // a record with no timestamps (0, 0)
  for (int i = 0; i < 1000; ++i) Kernel(w0 + i * kMs, w0 + i * kMs + 100, 7, kGemm);
  fake_cupti_add_dropped(5);  // device-side overflow
  SetNow(w0 + kSec + 500 * kMs);
  t->Tick();
  const SentinelWireGpuWindow* w = WindowAt(w0);
  ASSERT_NE(w, nullptr);
  // 2 buffers x 303 records taken; the request for a third was declined and CUPTI dropped the
  // rest (395 = 1001 - 606), plus the 5 it lost itself, plus the record without timestamps.
  EXPECT_EQ(t->counters().records, 606u);
  EXPECT_EQ(w->kernels, 605u);
  EXPECT_EQ(w->compute_ns, 605 * 100);
  EXPECT_EQ(w->records_dropped, 395u + 5u + 1u);
  EXPECT_EQ(t->counters().buffers_declined, 1u);
  // Buffers come back: the next flush has room again.
  Kernel(w0 + kSec + 600 * kMs, w0 + kSec + 700 * kMs, 7, kGemm);
  SetNow(w0 + 2 * kSec + 500 * kMs);
  t->Tick();
  EXPECT_EQ(t->counters().records, 607u);
}

TEST_F(CuptiTracerTest, EmptyWindowIsIdleNotMissing) {
  auto t = Make();
  const Status armed = t->Arm();
  ASSERT_TRUE(armed.ok()) << armed.message();
  SetNow(kMono0 + 3 * kSec + 500 * kMs);
  t->Tick();
  ASSERT_EQ(windows_.size(), 2u);
  for (const auto& w : windows_) {
    EXPECT_EQ(w.idle_ns, kSec);
    EXPECT_EQ(w.compute_ns + w.nccl_ns + w.memcpy_ns, 0);
    EXPECT_EQ(w.status, 0u);
  }
}

TEST_F(CuptiTracerTest, KernelsSpanningWindowEdges) {
  auto t = Make();
  const Status armed = t->Arm();
  ASSERT_TRUE(armed.ok()) << armed.message();
  const int64_t w0 = kMono0 + kSec;
  Kernel(w0 + 900 * kMs, w0 + kSec + 200 * kMs, 13, kNccl);
  Kernel(w0 + 950 * kMs, w0 + kSec + 100 * kMs, 7, kGemm);
  SetNow(w0 + 2 * kSec + 500 * kMs);
  t->Tick();
  const SentinelWireGpuWindow* a = WindowAt(w0);
  const SentinelWireGpuWindow* b = WindowAt(w0 + kSec);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->nccl_ns, 100 * kMs);
  EXPECT_EQ(a->overlap_ns, 50 * kMs);
  EXPECT_EQ(b->nccl_ns, 200 * kMs);
  EXPECT_EQ(b->overlap_ns, 100 * kMs);
  ASSERT_EQ(attributions_.size(), 1u);
  EXPECT_EQ(attributions_[0].overlap_ns, 150 * kMs);
}

TEST_F(CuptiTracerTest, ForeignToolMidRunIsNotMeasuredThenReArmed) {
  auto t = Make();
  const Status armed = t->Arm();
  ASSERT_TRUE(armed.ok()) << armed.message();
  const int64_t w0 = kMono0 + kSec;
  // Window 0: ours, measured.
  Kernel(w0 + 100 * kMs, w0 + 200 * kMs, 7, kGemm);
  progress_ = 10;
  SetNow(w0 + 300 * kMs);
  t->Tick();
  // Kineto starts a trace: its callbacks take every record from now on.
  fake_cupti_foreign_register();
  for (int64_t step = 1; step <= 40; ++step) {
    int64_t now = w0 + 300 * kMs + step * 100 * kMs;
    Kernel(now - 50 * kMs, now - 10 * kMs, 7, kGemm);
    progress_ += 5;  // NCCL keeps completing collectives
    SetNow(now);
    t->Tick();
  }
  EXPECT_EQ(t->state(), TracerState::kSteppedAside);
  EXPECT_EQ(t->counters().step_asides, 1u);
  EXPECT_GT(fake_cupti_foreign_records(), 0u);
  // No window after the takeover claims a number: every one is not measured, none is "idle".
  ASSERT_FALSE(windows_.empty());
  const SentinelWireGpuWindow* first = WindowAt(w0);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->status, static_cast<uint32_t>(kSentinelGpuWindowForeignOwner));
  for (const auto& w : windows_) {
    EXPECT_EQ(w.status & kSentinelGpuWindowForeignOwner, kSentinelGpuWindowForeignOwner)
        << "window at " << w.start_ns - w0;
    EXPECT_EQ(w.idle_ns + w.compute_ns + w.nccl_ns, 0);
  }
  // Kineto stops its trace (disables CONCURRENT_KERNEL); after SENTINEL_CUPTI_REARM_S we re-arm.
  fake_cupti_foreign_stop();
  int64_t now = w0 + 4300 * kMs;
  for (int i = 0; i < 60 && t->state() != TracerState::kArmed; ++i) {
    now += 100 * kMs;
    SetNow(now);
    t->Tick();
  }
  ASSERT_EQ(t->state(), TracerState::kArmed);
  EXPECT_EQ(t->counters().rearms, 1u);
  EXPECT_TRUE(fake_cupti_enabled(kKindConcurrentKernel));
  // Measured again from the next full window on.
  int64_t next = (now / kSec + 1) * kSec;
  Kernel(next + 100 * kMs, next + 400 * kMs, 7, kGemm);
  Kernel(next + 300 * kMs, next + 500 * kMs, 13, kNccl);
  SetNow(next + kSec + 500 * kMs);
  t->Tick();
  const SentinelWireGpuWindow* again = WindowAt(next);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->status, 0u);
  EXPECT_EQ(again->compute_ns, 300 * kMs);
  EXPECT_EQ(again->nccl_ns, 200 * kMs);
  EXPECT_EQ(again->overlap_ns, 100 * kMs);
}

TEST_F(CuptiTracerTest, QuietJobIsNotMistakenForAForeignOwner) {
  auto t = Make();
  const Status armed = t->Arm();
  ASSERT_TRUE(armed.ok()) << armed.message();
  for (int i = 1; i <= 60; ++i) {
    SetNow(kMono0 + 10 * kMs + i * 100 * kMs);
    t->Tick();  // no NCCL progress, no records
  }
  EXPECT_EQ(t->state(), TracerState::kArmed);
  EXPECT_EQ(t->counters().step_asides, 0u);
}

TEST_F(CuptiTracerTest, ForeignTimestampClockIsNotMeasured) {
  auto t = Make();
  const Status armed = t->Arm();
  ASSERT_TRUE(armed.ok()) << armed.message();
  const int64_t w0 = kMono0 + kSec;
  // Kineto's TSC timestamp callback: CUPTI's clock is now raw ticks, far from CLOCK_REALTIME.
  fake_cupti_set_clock_offset(-kRealOffset + 123456789);
  fake_cupti_push_kernel(5000, 9000, 7, kGemm, 0, 0);
  SetNow(w0 + kSec + 500 * kMs);
  t->Tick();
  const SentinelWireGpuWindow* w = WindowAt(w0);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->status & kSentinelGpuWindowForeignClock,
            static_cast<uint32_t>(kSentinelGpuWindowForeignClock));
  EXPECT_EQ(w->compute_ns + w->idle_ns, 0);
  EXPECT_EQ(t->counters().foreign_clock_records, 1u);
}

TEST_F(CuptiTracerTest, StepsFromBoundariesLandInTheirWindow) {
  auto t = Make();
  const Status armed = t->Arm();
  ASSERT_TRUE(armed.ok()) << armed.message();
  const int64_t w0 = kMono0 + kSec;
  t->AddStepBoundary(w0 + 100 * kMs);
  t->AddStepBoundary(w0 + 600 * kMs);
  const SentinelWireGpuWindow* w = CloseWindowWithOneStep(t.get(), w0);
  ASSERT_NE(w, nullptr);
}

// An NVTX marker in mono time (CUpti_ActivityMarker2 through the fake's buffers).
void Marker(uint32_t flags, int64_t t, uint32_t id, const char* name) {
  fake_cupti_push_marker(flags, static_cast<uint64_t>(t + kRealOffset), id, name, nullptr);
}

TEST_F(CuptiTracerTest, NvtxRangeNamedInStepNvtxMarksTheSteps) {
  config_.step_nvtx = "train_step";
  config_.nvtx_injection = "/usr/local/cuda/lib64/libcupti.so.13";
  auto t = Make();
  const Status armed = t->Arm();
  ASSERT_TRUE(armed.ok()) << armed.message();
  EXPECT_TRUE(fake_cupti_enabled(kKindMarker));
  EXPECT_TRUE(t->nvtx_steps());
  const int64_t w0 = kMono0 + kSec;
  // The named range starts at 100 ms and again at 600 ms; its end record (no name), another
  // range's start and an instantaneous mark of another name are not boundaries.
  static const char kStep[] = "train_step";  // a different pointer than the config's string
  Marker(kFlagMarkerStart, w0 + 100 * kMs, 1, kStep);
  Marker(kFlagMarkerStart, w0 + 200 * kMs, 2, "data_loader");
  Marker(kFlagMarkerInstantaneous, w0 + 250 * kMs, 3, "checkpoint");
  Marker(kFlagMarkerEnd, w0 + 500 * kMs, 1, nullptr);
  Marker(kFlagMarkerStart, w0 + 600 * kMs, 4, kStep);
  Marker(kFlagMarkerStart, 0 - kRealOffset, 5, kStep);  // no timestamp: not a boundary
  // Boundaries from the collectives are not used while the NVTX range marks the steps.
  t->AddStepBoundary(w0 + 350 * kMs);
  const SentinelWireGpuWindow* w = CloseWindowWithOneStep(t.get(), w0);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->kernels, 2u);  // markers are not kernels
  EXPECT_EQ(t->counters().nvtx_steps, 2u);
}

TEST_F(CuptiTracerTest, StepNvtxWithoutInjectionIntoCuptiFallsBackToCollectives) {
  config_.step_nvtx = "train_step";
  for (const char* injection : {"", "/opt/nsight-systems/target/libToolsInjection64.so"}) {
    fake_cupti_reset();
    SetNow(kMono0 + 10 * kMs);
    windows_.clear();
    config_.nvtx_injection = injection;
    auto t = Make();
    const Status armed = t->Arm();
    ASSERT_TRUE(armed.ok()) << armed.message();
    EXPECT_FALSE(fake_cupti_enabled(kKindMarker)) << injection;
    EXPECT_FALSE(t->nvtx_steps()) << injection;
    const int64_t w0 = kMono0 + kSec;
    t->AddStepBoundary(w0 + 100 * kMs);
    t->AddStepBoundary(w0 + 600 * kMs);
    Kernel(w0 + 100 * kMs, w0 + 300 * kMs, 7, kGemm);
    SetNow(w0 + kSec + 500 * kMs);
    t->Tick();
    const SentinelWireGpuWindow* w = WindowAt(w0);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->steps, 1u) << injection;
    EXPECT_EQ(w->step_start_ns, w0 + 100 * kMs);
    EXPECT_EQ(w->step_compute_ns, 200 * kMs);
  }
}

TEST_F(CuptiTracerTest, MarkerKindStaysOffWithoutStepNvtx) {
  config_.nvtx_injection = "/usr/local/cuda/lib64/libcupti.so.13";
  auto t = Make();
  const Status armed = t->Arm();
  ASSERT_TRUE(armed.ok()) << armed.message();
  EXPECT_FALSE(fake_cupti_enabled(kKindMarker));  // no marker records, no cost, by default
  EXPECT_FALSE(t->nvtx_steps());
}

TEST_F(CuptiTracerTest, FinishClosesWindowsThatEndedWithoutGrace) {
  auto t = Make();
  const Status armed = t->Arm();
  ASSERT_TRUE(armed.ok()) << armed.message();
  const int64_t w0 = kMono0 + kSec;
  Kernel(w0 + 100 * kMs, w0 + 200 * kMs, 7, kGemm);
  SetNow(w0 + kSec + 1 * kMs);
  t->Tick();
  EXPECT_EQ(WindowAt(w0), nullptr);  // within the grace period
  t->Finish();
  ASSERT_NE(WindowAt(w0), nullptr);
  EXPECT_EQ(WindowAt(w0)->compute_ns, 100 * kMs);
}

}  // namespace
}  // namespace sentinel::plugin::cupti
