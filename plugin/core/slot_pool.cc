#include "plugin/core/slot_pool.h"

#include <sys/mman.h>

#include <cerrno>

namespace sentinel::plugin {

uint32_t SlotArena::PoolSizeFor(Kind k, uint32_t p) noexcept {
  switch (k) {
    case Kind::kGroupApi:
    case Kind::kCollApi:
    case Kind::kColl:
      return p;
    case Kind::kP2pApi:
    case Kind::kP2p:
    case Kind::kProxyOp:
    case Kind::kProxyStep:
    case Kind::kKernelCh:
      return 4 * p;
    case Kind::kNetPlugin:
      return 2 * p;
    case Kind::kProxyCtrl:
      return 64;
    case Kind::kKernelLaunch:
    case Kind::kGroup:
    case Kind::kCeColl:
    case Kind::kCeSync:
    case Kind::kCeBatch:
      return p / 2 > 16 ? p / 2 : 16;
    default:
      return 0;
  }
}

Status SlotArena::Map(uint32_t pool_size) noexcept {
  size_t total = 0;
  for (int k = 1; k < static_cast<int>(Kind::kCount); ++k) {
    total += PoolSizeFor(static_cast<Kind>(k), pool_size);
  }
  // One anonymous mapping: zero pages (every slot kFree), resident only once used.
  void* arena = mmap(nullptr, total * sizeof(Slot), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (arena == MAP_FAILED) {
    return Status::Format(StatusCode::kResourceExhausted, "mmap of %zu bytes for %zu event slots",
                          total * sizeof(Slot), total)
        .WithErrno(errno);
  }
  begin_ = static_cast<Slot*>(arena);
  slots_ = total;
  size_t offset = 0;
  for (int k = 1; k < static_cast<int>(Kind::kCount); ++k) {
    Pool& p = pools_[k];
    p.kind = static_cast<Kind>(k);
    p.size = PoolSizeFor(p.kind, pool_size);
    p.begin = begin_ + offset;
    offset += p.size;
    if (p.kind == Kind::kColl || p.kind == Kind::kP2p) {
      // Zero pages, resident only as channels are used (a channel's 16 bytes per slot).
      void* times = mmap(nullptr, size_t{p.size} * kMaxKchHandles * sizeof(KernelChTimes),
                         PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (times == MAP_FAILED) {
        return Status::Format(StatusCode::kResourceExhausted,
                              "mmap of the GPU timers of %u event slots", p.size)
            .WithErrno(errno);
      }
      p.kch_times = static_cast<KernelChTimes*>(times);
    }
  }
  return Status::Ok();
}

}  // namespace sentinel::plugin
