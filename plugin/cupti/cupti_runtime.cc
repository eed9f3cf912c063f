// The process's CUPTI runtime (see cupti_runtime.h): the tracer thread, its exit handler and the
// entry points the profiler calls.
#include "plugin/cupti/cupti_runtime.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/attributes.h"

#include "plugin/base/log.h"
#include "plugin/base/no_destructor.h"
#include "plugin/base/thread.h"
#include "plugin/core/drainer.h"
#include "plugin/core/profiler_core.h"
#include "plugin/cupti/cupti_api.h"
#include "plugin/cupti/cupti_config.h"
#include "plugin/cupti/cupti_tracer.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin::cupti {
namespace {

struct Runtime {
  std::mutex mu;  // guards everything below
  bool started = false;
  CuptiConfig config;
  std::thread* thread = nullptr;
  // Also read without `mu` by AtExit: a forked child must not take a lock that another thread of
  // the parent may have held at fork.
  std::atomic<pid_t> owner_pid{0};
  std::condition_variable cv;
  bool stop = false;
  bool done = false;
  std::mutex tick_mu;  // one Tick/Finish at a time
  std::unique_ptr<CuptiTracer> tracer;
};

Runtime& Rt() {
  static NoDestructor<Runtime> rt;  // leaked: used by atexit and the thread
  return *rt;
}

void TurnOffWithReason(const CuptiConfig& c, const std::string& why) {
  // Logged once: `on` asked for it (warn), `auto` only tried (info).
  Log(c.mode == CuptiMode::kOn ? LogLevel::kWarn : LogLevel::kInfo,
      "CUPTI GPU activity is off: %s. The job is not affected; sentineld reports GPU overlap "
      "as not measured.",
      why.c_str());
}

// A tracer whose Arm() failed is kept for the process, not destroyed: CUPTI may still hold its
// callbacks and buffers (see ~CuptiTracer), and a reachable pointer is what a leaked singleton is.
ABSL_CONST_INIT CuptiTracer* g_retired_tracer = nullptr;

void ThreadMain() {
  Runtime& rt = Rt();
  CuptiConfig c;
  {
    std::lock_guard<std::mutex> lk(rt.mu);
    c = rt.config;
  }
  CuptiLoadResult lr = LoadCuptiApi(c.path);
  if (lr.api == nullptr) {
    TurnOffWithReason(c, lr.status.message());
  } else {
    CuptiTracer::Env env;
    env.pid = static_cast<uint32_t>(getpid());
    env.nccl_progress = [] { return SnapshotCounters().records_completed; };
    env.emit_window = [](const SentinelWireGpuWindow& w) {
      EnqueueControlRecord(kSentinelWireGpuWindow, &w, sizeof(w));
    };
    env.emit_attribution = [](const SentinelWireKernelAttribution& a) {
      EnqueueControlRecord(kSentinelWireKernelAttribution, &a, sizeof(a));
    };
    auto tracer = std::make_unique<CuptiTracer>(lr.api, c, std::move(env));
    const Status armed = tracer->Arm();
    if (!armed.ok()) {
      TurnOffWithReason(c, lr.path + ": " + armed.message());
      g_retired_tracer = tracer.release();
    } else {
      Log(LogLevel::kInfo, "CUPTI GPU activity on (%s, API %u, window %u ms)", lr.path.c_str(),
          lr.version, c.window_ms);
      std::unique_lock<std::mutex> lk(rt.mu);
      rt.tracer = std::move(tracer);
      while (!rt.stop) {
        rt.cv.wait_for(lk, std::chrono::milliseconds(c.flush_ms));
        if (rt.stop) break;
        CuptiTracer* t = rt.tracer.get();
        lk.unlock();
        {
          std::lock_guard<std::mutex> tl(rt.tick_mu);
          t->Tick();
        }
        lk.lock();
      }
    }
  }
  std::lock_guard<std::mutex> lk(rt.mu);
  rt.done = true;
  rt.cv.notify_all();
}

void AtExit() {
  Runtime& rt = Rt();
  if (rt.owner_pid.load(std::memory_order_relaxed) != getpid()) {
    return;  // not ours (a forked child)
  }
  std::unique_lock<std::mutex> lk(rt.mu);
  if (rt.thread == nullptr || rt.owner_pid != getpid()) return;
  rt.stop = true;
  rt.cv.notify_all();
  // Bounded: a CUPTI call stuck at exit must not hang the host's exit.
  rt.cv.wait_for(lk, std::chrono::milliseconds(500), [&] { return rt.done; });
  if (!rt.done) return;
  // Joined, not detached: a thread still tearing down while the process exits races with
  // whatever stops the world at exit (LeakSanitizer's leak check crashes on it).
  JoinThread(rt.thread);
  if (rt.tracer == nullptr) return;
  CuptiTracer* t = rt.tracer.get();
  lk.unlock();
  std::unique_lock<std::mutex> tl(rt.tick_mu, std::try_to_lock);
  if (tl.owns_lock()) t->Finish();
}

}  // namespace

void CuptiOnCommInit() noexcept {
  try {
    Runtime& rt = Rt();
    std::lock_guard<std::mutex> lk(rt.mu);
    if (rt.started) return;
    rt.started = true;
    const Status settings = ParseCuptiConfig(&rt.config);
    if (!settings.ok()) Log(LogLevel::kWarn, "%s", settings.message());
    if (rt.config.mode == CuptiMode::kOff) return;
    rt.owner_pid = getpid();
    rt.thread = StartThread("sentinel-cupti", [] { ThreadMain(); });
    if (rt.thread == nullptr) {
      SENTINEL_LOG_ONCE(LogLevel::kWarn, "CUPTI: cannot start the tracer thread; GPU activity off");
      return;
    }
    atexit(&AtExit);  // joins the thread (never destroyed: `rt` is leaked)
  } catch (...) {
    SENTINEL_LOG_ONCE(LogLevel::kWarn, "CUPTI: cannot start the tracer thread; GPU activity off");
  }
}

void CuptiOnLastCommEnd() noexcept {
  try {
    Runtime& rt = Rt();
    CuptiTracer* t = nullptr;
    {
      std::lock_guard<std::mutex> lk(rt.mu);
      if (rt.owner_pid != getpid()) return;
      t = rt.tracer.get();
    }
    if (t == nullptr) return;
    std::lock_guard<std::mutex> tl(rt.tick_mu);
    t->Finish();
  } catch (...) {
  }
}

void CuptiStepBoundaries(const int64_t* times, size_t n) noexcept {
  try {
    Runtime& rt = Rt();
    CuptiTracer* tr = nullptr;
    {
      std::lock_guard<std::mutex> lk(rt.mu);
      tr = rt.tracer.get();
    }
    if (tr != nullptr) tr->AddStepBoundaries(times, n);
  } catch (...) {
  }
}

}  // namespace sentinel::plugin::cupti
