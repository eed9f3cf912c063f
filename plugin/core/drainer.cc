// The drainer thread and the control-record queue (see drainer.h).
#include "plugin/core/drainer.h"

#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <mutex>
#include <thread>

#include "plugin/base/clock.h"
#include "plugin/base/log.h"
#include "plugin/base/no_destructor.h"
#include "plugin/base/thread.h"
#include "plugin/core/drain_signal.h"
#include "plugin/core/in_flight_monitor.h"
#include "plugin/core/profiler_core.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin {
namespace {

constexpr size_t kMaxQueuedControl = 1024;
constexpr size_t kBatch = 256;
constexpr int64_t kHeartbeatNs = 1000000000;
constexpr auto kExitWait = std::chrono::milliseconds(1000);

struct ControlItem {
  enum Kind : uint8_t { kInit, kEnd, kControl } kind = kControl;
  SentinelWireCommInit init{};
  uint64_t comm_hash = 0;
  int rank = 0;
  uint16_t type = 0;
  std::vector<uint8_t> payload;
};

struct DrainerState {
  std::mutex lifecycle_mu;  // live_comms, thread start/stop, wiring
  DrainerWiring wiring;     // guarded by lifecycle_mu
  int live_comms = 0;
  std::thread* thread = nullptr;
  pid_t owner_pid = 0;
  // SENTINEL_DRAIN_INTERVAL_MS, set at the first init; until then EnvConfig's default.
  uint32_t interval_ms = EnvConfig{}.drain_interval_ms;

  // The thread sleeps on TheDrainSignal() (rings past their high water, and stop, notify it);
  // wake_cv only tells the exit path that the thread has left its loop.
  std::mutex wake_mu;
  std::condition_variable wake_cv;
  bool stop = false;    // guarded by wake_mu
  bool exited = false;  // guarded by wake_mu: the thread has left its loop

  std::timed_mutex drain_mu;  // one drain at a time; guards everything below
  std::vector<std::unique_ptr<RecordSink>> sinks;
  bool sinks_built = false;
  std::vector<ControlItem> items;  // the queue's contents being handled (kept: no allocation)
  int64_t last_heartbeat_ns = 0;
  // The proxy-grace sweep walks every slot ever handed out: at a periodic drain, a quarter of the
  // grace apart at most (a slot waits at most the grace plus one period, or 1.25 graces with a
  // short SENTINEL_DRAIN_INTERVAL_MS).
  int64_t sweep_every_ns = 0;
  int64_t last_sweep_ns = 0;
  std::unique_ptr<InFlightMonitor> in_flight;  // built with the sinks
  std::vector<InFlightSample> in_flight_samples;
  std::vector<SentinelWireInFlight> in_flight_out;

  std::mutex queue_mu;
  std::vector<ControlItem> queue;  // guarded by queue_mu
};

// What a drain does. An early drain (a ring past its high water woke the drainer before its
// period) only moves records, with the control records queued before them; the periodic work
// (proxy grace, in-flight states, heartbeat, freeing exited threads' rings) keeps its period.
enum class DrainKind { kPeriodic, kRecordsOnly };

DrainerState& State() {
  static NoDestructor<DrainerState> state;  // leaked: used by atexit and late threads
  return *state;
}

template <typename Fn>
void ForEachSink(DrainerState& st, Fn&& fn) {
  for (auto& sink : st.sinks) {
    try {
      fn(sink.get());
    } catch (...) {
      // Sinks must not throw; if one does, the event is lost and counted, nothing else.
      AddSinkDrops(1);
    }
  }
}

// Hands every ring's records to the sinks in place (no copy on the way: a sink copies what it
// keeps, e.g. into its frame buffer), releasing each batch once every sink had it.
void DrainRings(DrainerState& st) {
  ThreadStates& ts = ThreadStates::Get();
  for (uint32_t i = 0; i < ts.size(); ++i) {
    ThreadState* t = ts.at(i);
    if (t->use.load(std::memory_order_acquire) == 0) continue;
    for (;;) {
      const SentinelWireCollRecord* records = nullptr;
      const size_t n = t->ring.Peek(&records, kBatch);
      if (n == 0) break;
      ForEachSink(st, [&](RecordSink* s) {
        size_t accepted = s->OnRecords(records, n);
        if (accepted < n) AddSinkDrops(n - accepted);
      });
      t->ring.Release(n);
    }
  }
}

// The periodic part of a drain after the records: exited threads' rings freed, in-flight states.
void AfterRecordsPeriodic(DrainerState& st, bool force_heartbeat) {
  ThreadStates::Get().ReapExited();
  if (st.in_flight != nullptr && !st.sinks.empty()) {
    SnapshotInFlight(&st.in_flight_samples);
    st.in_flight_out.clear();
    st.in_flight->Observe(st.in_flight_samples.data(), st.in_flight_samples.size(), MonoNs(),
                          force_heartbeat, &st.in_flight_out);
    for (const SentinelWireInFlight& r : st.in_flight_out)
      ForEachSink(st, [&](RecordSink* s) { s->OnInFlight(r); });
  }
}

// Requires drain_mu.
void DrainOnce(DrainerState& st, bool force_heartbeat, DrainKind kind = DrainKind::kPeriodic) {
  std::vector<ControlItem>& items = st.items;
  {
    std::lock_guard<std::mutex> lk(st.queue_mu);
    items.swap(st.queue);
  }
  // Comm inits first: every record in the rings was pushed after its communicator's init.
  for (const ControlItem& it : items) {
    if (it.kind == ControlItem::kInit)
      ForEachSink(st, [&](RecordSink* s) { s->OnCommInit(it.init); });
  }
  int64_t now = MonoNs();
  if (kind == DrainKind::kPeriodic &&
      (force_heartbeat || now - st.last_sweep_ns >= st.sweep_every_ns)) {
    st.last_sweep_ns = now;
    SweepGrace(now);
  }
  DrainRings(st);
  // After the records: a state that counts a collective complete follows that collective's record.
  if (kind == DrainKind::kPeriodic) AfterRecordsPeriodic(st, force_heartbeat);
  for (const ControlItem& it : items) {
    if (it.kind == ControlItem::kEnd) {
      ForEachSink(st, [&](RecordSink* s) { s->OnCommEnd(it.comm_hash, it.rank); });
    } else if (it.kind == ControlItem::kControl) {
      ForEachSink(st, [&](RecordSink* s) {
        s->OnControlRecord(it.type, it.payload.data(), it.payload.size());
      });
    }
  }
  items.clear();
  if (kind == DrainKind::kPeriodic &&
      (force_heartbeat || now - st.last_heartbeat_ns >= kHeartbeatNs)) {
    st.last_heartbeat_ns = now;
    SentinelWireHeartbeat hb = SnapshotCounters();
    ForEachSink(st, [&](RecordSink* s) { s->OnHeartbeat(hb); });
  }
  ForEachSink(st, [](RecordSink* s) { s->OnDrainEnd(); });
}

void FinalDrain(DrainerState& st) {
  std::lock_guard<std::timed_mutex> lk(st.drain_mu);
  DrainOnce(st, true);
  ForEachSink(st, [](RecordSink* s) { s->Flush(); });
}

bool StopAsked(DrainerState* st) {
  std::lock_guard<std::mutex> lk(st->wake_mu);
  return st->stop;
}

// A periodic drain every interval_ms; between them, an early one whenever a ring past its high
// water notifies the signal (StopDrainer notifies it too).
void ThreadMain(DrainerState* st) {
  const int64_t interval_ns = static_cast<int64_t>(st->interval_ms) * 1'000'000;
  int64_t next_periodic_ns = MonoNs() + interval_ns;
  DrainSignal& signal = TheDrainSignal();
  while (!StopAsked(st)) {
    const int64_t left_ns = next_periodic_ns - MonoNs();
    if (left_ns > 0) (void)signal.Wait(left_ns);
    if (StopAsked(st)) break;
    const int64_t now = MonoNs();
    const bool periodic = now >= next_periodic_ns;
    if (periodic) next_periodic_ns = now + interval_ns;
    try {
      std::lock_guard<std::timed_mutex> dl(st->drain_mu);
      DrainOnce(*st, false, periodic ? DrainKind::kPeriodic : DrainKind::kRecordsOnly);
    } catch (...) {
      SENTINEL_LOG_ONCE(LogLevel::kWarn, "drainer: unexpected exception; records may be lost");
    }
  }
  std::lock_guard<std::mutex> lk(st->wake_mu);
  st->exited = true;
  st->wake_cv.notify_all();
}

// Requires lifecycle_mu.
Status StartDrainer(DrainerState& st) {
  if (st.thread != nullptr) return Status::Ok();
  {
    std::lock_guard<std::mutex> lk(st.wake_mu);
    st.stop = false;
    st.exited = false;
  }
  DrainerState* state = &st;
  st.thread = StartThread("sentinel-drain", [state] { ThreadMain(state); });
  if (st.thread == nullptr) {
    return Status(StatusCode::kResourceExhausted, "cannot start the drainer thread");
  }
  return Status::Ok();
}

// Requires lifecycle_mu; the thread has been told to stop.
void JoinDrainer(DrainerState& st) { JoinThread(st.thread); }

// Requires lifecycle_mu.
void StopDrainer(DrainerState& st) {
  if (st.thread == nullptr) return;
  {
    std::lock_guard<std::mutex> lk(st.wake_mu);
    st.stop = true;
  }
  TheDrainSignal().Notify();
  JoinDrainer(st);
}

// The thread is joined, not left to finish on its own: a thread still tearing down while the
// process exits races with whatever stops the world at exit (LeakSanitizer's leak check crashes
// on it). Bounded like the rest of the exit path: a thread that has not left its loop, or a
// lifecycle lock another thread holds, leaves the thread to the process's end.
void JoinAtExit(DrainerState& st, int64_t deadline_ns) {
  {
    std::unique_lock<std::mutex> wl(st.wake_mu);
    int64_t left_ns = deadline_ns - MonoNs();
    if (left_ns < 0) left_ns = 0;
    if (!st.wake_cv.wait_for(wl, std::chrono::nanoseconds(left_ns), [&] { return st.exited; })) {
      return;
    }
  }
  std::unique_lock<std::mutex> ll(st.lifecycle_mu, std::try_to_lock);
  if (ll.owns_lock()) JoinDrainer(st);
}

}  // namespace

void SetDrainerWiring(const DrainerWiring& wiring) noexcept {
  DrainerState& st = State();
  std::lock_guard<std::mutex> lk(st.lifecycle_mu);
  st.wiring = wiring;
}

bool EnqueueControlRecord(uint16_t type, const void* payload, size_t size) {
  if (!PluginOn() || size > SENTINEL_WIRE_FRAME_MAX || (size > 0 && payload == nullptr)) {
    return false;
  }
  try {
    ControlItem it;
    it.kind = ControlItem::kControl;
    it.type = type;
    const auto* p = static_cast<const uint8_t*>(payload);
    it.payload.assign(p, p + size);
    DrainerState& st = State();
    std::lock_guard<std::mutex> lk(st.queue_mu);
    if (st.queue.size() >= kMaxQueuedControl) return false;
    st.queue.push_back(std::move(it));
    return true;
  } catch (...) {
    return false;
  }
}

void DrainerOnCommInit(const SentinelWireCommInit& comm, const EnvConfig& config) noexcept {
  try {
    DrainerState& st = State();
    std::lock_guard<std::mutex> lk(st.lifecycle_mu);
    if (!st.sinks_built) {
      std::lock_guard<std::timed_mutex> dl(st.drain_mu);
      if (st.wiring.build_sinks != nullptr) st.sinks = st.wiring.build_sinks(config);
      st.sinks_built = true;
      st.interval_ms = config.drain_interval_ms;
      st.sweep_every_ns = static_cast<int64_t>(config.proxy_grace_ms) * 1'000'000 / 4;
      InFlightMonitorOptions in_flight;
      in_flight.fixed_threshold_ns = static_cast<int64_t>(config.inflight_stuck_ms) * 1000000;
      in_flight.floor_ns = 4 * static_cast<int64_t>(config.drain_interval_ms) * 1000000;
      st.in_flight = std::make_unique<InFlightMonitor>(in_flight);
      st.owner_pid = getpid();
    }
    {
      ControlItem it;
      it.kind = ControlItem::kInit;
      it.init = comm;
      std::lock_guard<std::mutex> ql(st.queue_mu);
      st.queue.push_back(std::move(it));
    }
    ++st.live_comms;
    Status started = StartDrainer(st);
    if (!started.ok()) {
      SENTINEL_LOG_ONCE(LogLevel::kWarn, "drainer: %s; records are dropped", started.message());
    }
    if (st.wiring.on_comm_init != nullptr) st.wiring.on_comm_init();
  } catch (...) {
    SENTINEL_LOG_ONCE(LogLevel::kWarn, "drainer: cannot register a communicator");
  }
}

void DrainerOnCommEnd(uint64_t comm_hash, int rank) noexcept {
  try {
    DrainerState& st = State();
    {
      ControlItem it;
      it.kind = ControlItem::kEnd;
      it.comm_hash = comm_hash;
      it.rank = rank;
      std::lock_guard<std::mutex> ql(st.queue_mu);
      st.queue.push_back(std::move(it));
    }
    std::lock_guard<std::mutex> lk(st.lifecycle_mu);
    if (st.live_comms > 0) --st.live_comms;
    if (st.live_comms == 0) {
      // e.g. the CUPTI tracer: its last windows go out with the final drain.
      if (st.wiring.on_last_comm_end != nullptr) st.wiring.on_last_comm_end();
      StopDrainer(st);
      FinalDrain(st);
    }
  } catch (...) {
    SENTINEL_LOG_ONCE(LogLevel::kWarn, "drainer: error at communicator finalize");
  }
}

void DrainerFlushNow() noexcept {
  try {
    FinalDrain(State());
  } catch (...) {
  }
}

void DrainerAtExit() noexcept {
  try {
    DrainerState& st = State();
    // A forked child never touches the parent's rings, thread or files.
    if (st.owner_pid == 0 || st.owner_pid != getpid() || !PluginOn()) return;
    {
      std::lock_guard<std::mutex> lk(st.wake_mu);
      st.stop = true;
    }
    TheDrainSignal().Notify();
    // Bounded: if a drain is stuck (a sink blocked), give up rather than hang the exit.
    // Polls try_lock (TSan does not model timed_mutex::try_lock_for).
    const int64_t deadline_ns = MonoNs() + std::chrono::nanoseconds(kExitWait).count();
    bool locked = false;
    for (auto waited = std::chrono::milliseconds(0); waited < kExitWait && !locked;
         waited += std::chrono::milliseconds(1)) {
      locked = st.drain_mu.try_lock();
      if (!locked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (locked) {
      DrainOnce(st, true);
      ForEachSink(st, [](RecordSink* s) { s->Flush(); });
      st.drain_mu.unlock();
      JoinAtExit(st, deadline_ns);  // within the same 1 s; never after a stuck drain
    }
  } catch (...) {
  }
}

bool DrainerRunning() noexcept {
  DrainerState& st = State();
  std::lock_guard<std::mutex> lk(st.lifecycle_mu);
  return st.thread != nullptr;
}

}  // namespace sentinel::plugin
