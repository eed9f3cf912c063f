// The per-thread claim chunks of the slot pools (slot_pool.h, "Claim chunks"): a thread state
// claims only in a chunk it owns, with a load and a store; a slot freed on any other thread (the
// release store of kFree that OnLastRef makes) comes back to use; a chunk another state owns is
// passed over; the overflow state (several threads) owns a chunk only for the length of one claim.
#include "plugin/core/slot_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "plugin/core/event_model.h"
#include "plugin/core/thread_state.h"

namespace sentinel::plugin {
namespace {

// What OnLastRef does to free a slot.
void Free(Slot* s) { s->state.store(SlotState::kFree, std::memory_order_release); }

uint32_t IndexOf(SlotArena& arena, Kind k, const Slot* s) {
  return static_cast<uint32_t>(s - arena.pool(k).begin);
}

uint32_t OwnedChunks(const Pool& p) {
  uint32_t n = 0;
  for (uint32_t c = 0; c < p.chunks; ++c) n += p.owners[c].load() != 0 ? 1 : 0;
  return n;
}

TEST(ClaimChunks, ChunkSizesLeaveManyChunksPerPool) {
  EXPECT_EQ(SlotArena::ChunkSizeFor(16), 1u);
  EXPECT_EQ(SlotArena::ChunkSizeFor(64), 1u);
  EXPECT_EQ(SlotArena::ChunkSizeFor(256), 4u);
  EXPECT_EQ(SlotArena::ChunkSizeFor(1024), 16u);  // SENTINEL_POOL_SIZE's default
  EXPECT_EQ(SlotArena::ChunkSizeFor(4096), 32u);
  EXPECT_EQ(SlotArena::ChunkSizeFor(1u << 18), 32u);
  for (uint32_t size : {16u, 100u, 1000u, 1024u, 4096u, 65536u}) {
    const uint32_t chunk = SlotArena::ChunkSizeFor(size);
    EXPECT_TRUE(chunk == 1 || size / chunk >= kMinChunksPerPool) << size;
  }
}

TEST(ClaimChunks, EachStateClaimsInItsOwnChunkInRingOrder) {
  static SlotArena arena;  // never unmapped, like the plugin's
  ASSERT_TRUE(arena.Map(256).ok());
  const Pool& p = arena.pool(Kind::kColl);
  ASSERT_EQ(p.size, 256u);
  ASSERT_EQ(p.chunk, 4u);
  static ThreadState a;
  static ThreadState b;
  Slot* a0 = arena.Claim(Kind::kColl, &a);
  Slot* b0 = arena.Claim(Kind::kColl, &b);
  ASSERT_NE(a0, nullptr);
  ASSERT_NE(b0, nullptr);
  EXPECT_EQ(IndexOf(arena, Kind::kColl, a0), 0u);  // chunk 0 is a's
  EXPECT_EQ(IndexOf(arena, Kind::kColl, b0), 4u);  // chunk 1 is b's
  for (uint32_t want : {1u, 2u, 3u, 8u}) {         // the rest of chunk 0, then chunk 2
    Slot* s = arena.Claim(Kind::kColl, &a);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(IndexOf(arena, Kind::kColl, s), want);
    EXPECT_EQ(s->state.load(), SlotState::kLive);
    EXPECT_EQ(KindOf(s), Kind::kColl);
  }
  EXPECT_EQ(OwnedChunks(p), 2u);  // a gave chunk 0 back when it took chunk 2
  a.ReleaseClaimChunks();
  b.ReleaseClaimChunks();
  EXPECT_EQ(OwnedChunks(p), 0u);
  EXPECT_EQ(a.counters[kCtrEventsDroppedPool].load(), 0u);
}

// A chunk whose owner has not come back for it since the last wrap (an idle thread) is never
// claimed in by another state, even where its slots are free: the owner's load-then-store claim
// relies on it.
TEST(ClaimChunks, AChunkAnotherStateOwnsIsPassedOver) {
  static SlotArena arena;
  ASSERT_TRUE(arena.Map(16).ok());
  Pool& p = arena.pool(Kind::kColl);
  ASSERT_EQ(p.chunk, 1u);
  static ThreadState idle;
  static ThreadState busy;
  Slot* held = arena.Claim(Kind::kColl, &idle);  // owns chunk 0 from now on
  ASSERT_EQ(IndexOf(arena, Kind::kColl, held), 0u);
  std::vector<Slot*> claimed;
  for (int i = 0; i < 15; ++i) claimed.push_back(arena.Claim(Kind::kColl, &busy));
  EXPECT_EQ(IndexOf(arena, Kind::kColl, claimed.back()), 15u);
  Free(held);
  for (Slot* s : claimed) Free(s);
  // The cursor wraps to chunk 0: idle's, free slot or not. busy goes on with chunk 1.
  Slot* next = arena.Claim(Kind::kColl, &busy);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(IndexOf(arena, Kind::kColl, next), 1u);
  // Its owner still claims there.
  EXPECT_EQ(arena.Claim(Kind::kColl, &idle), p.begin + 2);  // chunk 0 is used up: the next one
  EXPECT_EQ(p.owners[0].load(), 0u);                        // ... and chunk 0 went back
}

TEST(ClaimChunks, TheOverflowStateHoldsNoChunkAndLeavesTheCursor) {
  static SlotArena arena;
  ASSERT_TRUE(arena.Map(256).ok());
  Pool& p = arena.pool(Kind::kColl);
  static ThreadState overflow;
  overflow.shared = true;
  std::set<Slot*> seen;
  for (int i = 0; i < 3; ++i) {
    Slot* s = arena.Claim(Kind::kColl, &overflow);
    ASSERT_NE(s, nullptr);
    EXPECT_TRUE(seen.insert(s).second);
    EXPECT_EQ(IndexOf(arena, Kind::kColl, s), static_cast<uint32_t>(i));  // chunk 0, in order
  }
  EXPECT_EQ(p.cursor.load(), 0u);
  EXPECT_EQ(OwnedChunks(p), 0u);
  // Finalize and the grace sweep still scan them.
  EXPECT_GE(p.Touched(), 3u);
  // An owner that takes chunk 0 next finds the slots the overflow state left free.
  static ThreadState owner;
  EXPECT_EQ(IndexOf(arena, Kind::kColl, arena.Claim(Kind::kColl, &owner)), 3u);
}

// The stress: claimer threads, each with its own state (and one pair sharing the overflow state),
// hand every slot they claim to releaser threads, which free it as a last reference on another
// thread does. A slot is never in two hands at once (the holder word), what the claimer wrote
// reaches the releaser, and when all is done, every slot of the pool is claimable again.
TEST(ClaimChunks, SlotsFreedOnOtherThreadsComeBackWithoutLossOrDoubleUse) {
  static SlotArena arena;
  ASSERT_TRUE(arena.Map(256).ok());
  const Kind kind = Kind::kColl;
  Pool& p = arena.pool(kind);
  constexpr int kOwners = 4;
  constexpr int kReleasers = 2;
  constexpr int kClaimsPerThread = 60000;
  constexpr size_t kMaxQueued = 24;  // per claimer: the events it has in flight
  static std::atomic<uint32_t> holder[256];
  for (auto& h : holder) h.store(0);
  struct Queue {
    std::mutex mu;
    std::vector<Slot*> slots;
  };
  static Queue queues[kOwners + 2];
  static ThreadState states[kOwners];
  static ThreadState overflow;
  overflow.shared = true;
  std::atomic<int> claimers_left{kOwners + 2};
  std::atomic<uint64_t> double_use{0};
  std::atomic<uint64_t> bad_payload{0};
  std::atomic<uint64_t> claimed_total{0};
  std::atomic<uint64_t> freed_total{0};

  auto claimer = [&](int q, ThreadState* ts) {
    uint64_t mine = 0;
    while (mine < kClaimsPerThread) {
      for (;;) {
        {
          std::lock_guard<std::mutex> lock(queues[q].mu);
          if (queues[q].slots.size() < kMaxQueued) break;
        }
        std::this_thread::yield();
      }
      Slot* s = arena.Claim(kind, ts);
      if (s == nullptr) {  // every slot looked at was in flight: counted, retried
        std::this_thread::yield();
        continue;
      }
      if (holder[IndexOf(arena, kind, s)].exchange(1) != 0) double_use.fetch_add(1);
      // Plain fields, as a start writes them: the hand-off below must order them.
      s->seq = (static_cast<uint64_t>(q) << 32) | ++mine;
      s->bytes = ~s->seq;
      claimed_total.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard<std::mutex> lock(queues[q].mu);
      queues[q].slots.push_back(s);
    }
    if (!ts->shared) ts->ReleaseClaimChunks();  // as the thread's exit does
    claimers_left.fetch_sub(1);
  };
  auto releaser = [&](int first) {
    std::vector<Slot*> batch;
    for (;;) {
      const bool last = claimers_left.load() == 0;
      for (int q = first; q < kOwners + 2; q += kReleasers) {
        {
          std::lock_guard<std::mutex> lock(queues[q].mu);
          batch.swap(queues[q].slots);
        }
        for (Slot* s : batch) {
          if (s->bytes != ~s->seq || (s->seq >> 32) != static_cast<uint64_t>(q)) {
            bad_payload.fetch_add(1);
          }
          s->seq = 0;  // the next claimer's writes must come after this one
          if (holder[IndexOf(arena, kind, s)].exchange(0) != 1) double_use.fetch_add(1);
          Free(s);
          freed_total.fetch_add(1, std::memory_order_relaxed);
        }
        batch.clear();
      }
      if (last) break;
      std::this_thread::yield();
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < kReleasers; ++r) threads.emplace_back(releaser, r);
  for (int i = 0; i < kOwners; ++i) threads.emplace_back(claimer, i, &states[i]);
  threads.emplace_back(claimer, kOwners, &overflow);  // two threads on the overflow state
  threads.emplace_back(claimer, kOwners + 1, &overflow);
  for (std::thread& t : threads) t.join();

  EXPECT_EQ(double_use.load(), 0u);
  EXPECT_EQ(bad_payload.load(), 0u);
  EXPECT_EQ(claimed_total.load(), uint64_t{kOwners + 2} * kClaimsPerThread);
  EXPECT_EQ(freed_total.load(), claimed_total.load());
  EXPECT_EQ(OwnedChunks(p), 0u);
  // No slot lost: a fresh state claims the whole pool, each slot once, then runs dry.
  static ThreadState fresh;
  std::set<Slot*> all;
  for (uint32_t i = 0; i < p.size; ++i) {
    Slot* s = arena.Claim(kind, &fresh);
    ASSERT_NE(s, nullptr) << "claim " << i;
    EXPECT_TRUE(all.insert(s).second);
  }
  EXPECT_EQ(arena.Claim(kind, &fresh), nullptr);
  EXPECT_EQ(fresh.counters[kCtrEventsDroppedPool].load(), 1u);
}

}  // namespace
}  // namespace sentinel::plugin
