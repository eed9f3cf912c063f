// RecordRing: a fixed-capacity single-producer/single-consumer ring of completed records. The
// producer is one NCCL callback thread, the consumer the drainer thread. Never blocks: a push on a
// full ring fails and the caller counts the drop.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {

class RecordRing {
 public:
  // `storage` holds `capacity` records (a power of two) and outlives the ring.
  void Init(SentinelWireCollRecord* storage, uint32_t capacity) noexcept {
    buf_ = storage;
    mask_ = capacity - 1;
  }

  // Producer only.
  bool TryPush(const SentinelWireCollRecord& r) noexcept {
    // relaxed: only this thread writes head_.
    uint64_t head = head_.load(std::memory_order_relaxed);
    // acquire: the consumer's release store of tail_ says it finished reading those slots.
    if (head - tail_.load(std::memory_order_acquire) > mask_) return false;
    buf_[head & mask_] = r;
    // release: publishes the record bytes before the consumer sees the new head.
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  // Consumer only. Copies up to `max` records out; returns how many.
  size_t PopBatch(SentinelWireCollRecord* out, size_t max) noexcept {
    uint64_t tail = tail_.load(std::memory_order_relaxed);  // relaxed: only the consumer writes it
    uint64_t head = head_.load(std::memory_order_acquire);  // acquire: pairs with TryPush
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
  alignas(64) std::atomic<uint64_t> tail_{0};
};

}  // namespace sentinel::plugin
