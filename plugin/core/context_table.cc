#include "plugin/core/context_table.h"

#include <sys/mman.h>

#include <cerrno>
#include <initializer_list>

namespace sentinel::plugin {

Status ContextTable::Map(uint32_t n) noexcept {
  void* p = mmap(nullptr, sizeof(Context) * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (p == MAP_FAILED) {
    return Status::Format(StatusCode::kResourceExhausted,
                          "mmap of %zu bytes for %u communicator contexts", sizeof(Context) * n, n)
        .WithErrno(errno);
  }
  begin_ = static_cast<Context*>(p);  // zero pages: every context kFree
  n_ = n;
  return Status::Ok();
}

Context* ContextTable::Claim() noexcept {
  for (uint32_t probe = 0; probe < n_; ++probe) {
    // relaxed: the cursor only spreads claims; the CAS below owns the context.
    uint64_t i = cursor_.fetch_add(1, std::memory_order_relaxed) % n_;
    Context* c = begin_ + i;
    for (ContextState from : {ContextState::kFree, ContextState::kFinalized}) {
      ContextState expected = from;
      // relaxed: the fields are published by Publish's release store.
      if (c->state.compare_exchange_strong(expected, ContextState::kClaiming,
                                           std::memory_order_relaxed)) {
        return c;
      }
    }
  }
  return nullptr;
}

}  // namespace sentinel::plugin
