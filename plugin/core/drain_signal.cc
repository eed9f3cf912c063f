// The drainer's futex (see drain_signal.h).
#include "plugin/core/drain_signal.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "absl/base/attributes.h"

namespace sentinel::plugin {
namespace {

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex is a plain word");
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

ABSL_CONST_INIT DrainSignal g_signal;

}  // namespace

// seq_cst on both sides (Dekker): the waiter stores sleeping_ then loads word_, Notify() bumps
// word_ then loads sleeping_. Either the waiter sees the bump (and does not sleep), or Notify()
// sees the waiter asleep (or about to be) and wakes it; FUTEX_WAIT itself refuses to sleep when
// word_ has moved since the waiter read it.
void DrainSignal::Notify() noexcept {
  word_.fetch_add(1, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst) == 0) return;
  wakes_.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
  (void)Futex(&word_, FUTEX_WAKE_PRIVATE, 1, nullptr);
}

bool DrainSignal::Wait(int64_t timeout_ns) noexcept {
  sleeping_.store(1, std::memory_order_seq_cst);
  if (word_.load(std::memory_order_seq_cst) == seen_ && timeout_ns > 0) {
    // Relative to CLOCK_MONOTONIC; EINTR, EAGAIN (word_ moved) and ETIMEDOUT all end the wait.
    const timespec timeout{static_cast<time_t>(timeout_ns / 1'000'000'000),
                           static_cast<long>(timeout_ns % 1'000'000'000)};
    (void)Futex(&word_, FUTEX_WAIT_PRIVATE, seen_, &timeout);
  }
  sleeping_.store(0, std::memory_order_relaxed);  // relaxed: a late Notify only costs a wake
  const uint32_t now = word_.load(std::memory_order_acquire);
  const bool notified = now != seen_;
  seen_ = now;
  return notified;
}

DrainSignal& TheDrainSignal() noexcept { return g_signal; }

void NotifyDrainer() noexcept { g_signal.Notify(); }

}  // namespace sentinel::plugin
