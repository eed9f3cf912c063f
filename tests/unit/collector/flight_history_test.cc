// The flight history (collector/aggregate/flight_history.h): a fixed ring per rank that keeps the
// newest operations in order, the 64-bit positions rebuilt from the records' low halves, the
// in-flight frame as the last operation (and not once its record came), hostile frames clamped,
// and the per-uid byte budget.
#include "collector/aggregate/flight_history.h"

#include <cstdint>

#include "gtest/gtest.h"

#include "tests/unit/collector/flight_test_util.h"

namespace sentinel::collector {
namespace {

using testing::Coll;
using testing::InFlight;
using testing::kBf16;
using testing::kMiB;
using testing::kMs;

constexpr uint64_t kComm = 0xabc;

TEST(FlightHistoryTest, TheRingKeepsTheNewestOperationsOldestFirstAndCountsTheRest) {
  FlightRankHistory h(5, 8, 42);
  for (uint32_t p = 1; p <= 12; ++p) {
    h.AddRecord(Coll(kComm, 3, 8, p, kSentinelFuncAllReduce, p * kMiB, kBf16, p * 10 * kMs));
  }
  const FlightRank r = h.Snapshot(3);
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.pid, 42u);
  EXPECT_EQ(r.ops_seen, 12u);
  EXPECT_EQ(r.ops_omitted, 7u);
  ASSERT_EQ(r.ops.size(), 5u);
  for (size_t i = 0; i < r.ops.size(); ++i) {
    EXPECT_EQ(r.ops[i].position, 8 + i);
    EXPECT_EQ(r.ops[i].bytes, (8 + i) * kMiB);
    EXPECT_EQ(r.ops[i].state, FlightState::kCompleted);
    EXPECT_EQ(r.ops[i].datatype, kBf16);
    EXPECT_EQ(r.ops[i].gpu_end_ns, static_cast<int64_t>(8 + i) * 10 * kMs + 5 * kMs);
  }
}

TEST(FlightHistoryTest, CostIsFixedPerRankAndTheUidBudgetRefusesTheRankThatDoesNotFit) {
  FlightHistory::Limits limits;
  limits.ops_per_rank = 100;
  limits.bytes_per_uid = 3 * FlightRankHistory::BytesFor(100) + 10;
  FlightHistory history(limits);
  EXPECT_EQ(history.bytes_per_rank(), FlightRankHistory::BytesFor(100));
  EXPECT_GE(history.bytes_per_rank(), 100 * static_cast<int64_t>(sizeof(FlightOp)));
  for (int r = 0; r < 3; ++r) EXPECT_NE(history.Rank({{7, kComm}, r}, 8, 1), nullptr);
  EXPECT_EQ(history.Rank({{7, kComm}, 3}, 8, 1), nullptr);
  EXPECT_EQ(history.refused(), 1u);
  // Another user's share is its own.
  EXPECT_NE(history.Rank({{8, kComm}, 3}, 8, 1), nullptr);
  EXPECT_EQ(history.uid_bytes(7), 3 * history.bytes_per_rank());
  // The same rank again is the same history, not a new charge.
  EXPECT_EQ(history.Rank({{7, kComm}, 0}, 8, 1), history.Find({{7, kComm}, 0}));
  EXPECT_EQ(history.uid_bytes(7), 3 * history.bytes_per_rank());
  // A forgotten rank gives its bytes back.
  history.Forget({{7, kComm}, 1});
  EXPECT_EQ(history.uid_bytes(7), 2 * history.bytes_per_rank());
  EXPECT_NE(history.Rank({{7, kComm}, 3}, 8, 1), nullptr);
  EXPECT_EQ(history.ranks(), 4u);
}

TEST(FlightHistoryTest, PositionsPastTwoToThe32AreRebuiltFromTheInFlightCounters) {
  EXPECT_EQ(WidenOrdinal(5, 0), 5u);
  EXPECT_EQ(WidenOrdinal(3, (uint64_t{1} << 32) + 1), (uint64_t{1} << 32) + 3);
  // Just past a wrap of the low half: the next span.
  EXPECT_EQ(WidenOrdinal(2, (uint64_t{1} << 32) - 3), (uint64_t{1} << 32) + 2);
  // A straggling record from just before a wrap: the previous span.
  EXPECT_EQ(WidenOrdinal(0xfffffffeu, (uint64_t{1} << 32) + 4), uint64_t{0xfffffffe});

  FlightRankHistory h(16, 2, 1);
  const uint64_t completed = (uint64_t{5} << 32) + 10;
  h.NoteInFlight(InFlight(kComm, 0, 2, completed, completed, completed, 0, 0, 100));
  h.AddRecord(Coll(kComm, 0, 2, 11, kSentinelFuncAllReduce, kMiB, kBf16, 0));
  const FlightRank r = h.Snapshot(0);
  ASSERT_EQ(r.ops.size(), 1u);
  EXPECT_EQ(r.ops[0].position, completed + 1);
}

TEST(FlightHistoryTest, TheOldestIncompleteCollectiveIsTheLastOperationWithItsStateAndSince) {
  FlightRankHistory h(16, 8, 1);
  for (uint32_t p = 1; p <= 40; ++p) {
    h.AddRecord(Coll(kComm, 2, 8, p, kSentinelFuncAllReduce, kMiB, kBf16, p * kMs));
  }
  h.NoteInFlight(InFlight(kComm, 2, 8, 40, 41, 43, kSentinelFuncAllGather, 777, 999));
  FlightRank r = h.Snapshot(2);
  ASSERT_EQ(r.ops.size(), 17u);
  const FlightOp& last = r.ops.back();
  EXPECT_EQ(last.position, 41u);
  EXPECT_EQ(last.func, kSentinelFuncAllGather);
  EXPECT_EQ(last.state, FlightState::kKernelStarted);
  EXPECT_EQ(last.enqueue_ns, 777);
  EXPECT_FALSE(last.bytes_known());  // a frame without its signature does not say
  EXPECT_NE(last.flags & FlightOp::kStuck, 0);
  EXPECT_TRUE(r.progress.known);
  EXPECT_EQ(r.progress.enqueued, 43u);
  EXPECT_EQ(r.progress.as_of_ns, 999);

  // A plugin that sends the signature (wire minor 1): its size, datatype and root too.
  SentinelWireInFlight signed_frame =
      InFlight(kComm, 2, 8, 40, 41, 43, kSentinelFuncBroadcast, 777, 999);
  signed_frame.flags |= kSentinelInFlightSignature;
  signed_frame.oldest_bytes = 4 * kMiB;
  signed_frame.oldest_datatype = kBf16;
  signed_frame.oldest_root = 5;
  h.NoteInFlight(signed_frame);
  r = h.Snapshot(2);
  EXPECT_TRUE(r.ops.back().bytes_known());
  EXPECT_EQ(r.ops.back().bytes, 4 * kMiB);
  EXPECT_EQ(r.ops.back().datatype, kBf16);
  EXPECT_EQ(r.ops.back().root, 5);
  EXPECT_EQ(r.ops.back().func, kSentinelFuncBroadcast);
  // Without the flag the same fields are a minor-0 frame's zeros: unknown, not a 0-byte int8.
  signed_frame.flags &= static_cast<uint16_t>(~kSentinelInFlightSignature);
  h.NoteInFlight(signed_frame);
  r = h.Snapshot(2);
  EXPECT_FALSE(r.ops.back().bytes_known());
  EXPECT_EQ(r.ops.back().root, kFlightNoRank);
  EXPECT_EQ(r.ops.back().datatype, kSentinelDatatypeUnknown);

  // Kernel not started yet, and not traced at all.
  h.NoteInFlight(InFlight(kComm, 2, 8, 40, 40, 41, kSentinelFuncAllGather, 777, 999));
  EXPECT_EQ(h.Snapshot(2).ops.back().state, FlightState::kEnqueued);
  SentinelWireInFlight untraced = InFlight(kComm, 2, 8, 40, 40, 41, kSentinelFuncAllGather, 7, 9);
  untraced.flags |= kSentinelInFlightNoKernelCh;
  h.NoteInFlight(untraced);
  EXPECT_EQ(h.Snapshot(2).ops.back().state, FlightState::kInFlight);
  EXPECT_FALSE(h.Snapshot(2).progress.kernel_traced);
}

TEST(FlightHistoryTest, AFrameOlderThanTheRecordsAfterItShowsNothingInFlight) {
  FlightRankHistory h(16, 8, 1);
  h.NoteInFlight(InFlight(kComm, 0, 8, 40, 41, 41, kSentinelFuncAllReduce, 5, 9));
  h.AddRecord(Coll(kComm, 0, 8, 41, kSentinelFuncAllReduce, kMiB, kBf16, 10));
  const FlightRank r = h.Snapshot(0);
  ASSERT_EQ(r.ops.size(), 1u);
  EXPECT_EQ(r.ops[0].state, FlightState::kCompleted);
}

TEST(FlightHistoryTest, HostileFramesAndRecordsAreClampedNotKept) {
  FlightRankHistory h(4, 8, 1);
  // Completed past enqueued, a kernel started past both, a negative time.
  h.NoteInFlight(InFlight(kComm, 0, 8, 50, 900, 10, kSentinelFuncAllReduce, 5, -4));
  FlightRank r = h.Snapshot(0);
  EXPECT_EQ(r.progress.completed, 50u);
  EXPECT_EQ(r.progress.enqueued, 50u);
  EXPECT_EQ(r.progress.kernel_started, 50u);
  EXPECT_EQ(r.progress.as_of_ns, kFlightNoTime);
  EXPECT_TRUE(r.ops.empty());
  // A root and a peer outside the communicator, negative times: unknown.
  SentinelWireCollRecord bad = Coll(kComm, 0, 8, 51, kSentinelFuncBroadcast, kMiB, kBf16, -7);
  bad.root = 8;
  bad.gpu_end_ns = -1;
  h.AddRecord(bad);
  SentinelWireCollRecord p2p = Coll(kComm, 0, 8, 0, kSentinelFuncSend, kMiB, kBf16, 5);
  p2p.flags |= kSentinelCollIsP2p;
  p2p.peer = 1000;
  h.AddRecord(p2p);
  r = h.Snapshot(0);
  ASSERT_EQ(r.ops.size(), 2u);
  EXPECT_EQ(r.ops[0].root, kFlightNoRank);
  EXPECT_EQ(r.ops[0].api_ns, kFlightNoTime);
  EXPECT_EQ(r.ops[0].gpu_end_ns, kFlightNoTime);
  EXPECT_EQ(r.ops[1].position, 0u);
  EXPECT_EQ(r.ops[1].peer, kFlightNoRank);
  EXPECT_NE(r.ops[1].flags & FlightOp::kP2p, 0);
}

TEST(FlightHistoryTest, CollectGroupsTheLocalRanksOfTheAskedCommunicatorsByRank) {
  testing::ScriptedNode node("node-a", 0);
  node.Complete(0x1, 3, 8, 103, 1, 2);
  node.Complete(0x1, 1, 8, 101, 1, 2);
  node.Complete(0x2, 0, 2, 101, 1, 1);
  const FlightRecord rec = node.Record({0x1, 0x3});
  ASSERT_EQ(rec.comms.size(), 1u);  // 0x3 has no rank here; 0x2 was not asked for
  EXPECT_EQ(rec.comms[0].hash, 0x1u);
  EXPECT_EQ(rec.comms[0].nranks, 8);
  ASSERT_EQ(rec.comms[0].ranks.size(), 2u);
  EXPECT_EQ(rec.comms[0].ranks[0].rank, 1);
  EXPECT_EQ(rec.comms[0].ranks[0].pid, 101u);
  EXPECT_EQ(rec.comms[0].ranks[1].rank, 3);
  EXPECT_EQ(rec.ops_per_rank, 2000u);
}

}  // namespace
}  // namespace sentinel::collector
