// Per-communicator in-flight state for hang detection: where this rank is in the communicator's
// sequence of collectives. NCCL's threads update it on the hot path without locks (one relaxed
// RMW and five plain stores at enqueue, a load at each KernelCh start and a release store at the
// first (one writer: the proxy progress thread), one CAS at completion); the drainer reads it.
//
// Ordinals count Coll events per communicator (1 = the first). They are not NCCL's seqNumber,
// which is per function; p2p operations are not counted (ranks issue different ones). Collectives
// on one communicator run in stream order, so "last completed" is a maximum and the oldest
// incomplete collective is completed + 1. Its enqueue time, NCCL seqNumber, function and
// signature (bytes, datatype, root: what sentineld compares across ranks) sit in a small ring
// indexed by ordinal, each entry stamped with its ordinal (a seqlock) so that the
// reader never mixes two collectives.
#pragma once

#include <atomic>
#include <cstdint>

namespace sentinel::plugin {

// Entries of the enqueue-time ring (a power of two). The reader needs the entry of the oldest
// incomplete collective: it survives as long as fewer than this many collectives are in flight
// behind it; beyond that the drainer keeps the value it read earlier (in_flight_monitor.h).
inline constexpr uint32_t kInFlightRing = 256;

struct InFlightEntry {
  // The ordinal whose fields these are; 0 while a writer is between its stores.
  std::atomic<uint64_t> stamp;
  std::atomic<int64_t> enqueue_ns;
  std::atomic<uint64_t> seq;
  std::atomic<uint32_t> func;
  std::atomic<int32_t> root;
  std::atomic<uint64_t> bytes;
  std::atomic<uint32_t> datatype;
};

// What a collective was called with, as its Coll event says (no reduction operation there).
struct InFlightSignature {
  uint64_t bytes = 0;  // count x datatype size
  int32_t root = -1;   // Broadcast/Reduce root, -1 otherwise
  uint8_t datatype = 255;
};

// What the drainer reads for one communicator.
struct InFlightSnapshot {
  uint64_t enqueued = 0;
  uint64_t gpu_started = 0;
  uint64_t completed = 0;
  // Of the oldest incomplete collective (completed + 1); valid only if oldest_valid.
  bool oldest_valid = false;
  int64_t oldest_since_ns = 0;
  uint64_t oldest_seq = 0;
  uint8_t oldest_func = 0;
  InFlightSignature oldest_sig;
};

// Lives in the communicator's Context (zeroed mmap'ed memory; Reset() at each init). Each counter
// has its own cache line: the enqueuing thread, the thread that starts kernels (NCCL's proxy
// progress thread) and the completing thread write different lines.
struct InFlightCounters {
  alignas(64) std::atomic<uint64_t> enqueued;
  alignas(64) std::atomic<uint64_t> gpu_started;
  alignas(64) std::atomic<uint64_t> completed;
  alignas(64) InFlightEntry ring[kInFlightRing];

  // At communicator init, before the context is published (its release store orders these).
  void Reset() noexcept {
    enqueued.store(0, std::memory_order_relaxed);
    gpu_started.store(0, std::memory_order_relaxed);
    completed.store(0, std::memory_order_relaxed);
    for (InFlightEntry& e : ring) e.stamp.store(0, std::memory_order_relaxed);
  }

  // Hot path, at Coll start: takes the next ordinal and records when, which seqNumber, which
  // function and its signature. Returns the ordinal.
  uint64_t OnEnqueue(int64_t now_ns, uint64_t seq, uint8_t func,
                     const InFlightSignature& sig) noexcept {
    // relaxed: the RMW only hands out distinct ordinals (a communicator is normally enqueued from
    // one thread at a time; a CUDA-graph replay on the driver's callback thread may overlap).
    // Readers are ordered by the release stores of gpu_started/completed, which NCCL's hand-off
    // of the handle places after this, and by the entry's stamp below.
    uint64_t ordinal = enqueued.fetch_add(1, std::memory_order_relaxed) + 1;
    InFlightEntry& e = ring[ordinal & (kInFlightRing - 1)];
    // Seqlock writer: invalidate, fence, fields, publish. relaxed + release fence: a reader that
    // sees any of the new fields also sees the invalid stamp (or the new one) when it re-checks.
    e.stamp.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    e.enqueue_ns.store(now_ns, std::memory_order_relaxed);
    e.seq.store(seq, std::memory_order_relaxed);
    e.func.store(func, std::memory_order_relaxed);
    e.root.store(sig.root, std::memory_order_relaxed);
    e.bytes.store(sig.bytes, std::memory_order_relaxed);
    e.datatype.store(sig.datatype, std::memory_order_relaxed);
    // release: publishes the fields above to a reader that acquires this stamp.
    e.stamp.store(ordinal, std::memory_order_release);
    return ordinal;
  }

  // Hot path, at each KernelCh start of the collective `ordinal` (the first one moves it).
  // One writer: every KernelCh start of a communicator comes from its proxy progress thread
  // (docs/nccl-facts.md, Threads and concurrency), so a load and a release store, not StoreMax's
  // CAS (a locked instruction per collective).
  void OnGpuStart(uint64_t ordinal) noexcept {
    // release: as in StoreMax.
    if (ordinal > gpu_started.load(std::memory_order_relaxed)) {
      gpu_started.store(ordinal, std::memory_order_release);
    }
  }

  // When the collective's record completes (in stream order). A completed collective's kernel
  // certainly started: Read() raises gpu_started to completed (KernelCh lost or not in the mask),
  // which keeps this to one CAS.
  void OnComplete(uint64_t ordinal) noexcept { StoreMax(completed, ordinal); }

  // The drainer's read. Any thread, any time; never blocks the writers.
  InFlightSnapshot Read() const noexcept {
    InFlightSnapshot s;
    // acquire, newest stage first: whatever completed (or kernel start) we see, the enqueue
    // (and kernel start) that happened before it is visible to the later loads, so a snapshot
    // never shows completed > gpu_started > enqueued from a torn read.
    s.completed = completed.load(std::memory_order_acquire);
    s.gpu_started = gpu_started.load(std::memory_order_acquire);
    s.enqueued = enqueued.load(std::memory_order_relaxed);
    if (s.gpu_started < s.completed) s.gpu_started = s.completed;  // see OnComplete
    if (s.enqueued < s.gpu_started) s.enqueued = s.gpu_started;
    if (s.enqueued == s.completed) return s;
    uint64_t want = s.completed + 1;
    const InFlightEntry& e = ring[want & (kInFlightRing - 1)];
    // Seqlock reader: acquire the stamp, read the fields, acquire fence, re-check the stamp.
    if (e.stamp.load(std::memory_order_acquire) != want) return s;
    int64_t since = e.enqueue_ns.load(std::memory_order_relaxed);
    uint64_t seq = e.seq.load(std::memory_order_relaxed);
    uint32_t func = e.func.load(std::memory_order_relaxed);
    InFlightSignature sig;
    sig.root = e.root.load(std::memory_order_relaxed);
    sig.bytes = e.bytes.load(std::memory_order_relaxed);
    sig.datatype = static_cast<uint8_t>(e.datatype.load(std::memory_order_relaxed));
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.stamp.load(std::memory_order_relaxed) != want) return s;
    s.oldest_valid = true;
    s.oldest_since_ns = since;
    s.oldest_seq = seq;
    s.oldest_func = static_cast<uint8_t>(func);
    s.oldest_sig = sig;
    return s;
  }

 private:
  static void StoreMax(std::atomic<uint64_t>& a, uint64_t v) noexcept {
    // relaxed load: the common case (another channel of the same collective already moved it)
    // is a read of a line this thread usually has; only a new maximum pays for the CAS.
    uint64_t cur = a.load(std::memory_order_relaxed);
    // release: pairs with Read()'s acquire (everything before this update, including the
    // enqueue that NCCL ordered before it, is visible to a reader that sees the new value).
    while (v > cur &&
           !a.compare_exchange_weak(cur, v, std::memory_order_release, std::memory_order_relaxed)) {
    }
  }
};

}  // namespace sentinel::plugin
