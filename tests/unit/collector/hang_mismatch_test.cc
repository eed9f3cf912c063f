// Ranks that disagree at the stuck collective (hang_mismatch.h), on scripted states: each kind of
// difference, one against seven, a tie, one of 64, a first divergence before the stuck collective,
// unknown signatures (never a mismatch), and grouped p2p sizes and peers.
#include "collector/aggregate/hang_mismatch.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "tests/unit/collector/op_signature_test_util.h"

namespace sentinel::collector {
namespace {

constexpr uint64_t kComm = 0xC0FFEE0000000035ULL;
constexpr char kCommText[] = "0xc0ffee0000000035";
constexpr uint64_t kT = 1041;
using testing::kBf16;
using testing::kFp32;
using testing::kMiB;
using testing::kSum;
using testing::SigOf;

OpSignature AllReduce16() {
  OpSignature s = SigOf(kSentinelFuncAllReduce, 16 * kMiB, kBf16);
  s.red_op = kSum;
  return s;
}

// `n` ranks that all issued `common` at kT, but those in `odd` that issued `other`.
std::vector<RankOps> Job(int n, const OpSignature& common, const std::vector<int>& odd,
                         const OpSignature& other) {
  std::vector<RankOps> ranks;
  for (int r = 0; r < n; ++r) {
    RankOps ro;
    ro.rank = r;
    ro.issued = true;
    ro.at_stuck = common;
    for (int o : odd) {
      if (o == r) ro.at_stuck = other;
    }
    ranks.push_back(ro);
  }
  return ranks;
}

std::string Where() { return std::string("as collective #1041 of comm ") + kCommText; }

TEST(HangMismatchTest, FunctionOneAgainstSeven) {
  const MismatchVerdict v = CompareAtPosition(
      kComm, kT, Job(8, AllReduce16(), {3}, SigOf(kSentinelFuncAllGather, 4 * kMiB, kBf16)));
  ASSERT_TRUE(v.at_stuck.disagree);
  ASSERT_EQ(v.at_stuck.groups.size(), 2u);
  ASSERT_GE(v.at_stuck.majority, 0);
  EXPECT_EQ(v.at_stuck.groups[static_cast<size_t>(v.at_stuck.majority)].ranks,
            (std::vector<int32_t>{0, 1, 2, 4, 5, 6, 7}));
  ASSERT_EQ(v.at_stuck.minority.size(), 1u);
  EXPECT_EQ(v.at_stuck.groups[static_cast<size_t>(v.at_stuck.minority[0])].ranks,
            (std::vector<int32_t>{3}));
  EXPECT_FALSE(v.at_stuck.tie);
  EXPECT_TRUE(v.first_found);
  EXPECT_EQ(v.first.position, kT);
  EXPECT_EQ(v.text, "rank 3 issued AllGather 4 MiB bf16 " + Where() +
                        "; the other 7 ranks issued AllReduce 16 MiB bf16 sum");
}

TEST(HangMismatchTest, CountDatatypeAndRootEachMakeAMismatch) {
  struct Case {
    OpSignature common;
    OpSignature odd;
    std::string text;
  };
  const Case cases[] = {
      {SigOf(kSentinelFuncAllReduce, 16 * kMiB, kBf16),
       SigOf(kSentinelFuncAllReduce, 8 * kMiB, kBf16),
       "rank 5 issued AllReduce 8 MiB bf16 " + Where() +
           "; the other 7 ranks issued AllReduce 16 MiB bf16"},
      {SigOf(kSentinelFuncAllReduce, 16 * kMiB, kBf16),
       SigOf(kSentinelFuncAllReduce, 16 * kMiB, kFp32),
       "rank 5 issued AllReduce 16 MiB fp32 " + Where() +
           "; the other 7 ranks issued AllReduce 16 MiB bf16"},
      {SigOf(kSentinelFuncBroadcast, 16 * kMiB, kFp32, 0),
       SigOf(kSentinelFuncBroadcast, 16 * kMiB, kFp32, 1),
       "rank 5 issued Broadcast 16 MiB fp32 root 1 " + Where() +
           "; the other 7 ranks issued Broadcast 16 MiB fp32 root 0"},
  };
  for (const Case& c : cases) {
    const MismatchVerdict v = CompareAtPosition(kComm, kT, Job(8, c.common, {5}, c.odd));
    EXPECT_TRUE(v.at_stuck.disagree);
    EXPECT_EQ(v.text, c.text);
  }
}

TEST(HangMismatchTest, FourAgainstFourIsATieWithBothSides) {
  const MismatchVerdict v = CompareAtPosition(
      kComm, kT,
      Job(8, AllReduce16(), {4, 5, 6, 7}, SigOf(kSentinelFuncAllGather, 4 * kMiB, kBf16)));
  ASSERT_TRUE(v.at_stuck.disagree);
  EXPECT_TRUE(v.at_stuck.tie);
  EXPECT_EQ(v.at_stuck.majority, -1);  // none invented
  ASSERT_EQ(v.at_stuck.minority.size(), 2u);
  EXPECT_EQ(v.at_stuck.tied, 2u);
  EXPECT_EQ(v.text, "ranks 0-3 issued AllReduce 16 MiB bf16 sum " + Where() +
                        "; ranks 4-7 issued AllGather 4 MiB bf16 (no majority: 4 against 4)");
}

TEST(HangMismatchTest, ATieWithFurtherSidesNamesThemAll) {
  // 3 against 3, and one more rank on a third side; rank 7 known only by its function.
  std::vector<RankOps> ranks =
      Job(8, AllReduce16(), {3, 4, 5}, SigOf(kSentinelFuncAllGather, 4 * kMiB, kBf16));
  ranks[6].at_stuck = SigOf(kSentinelFuncBroadcast, kMiB, kFp32, 0);
  ranks[7].at_stuck = SignatureFromFunc(kSentinelFuncAllReduce);
  const MismatchVerdict v = CompareAtPosition(kComm, kT, ranks);
  EXPECT_TRUE(v.at_stuck.tie);
  EXPECT_EQ(v.at_stuck.majority, -1);
  EXPECT_EQ(v.at_stuck.tied, 2u);
  EXPECT_EQ(v.text, "ranks 0-2 issued AllReduce 16 MiB bf16 sum " + Where() +
                        "; ranks 3-5 issued AllGather 4 MiB bf16 (no majority: 3 against 3)"
                        "; rank 6 issued Broadcast 1 MiB fp32 root 0; rank 7 issued AllReduce");
}

TEST(HangMismatchTest, OneOfSixtyFour) {
  const MismatchVerdict v = CompareAtPosition(
      kComm, kT, Job(64, AllReduce16(), {41}, SigOf(kSentinelFuncAllReduce, 4 * kMiB, kBf16)));
  ASSERT_TRUE(v.at_stuck.disagree);
  ASSERT_GE(v.at_stuck.majority, 0);
  EXPECT_EQ(v.at_stuck.groups[static_cast<size_t>(v.at_stuck.majority)].ranks.size(), 63u);
  EXPECT_EQ(v.text, "rank 41 issued AllReduce 4 MiB bf16 " + Where() +
                        "; the other 63 ranks issued AllReduce 16 MiB bf16 sum");
}

TEST(HangMismatchTest, TwoMinoritiesAgainstOneMajority) {
  std::vector<RankOps> ranks =
      Job(8, AllReduce16(), {2}, SigOf(kSentinelFuncAllGather, 4 * kMiB, kBf16));
  ranks[6].at_stuck = SigOf(kSentinelFuncBroadcast, kMiB, kFp32, 0);
  const MismatchVerdict v = CompareAtPosition(kComm, kT, ranks);
  ASSERT_EQ(v.at_stuck.minority.size(), 2u);
  EXPECT_EQ(v.text, "rank 2 issued AllGather 4 MiB bf16 " + Where() +
                        "; rank 6 issued Broadcast 1 MiB fp32 root 0"
                        "; the other 6 ranks issued AllReduce 16 MiB bf16 sum");
}

TEST(HangMismatchTest, FirstDivergenceBeforeTheStuckCollective) {
  std::vector<RankOps> ranks =
      Job(8, AllReduce16(), {3}, SigOf(kSentinelFuncAllGather, 4 * kMiB, kBf16));
  for (RankOps& r : ranks) {
    for (uint64_t p = 1030; p < kT; ++p) {
      OpSignature s = SigOf(kSentinelFuncAllReduce, 16 * kMiB, kBf16);
      // Rank 3 took another path from #1037 on: a smaller bucket, then the rest in step.
      if (r.rank == 3 && p == 1037) s.bytes = 8 * kMiB;
      r.history.push_back({p, s});
    }
  }
  const MismatchVerdict v = CompareAtPosition(kComm, kT, ranks);
  ASSERT_TRUE(v.first_found);
  EXPECT_EQ(v.first.position, 1037u);
  EXPECT_EQ(v.text, "rank 3 issued AllGather 4 MiB bf16 " + Where() +
                        "; the other 7 ranks issued AllReduce 16 MiB bf16 sum"
                        "; first diverged at collective #1037: rank 3 issued AllReduce 8 MiB bf16"
                        "; the other 7 ranks issued AllReduce 16 MiB bf16");
}

TEST(HangMismatchTest, DivergenceOnlyBeforeAndPositionsOnlyOneRankKnows) {
  // At T only functions are known (the in-flight state) and they agree; earlier the sizes
  // differed. Positions that only one rank's (bounded) history still holds are not compared.
  std::vector<RankOps> ranks = Job(4, SignatureFromFunc(kSentinelFuncAllReduce), {}, OpSignature{});
  ranks[0].history.push_back({900, SigOf(kSentinelFuncAllGather, kMiB, kBf16)});
  for (RankOps& r : ranks) {
    r.history.push_back(
        {1040, SigOf(kSentinelFuncAllReduce, r.rank == 2 ? kMiB : 2 * kMiB, kBf16)});
  }
  const MismatchVerdict v = CompareAtPosition(kComm, kT, ranks);
  EXPECT_FALSE(v.at_stuck.disagree);
  ASSERT_TRUE(v.first_found);
  EXPECT_EQ(v.first.position, 1040u);
  EXPECT_TRUE(v.Disagree());
  EXPECT_EQ(v.text, std::string("rank 2 issued AllReduce 1 MiB bf16 as collective #1040 of comm ") +
                        kCommText +
                        "; the other 3 ranks issued AllReduce 2 MiB bf16 (the first divergence; "
                        "no difference known at the stuck collective #1041)");
}

TEST(HangMismatchTest, UnknownSignaturesAreNeverAMismatch) {
  // Rank 3's operation at T is unknown, rank 4's only by function, rank 5's reduction unknown.
  std::vector<RankOps> ranks = Job(8, AllReduce16(), {3}, OpSignature{});
  ranks[4].at_stuck = SignatureFromFunc(kSentinelFuncAllReduce);
  ranks[5].at_stuck.red_op.reset();
  // An earlier position where one rank's record is unknown.
  for (RankOps& r : ranks) {
    r.history.push_back({kT - 1, r.rank == 1 ? OpSignature{} : AllReduce16()});
  }
  const MismatchVerdict v = CompareAtPosition(kComm, kT, ranks);
  EXPECT_FALSE(v.at_stuck.disagree);
  EXPECT_FALSE(v.first_found);
  EXPECT_FALSE(v.Disagree());
  EXPECT_EQ(v.at_stuck.unknown, (std::vector<int32_t>{3}));
  EXPECT_TRUE(v.text.empty());
}

TEST(HangMismatchTest, PartlyKnownRanksAreNotCountedOnEitherSide) {
  // Five ranks known by function only; two issued 16 MiB, one 4 MiB: the 2 outnumber the 1, and
  // the five are listed apart (they agree with both as far as known).
  std::vector<RankOps> ranks = Job(8, SignatureFromFunc(kSentinelFuncAllReduce), {5, 6},
                                   SigOf(kSentinelFuncAllReduce, 16 * kMiB, kBf16));
  ranks[7].at_stuck = SigOf(kSentinelFuncAllReduce, 4 * kMiB, kBf16);
  ranks[2].issued = false;  // not compared
  const MismatchVerdict v = CompareAtPosition(kComm, kT, ranks);
  ASSERT_TRUE(v.at_stuck.disagree);
  EXPECT_EQ(v.not_issued, (std::vector<int32_t>{2}));
  ASSERT_GE(v.at_stuck.majority, 0);
  EXPECT_EQ(v.at_stuck.groups[static_cast<size_t>(v.at_stuck.majority)].ranks,
            (std::vector<int32_t>{5, 6}));
  ASSERT_EQ(v.at_stuck.undetermined.size(), 1u);
  EXPECT_EQ(v.text, "rank 7 issued AllReduce 4 MiB bf16 " + Where() +
                        "; ranks 5-6 issued AllReduce 16 MiB bf16"
                        "; ranks 0-1,3-4 issued AllReduce (no difference known)"
                        "; rank 2 has not issued it");
}

TEST(HangMismatchTest, AStuckPositionFromAPassedRanksHistoryAndRepeatedRanks) {
  // Rank 1 completed T (a record at T): it is compared there. Rank 0 appears twice: the first wins.
  std::vector<RankOps> ranks(3);
  ranks[0].rank = 0;
  ranks[0].issued = true;
  ranks[0].at_stuck = AllReduce16();
  ranks[1].rank = 1;
  ranks[1].history.push_back({kT, SigOf(kSentinelFuncAllGather, kMiB, kBf16)});
  ranks[1].history.push_back({kT + 5, SigOf(kSentinelFuncBroadcast, kMiB, kBf16, 0)});
  ranks[2] = ranks[0];
  ranks[2].at_stuck = SigOf(kSentinelFuncReduce, kMiB, kBf16, 0);
  const MismatchVerdict v = CompareAtPosition(kComm, kT, ranks);
  ASSERT_TRUE(v.at_stuck.disagree);
  EXPECT_TRUE(v.at_stuck.tie);
  EXPECT_TRUE(v.not_issued.empty());
  EXPECT_EQ(v.text, "rank 0 issued AllReduce 16 MiB bf16 sum " + Where() +
                        "; rank 1 issued AllGather 1 MiB bf16 (no majority: 1 against 1)");
}

TEST(HangMismatchTest, NothingToCompare) {
  EXPECT_FALSE(CompareAtPosition(kComm, kT, {}).Disagree());
  const MismatchVerdict one = CompareAtPosition(kComm, kT, Job(1, AllReduce16(), {}, {}));
  EXPECT_FALSE(one.Disagree());
  ASSERT_EQ(one.at_stuck.groups.size(), 1u);
  EXPECT_TRUE(one.text.empty());
}

TEST(HangMismatchTest, RankListsAreShortAndBounded) {
  EXPECT_EQ(RankListText({3}), "rank 3");
  EXPECT_EQ(RankListText({0, 1, 2, 4, 6, 7}), "ranks 0-2,4,6-7");
  std::vector<int32_t> evens;
  for (int32_t r = 0; r < 100; r += 2) evens.push_back(r);
  EXPECT_EQ(RankListText(evens), "ranks 0,2,4,6,8,10,12,14,... (50 ranks)");
}

P2pOp Op(int32_t rank, int32_t peer, P2pDirection d, uint64_t index, uint64_t bytes) {
  P2pOp op;
  op.rank = rank;
  op.peer = peer;
  op.direction = d;
  op.index = index;
  op.bytes = bytes;
  return op;
}

TEST(HangMismatchTest, GroupedP2pSizeMismatchNamesBothSides) {
  const std::vector<P2pOp> ops = {
      Op(0, 1, P2pDirection::kSend, 7, kMiB), Op(1, 0, P2pDirection::kRecv, 7, 2 * kMiB),
      Op(1, 0, P2pDirection::kSend, 7, kMiB), Op(0, 1, P2pDirection::kRecv, 7, kMiB)};
  const P2pComparison c = CompareGroupedP2p(kComm, ops, {0, 1});
  ASSERT_EQ(c.mismatches.size(), 1u);  // reported once, from the send
  const P2pMismatch& m = c.mismatches[0];
  EXPECT_TRUE(m.size_differs);
  EXPECT_EQ(m.op.rank, 0);
  ASSERT_TRUE(m.counterpart.has_value());
  EXPECT_EQ(m.counterpart->rank, 1);
  EXPECT_EQ(c.text, std::string("rank 0's Send #7 to rank 1 (1 MiB) against rank 1's Recv #7 "
                                "from rank 0 (2 MiB): the sizes differ (comm ") +
                        kCommText + ")");
}

TEST(HangMismatchTest, GroupedP2pUnmatchedPeerNamesWhatThePeerIssued) {
  // Rank 2 sends to 5, but rank 5 receives from 4 (and 4 sends to 5: matched).
  const std::vector<P2pOp> ops = {Op(2, 5, P2pDirection::kSend, 3, kMiB),
                                  Op(5, 4, P2pDirection::kRecv, 3, kMiB),
                                  Op(4, 5, P2pDirection::kSend, 3, kMiB)};
  const P2pComparison c = CompareGroupedP2p(kComm, ops, {2, 4, 5});
  ASSERT_EQ(c.mismatches.size(), 1u);
  const P2pMismatch& m = c.mismatches[0];
  EXPECT_FALSE(m.size_differs);
  EXPECT_EQ(m.op.rank, 2);
  ASSERT_EQ(m.peer_ops.size(), 1u);
  EXPECT_EQ(m.peer_ops[0].peer, 4);
  EXPECT_EQ(c.text, std::string("rank 2's Send #3 to rank 5 (1 MiB) has no matching Recv on rank "
                                "5, which issued Recv #3 from rank 4 (1 MiB) (comm ") +
                        kCommText + ")");
}

TEST(HangMismatchTest, GroupedP2pUnknownPeersAndCompletedCounterparts) {
  std::vector<P2pOp> ops = {
      Op(0, 9, P2pDirection::kSend, 1, kMiB),  // rank 9: another node
      Op(0, 1, P2pDirection::kSend, 2, kMiB),  // rank 1 has not issued its group
      Op(0, 3, P2pDirection::kUnknown, 1, kMiB),
      Op(0, 2, P2pDirection::kRecv, 4, kMiB),  // rank 2's send #4 already completed
  };
  P2pOp done = Op(2, 0, P2pDirection::kSend, 4, kMiB);
  done.in_flight = false;
  ops.push_back(done);
  P2pOp unsized = Op(2, 0, P2pDirection::kRecv, 5, 0);
  unsized.bytes.reset();  // size unknown: never a size difference
  ops.push_back(unsized);
  ops.push_back(Op(0, 2, P2pDirection::kSend, 5, 4 * kMiB));
  const P2pComparison c = CompareGroupedP2p(kComm, ops, {0, 2});
  EXPECT_TRUE(c.mismatches.empty()) << c.text;
  EXPECT_EQ(c.unknown.size(), 3u);
  EXPECT_TRUE(c.text.empty());
}

TEST(HangMismatchTest, GroupedP2pPeerListIsBounded) {
  std::vector<P2pOp> ops = {Op(0, 1, P2pDirection::kSend, 1, kMiB)};
  for (int32_t p = 2; p < 10; ++p) ops.push_back(Op(1, p, P2pDirection::kRecv, 1, kMiB));
  const P2pComparison c = CompareGroupedP2p(kComm, ops, {0, 1}, 2);
  ASSERT_EQ(c.mismatches.size(), 1u);
  EXPECT_EQ(c.mismatches[0].peer_ops.size(), 2u);
  EXPECT_NE(c.text.find("Recv #1 from rank 2 (1 MiB), Recv #1 from rank 3 (1 MiB) and 6 more"),
            std::string::npos)
      << c.text;
}

}  // namespace
}  // namespace sentinel::collector
