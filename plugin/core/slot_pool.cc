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

uint32_t SlotArena::ChunkSizeFor(uint32_t size) noexcept {
  uint32_t chunk = kMaxClaimChunk;
  while (chunk > 1 && size / chunk < kMinChunksPerPool) chunk /= 2;
  return chunk;
}

Status SlotArena::Map(uint32_t pool_size) noexcept {
  size_t total = 0;
  size_t total_chunks = 0;
  for (int k = 1; k < static_cast<int>(Kind::kCount); ++k) {
    const uint32_t size = PoolSizeFor(static_cast<Kind>(k), pool_size);
    const uint32_t chunk = ChunkSizeFor(size);
    total += size;
    total_chunks += (size + chunk - 1) / chunk;
  }
  // The chunks' owner words: zero pages (every chunk free).
  void* owners = mmap(nullptr, total_chunks * sizeof(std::atomic<uint32_t>), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (owners == MAP_FAILED) {
    return Status::Format(StatusCode::kResourceExhausted,
                          "mmap of the owner words of %zu claim chunks", total_chunks)
        .WithErrno(errno);
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
  size_t chunk_offset = 0;
  for (int k = 1; k < static_cast<int>(Kind::kCount); ++k) {
    Pool& p = pools_[k];
    p.kind = static_cast<Kind>(k);
    p.size = PoolSizeFor(p.kind, pool_size);
    p.begin = begin_ + offset;
    offset += p.size;
    p.chunk = ChunkSizeFor(p.size);
    p.chunks = (p.size + p.chunk - 1) / p.chunk;
    p.owners = static_cast<std::atomic<uint32_t>*>(owners) + chunk_offset;
    chunk_offset += p.chunks;
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

void SlotArena::TakeChunk(Pool& p, int k, ThreadState* ts) noexcept {
  ClaimRange& r = ts->claims[k];
  r = ClaimRange{0, 0};
  if (ts->chunk_owner[k] != nullptr) {
    // release: this state's claims in the chunk happen before its next owner's (acquire below).
    ts->chunk_owner[k]->store(0, std::memory_order_release);
    ts->chunk_owner[k] = nullptr;
  }
  // relaxed: the cursor only spreads chunks over thread states in ring order; the CAS owns one.
  const uint64_t c = p.cursor.fetch_add(1, std::memory_order_relaxed) % p.chunks;
  std::atomic<uint32_t>& owner = p.owners[c];
  uint32_t expected = 0;
  // acquire: pairs with the previous owner's release, so its claims (kLive stores) are visible.
  // Owned: a thread state that has held it since the last wrap (an idle thread); passed over.
  if (owner.load(std::memory_order_relaxed) != 0 ||
      !owner.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
    return;
  }
  ts->chunk_owner[k] = &owner;
  const uint32_t begin = static_cast<uint32_t>(c) * p.chunk;
  r.next = begin;
  r.end = p.size - begin < p.chunk ? p.size : begin + p.chunk;
}

Slot* SlotArena::ClaimShared(Pool& p, Kind k, ThreadState* ts) noexcept {
  // The overflow state has several threads, so it owns no chunk between calls: it owns one for the
  // claim, looking from the next chunk to hand out without moving the cursor (the slots it leaves
  // free there stay for that chunk's next owner), and gives it back at once.
  // relaxed: as in TakeChunk.
  const uint64_t base = p.cursor.load(std::memory_order_relaxed);
  for (int probe = 0; probe < kChunkProbes; ++probe) {
    const uint64_t c = (base + static_cast<uint64_t>(probe)) % p.chunks;
    std::atomic<uint32_t>& owner = p.owners[c];
    uint32_t expected = 0;
    // acquire/release: as in TakeChunk.
    if (owner.load(std::memory_order_relaxed) != 0 ||
        !owner.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
      continue;
    }
    const uint32_t begin = static_cast<uint32_t>(c) * p.chunk;
    const uint32_t end = p.size - begin < p.chunk ? p.size : begin + p.chunk;
    Slot* claimed = nullptr;
    for (uint32_t i = begin; i < end; ++i) {
      Slot* s = p.begin + i;
      // acquire: as in Claim; the chunk is ours until the release below.
      if (s->state.load(std::memory_order_acquire) == SlotState::kFree) {
        s->state.store(SlotState::kLive, std::memory_order_relaxed);
        s->tag.store(TagFor(k), std::memory_order_relaxed);  // relaxed: constant per slot
        claimed = s;
        break;
      }
    }
    owner.store(0, std::memory_order_release);
    if (claimed != nullptr) return claimed;
  }
  ts->Add(kCtrEventsDroppedPool);
  return nullptr;
}

}  // namespace sentinel::plugin
