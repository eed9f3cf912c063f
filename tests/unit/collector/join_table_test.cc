// The join table's arithmetic (collector/aggregate/join_table.h): widening keeps every slot's
// cells, a started join is pending with cleared cells, and a join's extent skips the ranks that
// did not report and the durations that are unknown.
#include "collector/aggregate/join_table.h"

#include <vector>

#include "gtest/gtest.h"

namespace sentinel::collector {
namespace {

FuncRing MakeRing(size_t slots, int width) {
  FuncRing ring;
  ring.slots.resize(slots);
  EnsureRingWidth(&ring, width);
  return ring;
}

TEST(JoinTable, WidthStartsAtFourAndDoubles) {
  FuncRing ring = MakeRing(3, 1);
  EXPECT_EQ(ring.width, 4);
  EXPECT_EQ(ring.cells.size(), 12u);
  EnsureRingWidth(&ring, 4);  // already wide enough: unchanged
  EXPECT_EQ(ring.width, 4);
  EnsureRingWidth(&ring, 9);
  EXPECT_EQ(ring.width, 16);
  EXPECT_EQ(ring.cells.size(), 48u);
}

TEST(JoinTable, WideningKeepsEachSlotsCells) {
  FuncRing ring = MakeRing(3, 4);
  for (size_t s = 0; s < 3; ++s) {
    for (int li = 0; li < 4; ++li) {
      ring.CellsOf(s)[li] = {static_cast<int64_t>(100 * s + li), static_cast<int64_t>(li)};
    }
  }
  EnsureRingWidth(&ring, 5);
  ASSERT_EQ(ring.width, 8);
  for (size_t s = 0; s < 3; ++s) {
    for (int li = 0; li < 4; ++li) {
      EXPECT_EQ(ring.CellsOf(s)[li].arrival, static_cast<int64_t>(100 * s + li));
      EXPECT_EQ(ring.CellsOf(s)[li].duration, li);
    }
    for (int li = 4; li < 8; ++li) EXPECT_EQ(ring.CellsOf(s)[li].arrival, kUnset);
  }
}

TEST(JoinTable, SlotOfIsSeqModuloSlots) {
  FuncRing ring = MakeRing(5, 4);
  EXPECT_EQ(ring.SlotOf(0), 0u);
  EXPECT_EQ(ring.SlotOf(7), 2u);
  EXPECT_EQ(ring.SlotOf(UINT64_MAX), UINT64_MAX % 5);
}

TEST(JoinTable, RingBytesCountsSlotsAndCells) {
  FuncRing ring = MakeRing(2, 4);
  EXPECT_EQ(RingBytes(ring), static_cast<int64_t>(ring.slots.capacity() * sizeof(JoinSlot) +
                                                  ring.cells.capacity() * sizeof(JoinCell)));
  EXPECT_GE(RingBytes(ring), static_cast<int64_t>(2 * sizeof(JoinSlot) + 8 * sizeof(JoinCell)));
}

TEST(JoinTable, StartJoinMakesAPendingSlotWithClearedCells) {
  FuncRing ring = MakeRing(2, 4);
  JoinSlot& slot = ring.slots[1];
  slot.state = JoinState::kJoined;
  slot.reported = 3;
  for (int li = 0; li < 4; ++li) ring.CellsOf(1)[li] = {5, 6};
  StartJoin(&slot, ring.CellsOf(1), static_cast<size_t>(ring.width), 41, 1234, 4096, 1, 2, 3);
  EXPECT_EQ(slot.state, JoinState::kPending);
  EXPECT_EQ(slot.seq, 41u);
  EXPECT_EQ(slot.reported, 0);
  EXPECT_EQ(slot.first_seen_mono_ns, 1234);
  EXPECT_EQ(slot.bytes, 4096u);
  EXPECT_EQ(slot.algo, 1);
  EXPECT_EQ(slot.proto, 2);
  EXPECT_EQ(slot.nchannels, 3);
  for (int li = 0; li < 4; ++li) {
    EXPECT_EQ(ring.CellsOf(1)[li].arrival, kUnset);
    EXPECT_EQ(ring.CellsOf(1)[li].duration, -1);
  }
}

TEST(JoinTable, MeasureJoinSkipsUnreportedRanksAndUnknownDurations) {
  // Rank 1 did not report; rank 2 has no GPU duration.
  const JoinCell cells[] = {{1000, 50}, {kUnset, -1}, {1300, -1}, {1100, 400}, {900, 10}};
  std::vector<int> reported;
  // Only the first four are members: the fifth cell is spare width.
  const JoinExtent e = MeasureJoin(cells, 4, &reported);
  EXPECT_EQ(reported, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(e.min_arrival, 1000);
  EXPECT_EQ(e.max_arrival, 1300);
  EXPECT_EQ(e.max_duration, 400);
  EXPECT_EQ(e.min_duration, 50);
  EXPECT_EQ(e.max_end, 1500);
}

TEST(JoinTable, MeasureJoinOfNoReportKeepsItsSentinels) {
  const JoinCell cells[] = {{kUnset, -1}, {kUnset, -1}};
  std::vector<int> reported;
  const JoinExtent e = MeasureJoin(cells, 2, &reported);
  EXPECT_TRUE(reported.empty());
  EXPECT_EQ(e.min_arrival, INT64_MAX);
  EXPECT_EQ(e.max_arrival, INT64_MIN);
  EXPECT_EQ(e.max_duration, -1);
  EXPECT_EQ(e.max_end, INT64_MIN);
}

}  // namespace
}  // namespace sentinel::collector
