// The early drain: a record ring past its high water asks the drainer to run now (RecordRing's
// wake function), through a futex word the drainer sleeps on (DrainSignal); and the drainer reads
// records in place (Peek/Release) rather than copying them out first.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "plugin/base/clock.h"
#include "plugin/core/drain_signal.h"
#include "plugin/core/record_ring.h"

namespace sentinel::plugin {
namespace {

int g_wakes = 0;
void CountWake() { ++g_wakes; }

void Push(RecordRing& ring, uint64_t seq) {
  SentinelWireCollRecord r{};
  r.seq = seq;
  ASSERT_TRUE(ring.TryPush(r)) << "seq " << seq;
}

void DrainAll(RecordRing& ring) {
  const SentinelWireCollRecord* first = nullptr;
  for (size_t n; (n = ring.Peek(&first, 1000)) > 0;) ring.Release(n);
}

// A quarter of the ring asks once; a drainer that has not run yet is asked again an eighth of the
// ring later, not at every record; once drained, the next request comes at the next quarter.
TEST(RecordRingHighWater, AsksForADrainAtAQuarterAndNotPerRecord) {
  std::vector<SentinelWireCollRecord> storage(64);
  RecordRing ring;
  g_wakes = 0;
  ring.Init(storage.data(), 64, &CountWake);
  ASSERT_EQ(ring.high_water(), 16u);
  uint64_t seq = 0;
  for (; seq < 15; ++seq) Push(ring, seq);
  EXPECT_EQ(g_wakes, 0);
  Push(ring, seq++);  // 16 held
  EXPECT_EQ(g_wakes, 1);
  for (; seq < 23; ++seq) Push(ring, seq);
  EXPECT_EQ(g_wakes, 1) << "asked again before an eighth of the ring";
  Push(ring, seq++);  // 24 held, nobody drained
  EXPECT_EQ(g_wakes, 2);
  DrainAll(ring);
  for (; seq < 39; ++seq) Push(ring, seq);  // 15 held since the drain
  EXPECT_EQ(g_wakes, 2) << "asked below the high water";
  Push(ring, seq++);  // 16 held
  EXPECT_EQ(g_wakes, 3);
  EXPECT_EQ(ring.wakes(), 3u);
}

// A ring without a wake function (the overflow state's, tests) never asks.
TEST(RecordRingHighWater, NoWakeFunctionNoRequest) {
  std::vector<SentinelWireCollRecord> storage(8);
  RecordRing ring;
  ring.Init(storage.data(), 8);
  for (uint64_t seq = 0; seq < 8; ++seq) Push(ring, seq);
  EXPECT_EQ(ring.wakes(), 0u);
}

// Peek hands out the records in place, in order, never past the storage's end; Release frees
// exactly what was read.
TEST(RecordRingPeek, ContiguousSpansInPlaceAcrossTheWrap) {
  std::vector<SentinelWireCollRecord> storage(8);
  RecordRing ring;
  ring.Init(storage.data(), 8);
  const SentinelWireCollRecord* first = nullptr;
  EXPECT_EQ(ring.Peek(&first, 8), 0u);
  for (uint64_t seq = 0; seq < 6; ++seq) Push(ring, seq);
  ASSERT_EQ(ring.Peek(&first, 4), 4u);  // bounded by max
  EXPECT_EQ(first, storage.data());
  EXPECT_EQ(first[3].seq, 3u);
  ring.Release(4);
  for (uint64_t seq = 6; seq < 12; ++seq) Push(ring, seq);  // fills slots 6, 7, 0..3
  ASSERT_EQ(ring.Peek(&first, 100), 4u);                    // slots 4..7: up to the end
  EXPECT_EQ(first, storage.data() + 4);
  EXPECT_EQ(first[0].seq, 4u);
  EXPECT_EQ(first[3].seq, 7u);
  ring.Release(4);
  ASSERT_EQ(ring.Peek(&first, 100), 4u);  // slots 0..3
  EXPECT_EQ(first, storage.data());
  EXPECT_EQ(first[0].seq, 8u);
  EXPECT_EQ(first[3].seq, 11u);
  // Not released yet: the producer cannot reuse those slots.
  for (uint64_t seq = 12; seq < 16; ++seq) Push(ring, seq);
  SentinelWireCollRecord r{};
  EXPECT_FALSE(ring.TryPush(r));
  ring.Release(2);
  EXPECT_TRUE(ring.TryPush(r));
  EXPECT_EQ(first[2].seq, 10u);  // what was not released is unchanged
}

// A Notify() that came while the waiter was awake is not lost: the next Wait() returns at once.
TEST(DrainSignal, ANotifyBeforeTheWaitIsKept) {
  DrainSignal s;
  s.Notify();
  const int64_t t0 = MonoNs();
  EXPECT_TRUE(s.Wait(int64_t{30} * 1'000'000'000));
  EXPECT_LT(MonoNs() - t0, int64_t{10} * 1'000'000'000);
  EXPECT_EQ(s.wakes(), 0u) << "a waiter that was awake needed no system call";
}

TEST(DrainSignal, WaitEndsAtItsTimeoutWithoutANotify) {
  DrainSignal s;
  const int64_t t0 = MonoNs();
  EXPECT_FALSE(s.Wait(20'000'000));
  EXPECT_GE(MonoNs() - t0, 19'000'000);
}

// A sleeping waiter is woken by Notify() from another thread long before its timeout.
TEST(DrainSignal, NotifyWakesASleepingWaiter) {
  DrainSignal s;
  std::atomic<bool> woke{false};
  std::atomic<int64_t> waited_ns{0};
  std::thread waiter([&] {
    const int64_t t0 = MonoNs();
    woke.store(s.Wait(int64_t{60} * 1'000'000'000));
    waited_ns.store(MonoNs() - t0);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // most likely asleep by now
  s.Notify();
  waiter.join();
  EXPECT_TRUE(woke.load());
  EXPECT_LT(waited_ns.load(), int64_t{30} * 1'000'000'000);
}

}  // namespace
}  // namespace sentinel::plugin
