// The handle pools: one anonymous mapping of Slots, split into one pool per event kind, and the
// checks that turn a pointer NCCL hands back into a Slot. Claims are FIFO per pool (see
// event_model.h for why) and lock-free.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "plugin/base/status.h"
#include "plugin/core/event_model.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin {

static_assert(static_cast<int>(Kind::kCount) <= kMaxPoolKinds, "claim chunks per kind");

inline Kind KindOf(const Slot* s) {
  // relaxed: the tag of a slot never changes once set (one pool = one kind).
  return static_cast<Kind>(s->tag.load(std::memory_order_relaxed) & 0xFF);
}

struct Pool {
  Slot* begin = nullptr;
  uint32_t size = 0;
  Kind kind = Kind::kNone;
  KernelChTimes* kch_times = nullptr;  // Coll/P2p: kMaxKchHandles per slot, in slot order
  alignas(64) std::atomic<uint64_t> cursor{0};

  // Slow paths (finalize, the grace sweep): how many slots from `begin` were ever handed out.
  // Claims take indices from `cursor` in ring order, so every slot at or past this bound is
  // still untouched (kFree, a zero page never faulted in): scanning it would cost time and
  // memory proportional to SENTINEL_POOL_SIZE, not to the job.
  uint32_t Touched() const noexcept {
    // relaxed: a slot the caller must find was claimed before the call (NCCL starts every event
    // of a communicator before finalizing it), and its claimer's fetch_add came before that
    // claim; a slot claimed during a grace sweep is young and waits for the next sweep anyway.
    const uint64_t c = cursor.load(std::memory_order_relaxed);
    return c < size ? static_cast<uint32_t>(c) : size;
  }

  // Coll/P2p: the per-channel GPU timers of the slot at `index`.
  KernelChTimes* KernelChTimesAt(uint64_t index) const noexcept {
    return kch_times + index * kMaxKchHandles;
  }
};

class SlotArena {
 public:
  // Slots of kind `k`'s pool for SENTINEL_POOL_SIZE = `pool_size`.
  static uint32_t PoolSizeFor(Kind k, uint32_t pool_size) noexcept;

  // Slow path, once: maps every pool. ResourceExhausted, with the size and errno, when the memory
  // cannot be mapped.
  Status Map(uint32_t pool_size) noexcept;

  Pool& pool(Kind k) noexcept { return pools_[static_cast<int>(k)]; }

  // The per-channel GPU timers of `s`, a Coll/P2p slot (KernelChTimes).
  KernelChTimes* KernelChTimesOf(const Slot* s) noexcept {
    const Pool& p = pools_[static_cast<int>(KindOf(s))];
    return p.KernelChTimesAt(static_cast<uint64_t>(s - p.begin));
  }
  size_t slots() const noexcept { return slots_; }

  // Any pointer NCCL gives back: range + alignment + tag, before reading anything else.
  Slot* AsSlot(void* p) const noexcept {
    auto u = reinterpret_cast<uintptr_t>(p);
    auto b = reinterpret_cast<uintptr_t>(begin_);
    if (u < b || u >= b + slots_ * sizeof(Slot) || (u - b) % sizeof(Slot) != 0) return nullptr;
    auto* s = static_cast<Slot*>(p);
    uint64_t tag = s->tag.load(std::memory_order_relaxed);
    return (tag & kSlotMagicMask) == kSlotMagic ? s : nullptr;
  }
  // A KernelCh handle (KernelChHandle): its Coll/P2p slot and channel, checked like AsSlot.
  Slot* AsKernelChParent(void* p, uint32_t* channel) const noexcept {
    auto u = reinterpret_cast<uintptr_t>(p);
    auto b = reinterpret_cast<uintptr_t>(begin_);
    if (u < b || u >= b + slots_ * sizeof(Slot)) return nullptr;
    uintptr_t off = (u - b) % sizeof(Slot);
    if ((off & 1) == 0 || off >= uintptr_t{2} * kMaxKchHandles) return nullptr;
    auto* s = reinterpret_cast<Slot*>(u - off);
    uint64_t tag = s->tag.load(std::memory_order_relaxed);
    if (tag != TagFor(Kind::kColl) && tag != TagFor(Kind::kP2p)) return nullptr;
    *channel = static_cast<uint32_t>(off >> 1);
    return s;
  }
  Slot* AsSlotOfKind(void* p, Kind k) const noexcept {
    Slot* s = AsSlot(p);
    return s == nullptr || KindOf(s) != k ? nullptr : s;
  }

  // Hot path: a free slot of kind `k` (state kLive, tag set) or null when the probes found none
  // (counted as kCtrEventsDroppedPool).
  Slot* Claim(Kind k, ThreadState* ts) noexcept;

 private:
  static constexpr int kClaimProbes = 4;
  // Pool indices a thread takes from a pool's cursor at once (pools of >= 8 chunks only).
  static constexpr uint32_t kClaimChunk = 8;

  static uint64_t NextIndex(Pool& pool, int k, ThreadState* ts) noexcept;

  Slot* begin_ = nullptr;
  size_t slots_ = 0;
  Pool pools_[static_cast<int>(Kind::kCount)];
};

// The next pool index for this thread. An owned thread state takes a chunk of consecutive indices
// with one fetch_add and hands them out without atomics; the shared overflow state (several
// writers) takes one index at a time. Either way indices advance in ring order, so slots are
// reused FIFO up to the chunk size.
inline uint64_t SlotArena::NextIndex(Pool& pool, int k, ThreadState* ts) noexcept {
  // relaxed: the cursor only spreads claimers over slots; the CAS in Claim owns the slot.
  if (ts->shared) return pool.cursor.fetch_add(1, std::memory_order_relaxed);
  if (ts->claim_left[k] == 0) {
    uint32_t chunk = pool.size >= 8 * kClaimChunk ? kClaimChunk : 1;
    ts->claim_next[k] = pool.cursor.fetch_add(chunk, std::memory_order_relaxed);
    ts->claim_left[k] = chunk;
  }
  --ts->claim_left[k];
  return ts->claim_next[k]++;
}

// FIFO claim: a stale pointer aliases a new event only after (about) a full wrap. A few probes
// skip a slot held by a long-lived event (e.g. a ProxyOp NCCL never stops,
// docs/nccl-facts.md "5.5 Special cases") instead of dropping.
inline Slot* SlotArena::Claim(Kind k, ThreadState* ts) noexcept {
  Pool& p = pool(k);
  for (int probe = 0; probe < kClaimProbes; ++probe) {
    uint64_t i = NextIndex(p, static_cast<int>(k), ts) % p.size;
    Slot* s = p.begin + i;
    SlotState expected = SlotState::kFree;
    // acquire: pairs with the release store that freed the slot, so its old users are done.
    if (s->state.load(std::memory_order_relaxed) == SlotState::kFree &&
        s->state.compare_exchange_strong(expected, SlotState::kLive, std::memory_order_acquire,
                                         std::memory_order_relaxed)) {
      s->tag.store(TagFor(k), std::memory_order_relaxed);  // relaxed: constant per slot
      if (k == Kind::kColl || k == Kind::kP2p) {
        // The slot this thread most likely claims next (FIFO): start loading the four lines a
        // Coll/P2p uses now (its record reads recv_bytes on the fourth), so that claim does not
        // wait for cache misses. (Measured: helps Coll/P2p; costs the one-line child kinds more
        // than it saves.)
        const uint64_t next_i = (i + 1) % p.size;
        const char* next = reinterpret_cast<const char*>(p.begin + next_i);
        __builtin_prefetch(next, 1, 3);
        __builtin_prefetch(next + 64, 1, 3);
        __builtin_prefetch(next + 128, 1, 3);
        __builtin_prefetch(next + 192, 1, 3);
        // ... and the first 8 channels' GPU timers (KernelChTimes), written by its KernelCh.
        const char* times = reinterpret_cast<const char*>(p.KernelChTimesAt(next_i));
        __builtin_prefetch(times, 1, 3);
        __builtin_prefetch(times + 64, 1, 3);
      }
      return s;
    }
  }
  ts->Add(kCtrEventsDroppedPool);
  return nullptr;
}

}  // namespace sentinel::plugin
