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

// Claim chunks (per-thread slot pools). A pool is cut into chunks of consecutive slots, and a
// chunk has one owner at a time: the thread state that took it (an owner word set by a CAS), which
// alone turns its free slots live, with a load and a store instead of a CAS per claim. A slot goes
// back by its last reference's release store of kFree on whatever thread drops it; the owner's
// acquire load of kFree pairs with it, and since no other thread claims in an owned chunk, the
// load-then-store cannot race another claimer. A thread takes chunks in ring order from the pool's
// cursor (one fetch_add and one CAS per chunk: locked instructions amortised over the chunk), so
// slots are still reused FIFO, a chunk at a time.
inline constexpr uint32_t kMaxClaimChunk = 32;     // slots per chunk, at most (a power of two)
inline constexpr uint32_t kMinChunksPerPool = 64;  // a smaller pool gets smaller chunks
// Chunks a claim may take before it drops the event: each chunk's busy slots (events NCCL never
// stops, docs/nccl-facts.md "5.5 Special cases") are skipped, and a chunk another thread state
// still owns (after a full wrap) is passed over.
inline constexpr int kChunkProbes = 4;

struct Pool {
  Slot* begin = nullptr;
  uint32_t size = 0;
  uint32_t chunk = 1;   // slots per claim chunk (ChunkSizeFor)
  uint32_t chunks = 0;  // ceil(size / chunk)
  Kind kind = Kind::kNone;
  KernelChTimes* kch_times = nullptr;  // Coll/P2p: kMaxKchHandles per slot, in slot order
  // One per chunk: 0 free, 1 owned by a thread state (or, for one claim, by the overflow state).
  std::atomic<uint32_t>* owners = nullptr;
  alignas(64) std::atomic<uint64_t> cursor{0};  // chunks handed out (ring order)

  // Slow paths (finalize, the grace sweep): a bound on the slots from `begin` ever handed out.
  // Chunks are taken from `cursor` in ring order, and the overflow state's claims look at most
  // kChunkProbes chunks past it without moving it (SlotArena::ClaimShared), so every slot at or
  // past this bound is still untouched (kFree, a zero page never faulted in): scanning it would
  // cost time and memory proportional to SENTINEL_POOL_SIZE, not to the job.
  uint32_t Touched() const noexcept {
    // relaxed: a slot the caller must find was claimed before the call (NCCL starts every event
    // of a communicator before finalizing it), and its claimer's fetch_add came before that
    // claim; a slot claimed during a grace sweep is young and waits for the next sweep anyway.
    const uint64_t c = cursor.load(std::memory_order_relaxed);
    if (c >= chunks) return size;
    const uint64_t bound = (c + kChunkProbes) * chunk;
    return bound < size ? static_cast<uint32_t>(bound) : size;
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

  // Hot path: a free slot of kind `k` (state kLive, tag set) or null when no chunk it could take
  // had a free slot (counted as kCtrEventsDroppedPool). No locked instruction but when the thread
  // state's chunk of the pool is used up (see "Claim chunks" above).
  Slot* Claim(Kind k, ThreadState* ts) noexcept;

  // Slots per claim chunk of a pool of `size` slots: the largest power of two up to
  // kMaxClaimChunk that leaves at least kMinChunksPerPool chunks (1 for pools under 128 slots), so
  // that many threads can each own a chunk of one pool.
  static uint32_t ChunkSizeFor(uint32_t size) noexcept;

 private:
  // The slot after a claimed Coll/P2p, the one this thread most likely claims next: start loading
  // what it will write.
  static void PrefetchNext(const Pool& p, uint64_t i) noexcept;
  // The same for the API kinds (GroupApi, CollApi, P2pApi): their header line, claimed once per
  // collective or piece.
  static void PrefetchNextApi(const Pool& p, uint64_t i) noexcept;
  // Slow paths of Claim: the owner gives its chunk back and takes the next one (an empty range when
  // another thread state still owns it); the overflow state claims one slot.
  static void TakeChunk(Pool& p, int k, ThreadState* ts) noexcept;
  static Slot* ClaimShared(Pool& p, Kind k, ThreadState* ts) noexcept;

  Slot* begin_ = nullptr;
  size_t slots_ = 0;
  Pool pools_[static_cast<int>(Kind::kCount)];
};

inline void SlotArena::PrefetchNext(const Pool& p, uint64_t i) noexcept {
  // (Measured: helps Coll/P2p; costs the one-line child kinds more than it saves.) The four lines
  // a Coll/P2p uses (its record reads recv_bytes on the fourth) ...
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

inline void SlotArena::PrefetchNextApi(const Pool& p, uint64_t i) noexcept {
  // A FIFO pool wraps through more memory than the caches keep between two collectives (the
  // records' rings stream through megabytes), so each API slot's line was cold at its claim:
  // perf annotate put most of a CollApi start's samples on the load of its state. One prefetch
  // here lets the next collective find it loaded.
  const uint64_t next_i = i + 1 < p.size ? i + 1 : 0;
  const char* next = reinterpret_cast<const char*>(p.begin + next_i);
  __builtin_prefetch(next, 1, 3);
}

// FIFO claim from the thread state's own chunk: a stale pointer aliases a new event only after
// (about) a full wrap. A busy slot (a long-lived event) is skipped, not waited for.
inline Slot* SlotArena::Claim(Kind k, ThreadState* ts) noexcept {
  Pool& p = pool(k);
  if (__builtin_expect(ts->shared, 0)) return ClaimShared(p, k, ts);
  const int ki = static_cast<int>(k);
  ClaimRange& r = ts->claims[ki];
  for (int taken = 0;;) {
    while (r.next < r.end) {
      const uint32_t i = r.next++;
      Slot* s = p.begin + i;
      // acquire: pairs with the release store that freed the slot, so its old users are done.
      // The chunk is this thread state's alone, so no other claimer can come between the load
      // and the store (see "Claim chunks").
      if (s->state.load(std::memory_order_acquire) == SlotState::kFree) {
        s->state.store(SlotState::kLive, std::memory_order_relaxed);
        s->tag.store(TagFor(k), std::memory_order_relaxed);  // relaxed: constant per slot
        if (k == Kind::kColl || k == Kind::kP2p) {
          PrefetchNext(p, i);
        } else if (k == Kind::kGroupApi || k == Kind::kCollApi || k == Kind::kP2pApi) {
          PrefetchNextApi(p, i);
        }
        return s;
      }
    }
    if (taken == kChunkProbes) break;
    ++taken;
    TakeChunk(p, ki, ts);  // an empty range when that chunk had another owner
  }
  ts->Add(kCtrEventsDroppedPool);
  return nullptr;
}

}  // namespace sentinel::plugin
