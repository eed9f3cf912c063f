// RecordRing: a fixed-capacity single-producer/single-consumer ring of completed records. The
// producer is one NCCL callback thread, the consumer the drainer thread. Never blocks: a push on a
// full ring fails and the caller counts the drop.
//
// High water: the drainer sleeps between periodic drains, and a thread that produces faster than
// one ring per period would fill its ring meanwhile. So the producer asks for an early drain
// (the `wake` function given to Init) when the ring holds a quarter of its capacity. It looks at
// the consumer's position only when its own count says the ring may have reached that mark, so a
// commit costs one compare with a producer-owned word; and it asks again only after another
// eighth of the ring, so a drainer that is slow to run is not asked once per record.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/dcheck.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {

class RecordRing {
 public:
  using WakeFn = void (*)();

  // `storage` holds `capacity` records (a power of two) and outlives the ring. `wake` (may be
  // null): called on the producer's thread when the ring reaches its high water; it must not
  // block.
  void Init(SentinelWireCollRecord* storage, uint32_t capacity, WakeFn wake = nullptr) noexcept {
    SENTINEL_DCHECK(capacity != 0 && (capacity & (capacity - 1)) == 0);  // `& mask_` indexes
    buf_ = storage;
    mask_ = capacity - 1;
    wake_ = wake;
    high_water_ = capacity / 4 > 0 ? capacity / 4 : 1;
    check_at_ = wake != nullptr ? high_water_ : ~uint64_t{0};
  }

  // Makes the storage's pages resident now, so that no later push takes a page fault: a first
  // touch allocates a page, which can sleep in reclaim on a loaded node. Called once, when a thread
  // claims the ring. Contents are unchanged (MADV_POPULATE_WRITE, Linux 5.14); on older kernels it
  // fails and pages stay first-touched as before. Returns whether the pages were populated.
  bool Prefault() const noexcept {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = reinterpret_cast<uintptr_t>(buf_) & ~(page - 1);
    const uintptr_t end = reinterpret_cast<uintptr_t>(buf_ + mask_ + 1);
    return madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0;
  }

  // Producer only: the slot the next record goes into (fill it, then Commit()), or null when the
  // ring is full. Building the record in place saves a 136-byte copy per record.
  SentinelWireCollRecord* TryClaim() noexcept {
    // relaxed: only this thread writes head_.
    uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - cached_tail_ > mask_) {
      // acquire: the consumer's release store of tail_ says it finished reading those slots.
      // Re-read only when the cached value says "full", so the producer rarely touches the
      // consumer's cache line.
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (head - cached_tail_ > mask_) return nullptr;
    }
    return &buf_[head & mask_];
  }
  // Producer only: publishes the slot returned by the last TryClaim().
  void Commit() noexcept {
    uint64_t head = head_.load(std::memory_order_relaxed);
    // After a TryClaim that found room: the ring never holds more than its capacity.
    SENTINEL_DCHECK(head - cached_tail_ <= mask_);
    // release: publishes the record bytes before the consumer sees the new head.
    head_.store(head + 1, std::memory_order_release);
    // The next record's lines (a record spans up to three): fetch them before they are needed.
    const char* next = reinterpret_cast<const char*>(&buf_[(head + 1) & mask_]);
    __builtin_prefetch(next, 1, 3);
    __builtin_prefetch(next + 64, 1, 3);
    __builtin_prefetch(next + 135, 1, 3);
    if (__builtin_expect(head + 1 >= check_at_, 0)) CheckHighWater(head + 1);
  }

  // Producer only.
  bool TryPush(const SentinelWireCollRecord& r) noexcept {
    SentinelWireCollRecord* slot = TryClaim();
    if (slot == nullptr) return false;
    *slot = r;
    Commit();
    return true;
  }

  // Consumer only: the oldest unread records, in place: up to `max` of them, contiguous in the
  // storage (so never past its end: call again after Release for the rest). They stay valid, and
  // unchanged, until Release; returns how many (0: the ring is empty).
  size_t Peek(const SentinelWireCollRecord** first, size_t max) const noexcept {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);  // relaxed: the consumer's own
    const uint64_t head = head_.load(std::memory_order_acquire);  // acquire: pairs with Commit
    SENTINEL_DCHECK(head - tail <= uint64_t{mask_} + 1);
    const uint64_t to_end = uint64_t{mask_} + 1 - (tail & mask_);
    uint64_t n = head - tail;
    if (n > to_end) n = to_end;
    if (n > max) n = max;
    *first = &buf_[tail & mask_];
    return static_cast<size_t>(n);
  }
  // Consumer only: the first `n` records Peek returned are read; the producer may reuse them.
  void Release(size_t n) noexcept {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    SENTINEL_DCHECK(head_.load(std::memory_order_relaxed) - tail >= n);
    tail_.store(tail + n, std::memory_order_release);  // release: we are done reading them
  }

  // Consumer only. Copies up to `max` records out; returns how many.
  size_t PopBatch(SentinelWireCollRecord* out, size_t max) noexcept {
    uint64_t tail = tail_.load(std::memory_order_relaxed);  // relaxed: only the consumer writes it
    uint64_t head = head_.load(std::memory_order_acquire);  // acquire: pairs with TryPush
    SENTINEL_DCHECK(head - tail <= uint64_t{mask_} + 1);    // the producer never laps the consumer
    size_t n = 0;
    while (tail != head && n < max) {
      out[n++] = buf_[tail & mask_];
      ++tail;
    }
    tail_.store(tail, std::memory_order_release);  // release: we are done reading those slots
    return n;
  }

  bool Empty() const noexcept {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }
  uint32_t capacity() const noexcept { return mask_ + 1; }

  uint32_t high_water() const noexcept { return high_water_; }
  // Producer's count of early drains it asked for (tests, statistics).
  uint64_t wakes() const noexcept { return wakes_; }

 private:
  // Producer only, off the common path: `head` reached check_at_. Reads the consumer's position
  // and asks for a drain if the ring holds high_water_ records or more.
  __attribute__((noinline, cold)) void CheckHighWater(uint64_t head) noexcept {
    // acquire: as in TryClaim (a fresher lower bound of tail_ only gives the producer room).
    cached_tail_ = tail_.load(std::memory_order_acquire);
    if (head - cached_tail_ < high_water_) {
      check_at_ = cached_tail_ + high_water_;  // the earliest head that can hold high_water_
      return;
    }
    ++wakes_;
    wake_();
    check_at_ = head + (high_water_ / 2 > 0 ? high_water_ / 2 : 1);
  }

  SentinelWireCollRecord* buf_ = nullptr;
  uint32_t mask_ = 0;
  uint32_t high_water_ = 1;
  WakeFn wake_ = nullptr;
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t cached_tail_ = 0;          // producer only: a lower bound of tail_
  uint64_t check_at_ = ~uint64_t{0};  // producer only: the head at which to look at the fill
  uint64_t wakes_ = 0;                // producer only
  alignas(64) std::atomic<uint64_t> tail_{0};
};

}  // namespace sentinel::plugin
