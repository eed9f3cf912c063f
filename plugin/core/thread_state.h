// ThreadState: what one thread that calls into the plugin owns: its record ring and its counters.
// States are preallocated at the first init and claimed by a thread on its first callback (a
// thread-local pointer, initial-exec TLS). A pthread key destructor hands a dead thread's state
// back; the drainer frees it once its ring is empty. With no free state, the thread's records are
// dropped and counted, and its counters go to one shared overflow state.
#pragma once

#include <atomic>
#include <cstdint>

#include "plugin/base/status.h"
#include "plugin/core/record_ring.h"

namespace sentinel::plugin {

enum Counter : int {
  kCtrCallbacks = 0,         // owner: also CallbackMeter's sampling tick
  kCtrCallbackNs,            // sampled: 1 in 256 callbacks is timed, x256
  kCtrRecordsCompleted,      // pushed into a ring
  kCtrRecordsDroppedRing,    // ring full
  kCtrEventsDroppedPool,     // no free slot
  kCtrEventsDroppedThreads,  // record of a thread without a ring
  kCtrStaleHandles,
  kCtrPxnForeign,
  kCtrRecordsTruncated,
  kCtrOrphanChildren,     // a child whose parent had already completed
  kCtrKernelChCallbacks,  // KernelCh callbacks, counted per collective (callback_meter.h)
  kNumCounters,
};

// Pool kinds a thread can hold a claim chunk for (slot_pool.h static_asserts Kind::kCount).
inline constexpr int kMaxPoolKinds = 16;

struct Context;
struct Slot;

// The GroupApi of the owning thread's open NCCL group, held here rather than in a slot until one
// of its P2pApi pieces needs the group's function-recovery state (func_recovery.h): a group of
// collectives alone then costs no slot, no lookup and no reference count (at the default mask a
// thread's groups are kept only once it has started a P2pApi: p2p_thread below). NCCL runs a group
// on one application thread, one group at a time: its GroupApi start, states 23 and 24, its
// CollApi/P2pApi starts and its stop (docs/nccl-facts.md "5.3 Call sequences" and "5.4 Threads and
// concurrency"). Owner only.
struct OpenGroup {
  Context* ctx = nullptr;  // the group's first operation's context
  Slot* slot = nullptr;    // the GroupApi slot, once a P2pApi piece needed one
  bool open = false;       // between the GroupApi's start and stop
  bool graph_captured = false;
  bool has_coll = false;  // a CollApi piece started before the slot existed (NoteCollApiPiece)
};

// Pool indices [next, end) of a claim chunk not yet looked at.
struct ClaimRange {
  uint32_t next;
  uint32_t end;
};

struct ThreadState {
  // 0 free, 1 owned by a live thread, 2 owner exited (drain, then free).
  std::atomic<uint32_t> use{0};
  bool shared = false;  // the overflow state: several writers, so counters use fetch_add
  // Owner only (never used by the shared state), per pool kind: the rest of the claim chunk this
  // state owns (slot_pool.h, "Claim chunks"), whose slots it claims with loads and stores, and the
  // owner word it set to take it (null: none held).
  ClaimRange claims[kMaxPoolKinds] = {};
  std::atomic<uint32_t>* chunk_owner[kMaxPoolKinds] = {};
  RecordRing ring;
  OpenGroup group;  // owner only, never used by the shared state
  // Owner only: this thread has started a P2pApi. From then on its GroupApis are kept where the
  // mask asks for P2pApi but not GroupApi (the default: CoreSkipAncestorStart), so a thread that
  // only runs collectives pays nothing for groups. Reset at the thread's exit.
  bool p2p_thread = false;
  // Own cache line: written by the owner on every callback, summed by the drainer; keeping it off
  // the ring's tail_ line (written by the drainer) avoids false sharing.
  alignas(64) std::atomic<uint64_t> counters[kNumCounters] = {};

  // At the owning thread's exit (ThreadStates::OnThreadExit): gives its claim chunks back, so that
  // a state no thread claims again holds none. release: its claims in a chunk happen before the
  // next owner's acquire CAS on the owner word.
  void ReleaseClaimChunks() noexcept {
    for (int k = 0; k < kMaxPoolKinds; ++k) {
      if (chunk_owner[k] == nullptr) continue;
      chunk_owner[k]->store(0, std::memory_order_release);
      chunk_owner[k] = nullptr;
      claims[k] = ClaimRange{0, 0};
    }
  }

  void Add(Counter c, uint64_t n = 1) noexcept {
    if (shared) {
      counters[c].fetch_add(n, std::memory_order_relaxed);  // relaxed: a statistic
    } else {
      AddOwned(c, n);
    }
  }
  // Only on a state this thread owns (!shared): adds and returns the new value. Single writer: a
  // plain load+store is enough; relaxed because the drainer only sums.
  uint64_t AddOwned(Counter c, uint64_t n) noexcept {
    const uint64_t v = counters[c].load(std::memory_order_relaxed) + n;
    counters[c].store(v, std::memory_order_relaxed);
    return v;
  }
};

// The calling thread's state (null before its first callback). __thread rather than thread_local:
// no dynamic-init wrapper call; initial-exec: a dlopen'ed .so must not trigger a TLS allocation on
// the hot path (two words fit in glibc's static TLS surplus).
extern __thread ThreadState* t_thread_state __attribute__((tls_model("initial-exec")));
extern __thread uint32_t t_thread_retry __attribute__((tls_model("initial-exec")));

class ThreadStates {
 public:
  // Slow path (first init). ResourceExhausted, with the size and errno, when memory could not be
  // mapped.
  Status Init(uint32_t n_states, uint32_t ring_records) noexcept;
  bool initialized() const noexcept { return states_ != nullptr; }

  // Hot path: the calling thread's state (claims one on first use; the overflow state if none).
  static ThreadState* Current() noexcept {
    ThreadState* ts = t_thread_state;
    if (__builtin_expect(ts != nullptr, 1)) {
      // A thread parked on the overflow state retries a real claim now and then.
      if (__builtin_expect(!ts->shared, 1) || (++t_thread_retry & 4095) != 0) return ts;
    }
    return ClaimSlow();
  }

  ThreadState* overflow() noexcept { return &overflow_; }
  uint32_t size() const noexcept { return n_; }
  ThreadState* at(uint32_t i) noexcept { return &states_[i]; }
  // Drainer: frees exited threads' states whose rings are empty.
  void ReapExited() noexcept;
  // Sum of one counter over every state.
  uint64_t Sum(Counter c) noexcept;

  static ThreadStates& Get() noexcept;

 private:
  static __attribute__((noinline)) ThreadState* ClaimSlow() noexcept;
  static void OnThreadExit(void* state) noexcept;

  ThreadState* states_ = nullptr;
  uint32_t n_ = 0;
  ThreadState overflow_;
  unsigned int key_ = 0;  // pthread_key_t
  bool key_ok_ = false;
};

}  // namespace sentinel::plugin
