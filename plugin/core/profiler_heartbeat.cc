// What the drainer thread asks of the plugin core (plugin/core/drainer.cc): the grace sweep of
// stopped records still waiting for ProxyOp children, the in-flight snapshots for hang detection,
// and the heartbeat's counters with the overhead budget's judgement. Slow paths, drainer thread.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "plugin/abi/nccl_profiler_abi.h"
#include "plugin/base/clock.h"
#include "plugin/base/log.h"
#include "plugin/core/context_table.h"
#include "plugin/core/event_model.h"
#include "plugin/core/in_flight_monitor.h"
#include "plugin/core/overhead_budget.h"
#include "plugin/core/profiler_core.h"
#include "plugin/core/profiler_state.h"
#include "plugin/core/slot_pool.h"
#include "plugin/core/slot_refs.h"
#include "plugin/core/thread_state.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {

using profiler_internal::g;
using profiler_internal::kProxyFamily;
using profiler_internal::ReleaseGrace;

void SweepGrace(int64_t now_ns) noexcept {
  if (g == nullptr || !g->ready) return;
  ThreadState* ts = ThreadStates::Current();
  for (Kind k : {Kind::kColl, Kind::kP2p}) {
    Pool& pool = g->slots.pool(k);
    // As in CoreFinalize: slots never handed out hold no grace (and stay unfaulted).
    const uint32_t touched = pool.Touched();
    for (uint32_t i = 0; i < touched; ++i) {
      Slot* s = pool.begin + i;
      if (s->state.load(std::memory_order_acquire) != SlotState::kLive) continue;
      if (s->grace.load(std::memory_order_relaxed) == 0) continue;
      // acquire: pairs with the stop's acq_rel CAS. The stop stores stop_ns just after that
      // CAS, so stop_ns == 0 below catches a stop still in progress.
      if ((s->refs.load(std::memory_order_acquire) & kStoppedBit) == 0) continue;
      int64_t stop = s->stop_ns.load(std::memory_order_relaxed);
      if (stop == 0 || now_ns - stop < g->grace_ns) continue;
      ReleaseGrace(s, ts);
    }
  }
}

void SnapshotInFlight(std::vector<InFlightSample>* out) noexcept {
  out->clear();
  if (g == nullptr || !g->ready) return;
  bool kernel_ch = (g->mask.load(std::memory_order_relaxed) & kSentinelProfileKernelCh) != 0;
  bool out_of_memory = false;
  g->contexts.ForEachLive([&](Context* c) {
    if (out_of_memory) return;
    InFlightSample sample;
    sample.comm_hash = c->comm_hash;
    sample.rank = c->rank;
    sample.nranks = c->nranks;
    sample.pid = static_cast<uint32_t>(g->pid);
    sample.kernel_ch = kernel_ch;
    sample.snap = c->inflight.Read();
    try {
      out->push_back(sample);
    } catch (...) {
      out_of_memory = true;  // fewer records this drain, nothing else
    }
  });
}

namespace {

// Once per heartbeat: the budget's judgement, and the step it takes when over budget.
uint32_t JudgeBudget(int64_t now_ns, uint64_t callback_ns_total) noexcept {
  std::lock_guard<std::mutex> lock(g->budget_mu);
  if (!g->budget.Observe(now_ns, callback_ns_total))
    return static_cast<uint32_t>(g->budget.level());
  BudgetLevel level = g->budget.level();
  if (level >= BudgetLevel::kNoProxy) {
    // The mask is process-global in NCCL (docs/nccl-facts.md "4.5 The activation mask"): new events
    // of every communicator stop coming.
    uint32_t mask = g->mask.load(std::memory_order_relaxed) &
                    ~(kProxyFamily | static_cast<uint32_t>(kSentinelProfileProxyCtrl));
    g->mask.store(mask, std::memory_order_relaxed);
    if (int* m = g->mask_ptr.load(std::memory_order_relaxed)) {
      reinterpret_cast<std::atomic<int>*>(m)->store(static_cast<int>(mask),
                                                    std::memory_order_relaxed);
    }
  }
  g->budget_level.store(static_cast<uint8_t>(level), std::memory_order_relaxed);
  Log(LogLevel::kWarn,
      "own overhead %.3f%% of the time exceeds SENTINEL_BUDGET=%.3f%%: degraded to step %u (%s)",
      g->budget.last_ratio() * 100.0, g->budget.fraction() * 100.0, static_cast<unsigned>(level),
      BudgetLevelName(level));
  return static_cast<uint32_t>(level);
}

}  // namespace

SentinelWireHeartbeat SnapshotCounters() noexcept {
  SentinelWireHeartbeat hb;
  memset(&hb, 0, sizeof(hb));
  hb.now_ns = MonoNs();
  if (g == nullptr || !g->ready) return hb;
  // At each snapshot (the drainer's heartbeat, once a second): the interval clock's rate from a
  // longer span since setup, so the proxy times' conversion error shrinks from setup's 2.5e-4 to
  // about 5e-8 after a second (tick_clock.h).
  g->ticks.Refine();
  ThreadStates& st = ThreadStates::Get();
  hb.records_completed = st.Sum(kCtrRecordsCompleted);
  hb.records_dropped_ring = st.Sum(kCtrRecordsDroppedRing);
  hb.events_dropped_pool = st.Sum(kCtrEventsDroppedPool);
  hb.events_dropped_threads = st.Sum(kCtrEventsDroppedThreads);
  hb.stale_handles = st.Sum(kCtrStaleHandles) + st.Sum(kCtrOrphanChildren);
  hb.pxn_foreign = st.Sum(kCtrPxnForeign);
  hb.records_truncated = st.Sum(kCtrRecordsTruncated);
  hb.callback_ns_total = st.Sum(kCtrCallbackNs);
  hb.callbacks_total = st.Sum(kCtrCallbacks) + st.Sum(kCtrKernelChCallbacks);
  hb.records_dropped_sink = g->sink_drops.load(std::memory_order_relaxed);
  hb.pid = static_cast<uint32_t>(g->pid);
  hb.budget_level = JudgeBudget(hb.now_ns, hb.callback_ns_total);
  return hb;
}

void AddSinkDrops(uint64_t n) noexcept {
  if (g != nullptr) g->sink_drops.fetch_add(n, std::memory_order_relaxed);
}

}  // namespace sentinel::plugin
