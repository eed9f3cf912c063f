// The communicator contexts: a fixed table (SENTINEL_MAX_COMMS) in one anonymous mapping. A
// context is claimed at init (FIFO over the table, so a finalized one is reused only after a full
// wrap), published by a release store of kLive, and checked (range, alignment, tag, state) before
// any event uses it.
#pragma once

#include <atomic>
#include <cstdint>

#include "plugin/base/status.h"
#include "plugin/core/event_model.h"

namespace sentinel::plugin {

class ContextTable {
 public:
  // Slow path, once. False when the memory cannot be mapped.
  Status Map(uint32_t n) noexcept;

  // Slow path (init): a context in state kClaiming, or null when every one is live. The caller
  // fills its fields, then calls Publish.
  Context* Claim() noexcept;
  static void Publish(Context* c) noexcept {
    c->tag.store(kContextTag, std::memory_order_relaxed);
    c->state.store(ContextState::kLive, std::memory_order_release);  // release: the fields
  }
  // Finalize: kLive -> kFinalized once; false if it was not live (a second finalize).
  static bool MarkFinalized(Context* c) noexcept {
    ContextState expected = ContextState::kLive;
    // release: pairs with AsContext's acquire; later events for this context are ignored.
    return c->state.compare_exchange_strong(expected, ContextState::kFinalized,
                                            std::memory_order_release, std::memory_order_relaxed);
  }

  // Hot path: the live context behind a pointer NCCL hands back, or null.
  Context* AsContext(void* p) const noexcept {
    auto u = reinterpret_cast<uintptr_t>(p);
    auto b = reinterpret_cast<uintptr_t>(begin_);
    if (u < b || u >= b + n_ * sizeof(Context) || (u - b) % sizeof(Context) != 0) return nullptr;
    auto* c = static_cast<Context*>(p);
    if (c->tag.load(std::memory_order_relaxed) != kContextTag) return nullptr;
    // acquire: pairs with Publish's release.
    if (c->state.load(std::memory_order_acquire) != ContextState::kLive) return nullptr;
    return c;
  }

  // A context already known to be one of ours (e.g. a live slot's): still live?
  static bool IsLive(const Context* c) noexcept {
    // acquire: as in AsContext.
    return c->state.load(std::memory_order_acquire) == ContextState::kLive;
  }

  // Calls fn(Context*) for every live context (drainer). Only contexts ever claimed are visited:
  // the claim cursor bounds them.
  template <typename Fn>
  void ForEachLive(Fn&& fn) noexcept {
    uint64_t used = cursor_.load(std::memory_order_relaxed);
    uint32_t n = used < n_ ? static_cast<uint32_t>(used) : n_;
    for (uint32_t i = 0; i < n; ++i) {
      Context* c = begin_ + i;
      // acquire: pairs with Publish's release (identity fields and per-context state).
      if (c->state.load(std::memory_order_acquire) == ContextState::kLive) fn(c);
    }
  }

  uint32_t size() const noexcept { return n_; }

 private:
  Context* begin_ = nullptr;
  uint32_t n_ = 0;
  std::atomic<uint64_t> cursor_{0};
};

}  // namespace sentinel::plugin
