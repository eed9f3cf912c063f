// The plugin core's lifecycle: the process-wide state and the on/off gate (first init, the kill
// switch, turning off, the fork child), and each communicator's context init and finalize. Slow
// paths: they may allocate, map memory and log.
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include "absl/base/attributes.h"

#include "common/errno_text.h"
#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/base/clock.h"
#include "plugin/base/env_config.h"
#include "plugin/base/event_mask.h"
#include "plugin/base/log.h"
#include "plugin/core/callback_meter.h"
#include "plugin/core/context_table.h"
#include "plugin/core/drainer.h"
#include "plugin/core/event_model.h"
#include "plugin/core/overhead_budget.h"
#include "plugin/core/profiler_core.h"
#include "plugin/core/profiler_state.h"
#include "plugin/core/slot_pool.h"
#include "plugin/core/slot_refs.h"
#include "plugin/core/thread_state.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {

ABSL_CONST_INIT std::atomic<int> g_gate{kGateUninit};

namespace profiler_internal {

ABSL_CONST_INIT Globals* g = nullptr;
ABSL_CONST_INIT char g_dummy_context[64] = {};

}  // namespace profiler_internal

using profiler_internal::BuildAndPush;
using profiler_internal::g;
using profiler_internal::g_dummy_context;
using profiler_internal::Globals;

namespace {

// How long setup spins to read the interval clock's first rate (tick_clock.h).
constexpr int64_t kTickCalibrationNs = 200000;

ABSL_CONST_INIT std::once_flag g_once;
// The pid whose atfork child handler ran; the child is off for good.
ABSL_CONST_INIT std::atomic<bool> g_forked_child{false};

void ChildAfterFork() {
  g_forked_child.store(true, std::memory_order_relaxed);
  g_gate.store(kGateOff, std::memory_order_relaxed);
}

void GlobalInit() {
  auto* gl = new (std::nothrow) Globals();
  if (gl == nullptr) return;
  const Status settings = ParseEnvConfig(&gl->config);
  gl->pid = getpid();
  ConfigureLog(gl->config.log_level);
  if (!settings.ok()) Log(LogLevel::kWarn, "bad settings ignored:\n%s", settings.message());
  uint32_t mask = kMaskDefault;
  if (!ParseEventMask(gl->config.events.c_str(), &mask).ok()) {
    Log(LogLevel::kWarn,
        "SENTINEL_EVENTS='%s' is not a preset, event list or number; using "
        "'default'",
        gl->config.events.c_str());
    mask = kMaskDefault;
  }
  gl->mask.store(mask, std::memory_order_relaxed);
  gl->grace_ns = static_cast<int64_t>(gl->config.proxy_grace_ms) * 1000000;
  gl->budget = OverheadBudget(gl->config.budget_percent);
  CalibrateMeterClock();  // before any callback is timed (callback_meter.h)
  if (gl->config.disable) {
    g = gl;
    g_gate.store(kGateOff, std::memory_order_relaxed);
    return;
  }
  Status mapped = gl->slots.Map(gl->config.pool_size);
  if (mapped.ok()) mapped = gl->contexts.Map(gl->config.max_comms);
  if (mapped.ok()) mapped = ThreadStates::Get().Init(gl->config.rings, gl->config.ring_records);
  if (!mapped.ok()) {
    Log(LogLevel::kWarn, "cannot map the plugin's pools (%s: %s); the plugin stays off",
        mapped.message(), rules::ErrnoText(mapped.error_number()));
    g = gl;
    g_gate.store(kGateOff, std::memory_order_relaxed);
    return;
  }
  // The interval clock of the ProxyStep times: its first rate after a 0.2 ms spin, an error of
  // about 2.5e-4 until the first heartbeat refines it (tick_clock.h), once per process.
  gl->ticks.Start(TscServesIntervals());
  gl->ticks.RefineAfter(kTickCalibrationNs);
  gl->ready = true;
  pthread_atfork(nullptr, nullptr, &ChildAfterFork);
  atexit(&DrainerAtExit);
  g = gl;
  g_gate.store(kGateOn, std::memory_order_relaxed);
}

}  // namespace

void* CoreInit(const InitArgs& a) noexcept {
  std::call_once(g_once, &GlobalInit);
  if (g == nullptr || !g->ready || g_forked_child.load(std::memory_order_relaxed) ||
      g_gate.load(std::memory_order_relaxed) != kGateOn) {
    if (a.mask_ptr != nullptr) {
      // relaxed: NCCL reads the mask with relaxed atomic loads
      // (docs/nccl-facts.md "4.5 The activation mask").
      reinterpret_cast<std::atomic<int>*>(a.mask_ptr)->store(0, std::memory_order_relaxed);
    }
    return g_dummy_context;
  }
  SetNcclLogger(a.logfn);
  int* expected_ptr = nullptr;
  if (g->mask_ptr.compare_exchange_strong(expected_ptr, a.mask_ptr, std::memory_order_relaxed)) {
    SetLogRank(a.rank);
  }
  Context* ctx = g->contexts.Claim();
  if (ctx == nullptr) {
    SENTINEL_LOG_ONCE(LogLevel::kWarn,
                      "more than %u live communicators; extra ones are not "
                      "profiled (SENTINEL_MAX_COMMS)",
                      g->contexts.size());
    if (a.mask_ptr != nullptr) {
      reinterpret_cast<std::atomic<int>*>(a.mask_ptr)
          ->store(static_cast<int>(g->mask.load(std::memory_order_relaxed)),
                  std::memory_order_relaxed);
    }
    return g_dummy_context;
  }
  ctx->comm_hash = a.comm_hash;
  ctx->rank = a.rank;
  ctx->nranks = a.nranks;
  ctx->nnodes = a.n_nodes;
  ctx->abi_version = a.abi_version;
  ctx->init_ns = MonoNs();
  memset(ctx->name, 0, sizeof(ctx->name));
  if (a.comm_name != nullptr) strncpy(ctx->name, a.comm_name, sizeof(ctx->name) - 1);
  ctx->calib.Reset();
  // The per-peer table lives in its own anonymous mapping (zeroed; like the arena, it is
  // reachable only from mmap'ed memory). A reused context: nobody can reach the old table.
  if (ctx->p2p_seq != nullptr) munmap(ctx->p2p_seq, ctx->p2p_seq_size * sizeof(*ctx->p2p_seq));
  ctx->p2p_seq = nullptr;
  ctx->p2p_seq_size = 0;
  if (a.nranks > 0 && a.nranks <= (1 << 20)) {
    uint32_t n = static_cast<uint32_t>(a.nranks) * 2;
    void* table = mmap(nullptr, n * sizeof(*ctx->p2p_seq), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (table != MAP_FAILED) {
      ctx->p2p_seq = static_cast<std::atomic<uint64_t>*>(table);
      for (uint32_t i = 0; i < n; ++i) new (&ctx->p2p_seq[i]) std::atomic<uint64_t>(0);
      ctx->p2p_seq_size = n;
    }
  }
  ctx->fallback_seq.store(0, std::memory_order_relaxed);
  for (auto& s : ctx->recovered_seq) s.store(0, std::memory_order_relaxed);
  ctx->inflight.Reset();
  ContextTable::Publish(ctx);

  uint32_t mask = g->mask.load(std::memory_order_relaxed);
  if (a.mask_ptr != nullptr) {
    // The mask is process-global (docs/nccl-facts.md "4.5 The activation mask"): every communicator
    // stores the same value.
    reinterpret_cast<std::atomic<int>*>(a.mask_ptr)
        ->store(static_cast<int>(mask), std::memory_order_relaxed);
  }
  SentinelWireCommInit ci;
  memset(&ci, 0, sizeof(ci));
  ci.comm_hash = a.comm_hash;
  ci.init_ns = ctx->init_ns;
  ci.rank = a.rank;
  ci.nranks = a.nranks;
  ci.nnodes = a.n_nodes;
  ci.pid = static_cast<uint32_t>(g->pid);
  ci.abi_version = static_cast<uint32_t>(a.abi_version);
  ci.event_mask = mask;
  memcpy(ci.comm_name, ctx->name, sizeof(ci.comm_name));
  DrainerOnCommInit(ci, g->config);
  return ctx;
}

void CoreFinalize(void* context) noexcept {
  if (g == nullptr || !g->ready) return;
  Context* ctx = g->contexts.AsContext(context);
  if (ctx == nullptr) return;
  ThreadState* ts = ThreadStates::Current();
  // Records still waiting for children are emitted now, marked truncated. Only the slots ever
  // handed out can hold one (Pool::Touched): the cost follows the job, not SENTINEL_POOL_SIZE.
  for (Kind k : {Kind::kColl, Kind::kP2p, Kind::kCeColl}) {
    Pool& pool = g->slots.pool(k);
    const uint32_t touched = pool.Touched();
    for (uint32_t i = 0; i < touched; ++i) {
      Slot* s = pool.begin + i;
      if (s->state.load(std::memory_order_acquire) != SlotState::kLive) continue;
      if (s->ctx.load(std::memory_order_relaxed) != ctx) continue;
      // Otherwise the last reference emits it.
      if (ClaimForTruncation(s)) BuildAndPush(s, true, ts);
    }
  }
  if (!ContextTable::MarkFinalized(ctx)) return;
  DrainerOnCommEnd(ctx->comm_hash, ctx->rank);
}

void TurnOff(const char* where, const char* why) noexcept {
  if (g_gate.exchange(kGateOff, std::memory_order_relaxed) == kGateOff) return;
  if (g != nullptr) {
    g->turn_offs.fetch_add(1, std::memory_order_relaxed);
    if (int* m = g->mask_ptr.load(std::memory_order_relaxed)) {
      reinterpret_cast<std::atomic<int>*>(m)->store(0, std::memory_order_relaxed);
    }
  }
  Log(LogLevel::kWarn, "turned off for the rest of the process at %s: %s", where, why);
}

uint64_t TurnOffCount() noexcept {
  return g == nullptr ? 0 : g->turn_offs.load(std::memory_order_relaxed);
}

uint32_t CurrentEventMask() noexcept {
  return g == nullptr ? 0 : g->mask.load(std::memory_order_relaxed);
}

void* DummyContext() noexcept { return g_dummy_context; }

bool ContextIdentity(void* context, uint64_t* comm_hash, int* rank) noexcept {
  if (g == nullptr || !g->ready) return false;
  Context* ctx = g->contexts.AsContext(context);
  if (ctx == nullptr) return false;
  *comm_hash = ctx->comm_hash;
  *rank = ctx->rank;
  return true;
}

}  // namespace sentinel::plugin
