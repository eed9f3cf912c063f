// DrainSignal: how a thread that fills its record ring fast wakes the sleeping drainer early
// (record_ring.h, "High water"), without a lock and without a system call unless the drainer is
// asleep. A futex word that Notify() bumps; the one waiter sleeps on it with a timeout (its
// period). Notify() never blocks: at most one FUTEX_WAKE, which only queues the waiter to run.
#pragma once

#include <atomic>
#include <cstdint>

namespace sentinel::plugin {

class DrainSignal {
 public:
  // Any thread, never blocks. A Notify() that comes while the waiter is awake is not lost: its
  // next Wait() returns at once.
  void Notify() noexcept;
  // The one waiter: sleeps until Notify() or for at most `timeout_ns`; returns whether a Notify()
  // came since the last Wait() returned (a timeout, or a signal interrupting the sleep: false).
  bool Wait(int64_t timeout_ns) noexcept;
  // Notify() calls that made a system call (statistics, tests).
  uint64_t wakes() const noexcept { return wakes_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint32_t> word_{0};
  std::atomic<uint32_t> sleeping_{0};
  std::atomic<uint64_t> wakes_{0};
  uint32_t seen_ = 0;  // the waiter's: word_ when its last Wait() returned
};

// The drainer's signal: ring high-water marks notify it (thread_state.cc wires every ring to it).
DrainSignal& TheDrainSignal() noexcept;
// The rings' wake function (RecordRing::WakeFn): TheDrainSignal().Notify().
void NotifyDrainer() noexcept;

}  // namespace sentinel::plugin
