// RecordRing: a fixed-capacity single-producer/single-consumer ring of completed records. The
// producer is one NCCL callback thread, the consumer the drainer thread. Never blocks: a push on a
// full ring fails and the caller counts the drop.
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
  // `storage` holds `capacity` records (a power of two) and outlives the ring.
  void Init(SentinelWireCollRecord* storage, uint32_t capacity) noexcept {
    SENTINEL_DCHECK(capacity != 0 && (capacity & (capacity - 1)) == 0);  // `& mask_` indexes
    buf_ = storage;
    mask_ = capacity - 1;
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
  }

  // Producer only.
  bool TryPush(const SentinelWireCollRecord& r) noexcept {
    SentinelWireCollRecord* slot = TryClaim();
    if (slot == nullptr) return false;
    *slot = r;
    Commit();
    return true;
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

 private:
  SentinelWireCollRecord* buf_ = nullptr;
  uint32_t mask_ = 0;
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t cached_tail_ = 0;  // producer only: a lower bound of tail_
  alignas(64) std::atomic<uint64_t> tail_{0};
};

}  // namespace sentinel::plugin
