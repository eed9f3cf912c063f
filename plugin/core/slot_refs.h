// A Slot's reference count (event_model.h has the rules): the child references that keep a parent
// alive, the stop that marks an event stopped, and who emits a Coll/P2p/CeColl record. Every
// transition is one CAS on `refs`, so "finished" and "who emits" are decided once.
#pragma once

#include <atomic>
#include <cstdint>

#include "plugin/core/event_model.h"

namespace sentinel::plugin {

// What dropping a reference did.
enum class RefDrop : uint8_t {
  kStale,        // the count was already 0 (a stale handle); nothing changed
  kHeld,         // other references remain
  kLast,         // the last reference: the caller finishes the slot and emits its record
  kLastEmitted,  // the last reference, but finalize already emitted the record (truncated)
};

// Adds a child reference unless the parent already finished (count == 0).
inline bool TryRef(Slot* p) noexcept {
  uint32_t r = p->refs.load(std::memory_order_relaxed);
  do {
    if ((r & kRefCountMask) == 0) return false;
    // acq_rel: orders the child's later updates of the parent before the final release.
  } while (!p->refs.compare_exchange_weak(r, r + 1, std::memory_order_acq_rel,
                                          std::memory_order_relaxed));
  return true;
}

// The refs value after dropping one reference from `r`: the last reference also sets kDoneBit.
inline uint32_t AfterUnref(uint32_t r) noexcept {
  return (r & kRefCountMask) == 1 ? ((r - 1) | kDoneBit) : r - 1;
}

// The outcome of a CAS that took `before` to AfterUnref(before).
inline RefDrop DropOutcome(uint32_t before) noexcept {
  if ((before & kRefCountMask) != 1) return RefDrop::kHeld;
  return (before & kDoneBit) == 0 ? RefDrop::kLast : RefDrop::kLastEmitted;
}

inline RefDrop DropRef(Slot* s) noexcept {
  uint32_t r = s->refs.load(std::memory_order_relaxed);
  do {
    if ((r & kRefCountMask) == 0) return RefDrop::kStale;
    // acq_rel: the thread that drops the last reference sees every child's accumulations.
  } while (!s->refs.compare_exchange_weak(r, AfterUnref(r), std::memory_order_acq_rel,
                                          std::memory_order_relaxed));
  return DropOutcome(r);
}

// The stop of an event: one CAS marks it stopped (the first stop wins; a repeated stop, e.g.
// NCCL's stale CollApi (docs/nccl-facts.md "5.6 Pitfalls" item 1), or a stop of a finished slot
// gives kStale) and, when no child holds a reference (the common case), also drops the event's own
// reference (kLast / kLastEmitted). kHeld: only marked stopped; the caller drops its reference with
// DropRef after the stop's own work.
inline RefDrop MarkStopped(Slot* s) noexcept {
  uint32_t r = s->refs.load(std::memory_order_relaxed);
  uint32_t next;
  do {
    if ((r & kStoppedBit) != 0 || (r & kRefCountMask) == 0) return RefDrop::kStale;
    next = (r & kRefCountMask) == 1 ? AfterUnref(r | kStoppedBit) : (r | kStoppedBit);
    // acq_rel: as in DropRef.
  } while (!s->refs.compare_exchange_weak(r, next, std::memory_order_acq_rel,
                                          std::memory_order_relaxed));
  return (r & kRefCountMask) == 1 ? DropOutcome(r) : RefDrop::kHeld;
}

// The same three transitions for a slot whose every transition comes from ONE thread
// (docs/nccl-facts.md, Threads and concurrency; finalize and the grace sweep take only
// Coll/P2p/CeColl):
// - a ProxyOp: its start, its ProxySteps' starts and stops, and its own stop, all on its
//   communicator's proxy progress thread;
// - a GroupApi or CollApi: its start and stop, and a GroupApi's P2pApi pieces (which hold it),
//   all on the thread that runs the group (nothing holds a CollApi; a Coll reads it validated);
// - a ProxyStep: its start and stop, on the proxy progress thread. Its NetPlugin children, which
//   the net plugin may raise on any thread, hold no reference on it (CoreStartEvent): nothing of
//   theirs is read through it.
// A relaxed load and store per transition instead of a CAS: a locked instruction less each, and
// each waited for every store before it (perf: the ProxyStep start's TryRef was nine tenths of
// StartHoldingChild). Program order on that thread orders the children's work before the last
// drop. A host that broke the rule (two threads stopping one such event's children, or the event,
// at once) could lose a transition: the slot is then freed early or never (a never-freed slot is
// skipped by later claims), and a record may miss a step's sums; memory is never unmapped, so
// nothing worse.
inline bool CountsOnOneThread(Kind k) noexcept {
  return k == Kind::kProxyOp || k == Kind::kProxyStep || k == Kind::kGroupApi ||
         k == Kind::kCollApi;
}

inline bool TryRefOneThread(Slot* p) noexcept {
  const uint32_t r = p->refs.load(std::memory_order_relaxed);
  if ((r & kRefCountMask) == 0) return false;
  p->refs.store(r + 1, std::memory_order_relaxed);
  return true;
}

inline RefDrop DropRefOneThread(Slot* s) noexcept {
  const uint32_t r = s->refs.load(std::memory_order_relaxed);
  if ((r & kRefCountMask) == 0) return RefDrop::kStale;
  s->refs.store(AfterUnref(r), std::memory_order_relaxed);
  return DropOutcome(r);
}

inline RefDrop MarkStoppedOneThread(Slot* s) noexcept {
  const uint32_t r = s->refs.load(std::memory_order_relaxed);
  if ((r & kStoppedBit) != 0 || (r & kRefCountMask) == 0) return RefDrop::kStale;
  s->refs.store((r & kRefCountMask) == 1 ? AfterUnref(r | kStoppedBit) : (r | kStoppedBit),
                std::memory_order_relaxed);
  return (r & kRefCountMask) == 1 ? DropOutcome(r) : RefDrop::kHeld;
}

// Finalize: claims a record still waiting for children by setting kDoneBit while references
// remain. False when the last reference already emitted it, or will (the count hit 0 or the bit
// is set). acq_rel: pairs with the children's refcount updates, so their sums so far are visible.
inline bool ClaimForTruncation(Slot* s) noexcept {
  uint32_t r = s->refs.load(std::memory_order_relaxed);
  while ((r & kDoneBit) == 0 && (r & kRefCountMask) != 0) {
    if (s->refs.compare_exchange_weak(r, r | kDoneBit, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

}  // namespace sentinel::plugin
