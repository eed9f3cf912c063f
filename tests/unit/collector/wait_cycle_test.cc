// The wait-for graph across communicators (wait_cycle.h) on scripted stuck states: cycles of two
// and three processes over two and three communicators, a chain (no cycle), bystanders, waits on
// ranks of other nodes (never a cycle), and 8,192-rank graphs.
#include "collector/aggregate/wait_cycle.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace sentinel::collector {
namespace {

constexpr uint64_t kA = 0xA;
constexpr uint64_t kB = 0xB;
constexpr uint64_t kC = 0xC;

WaitMember Member(int32_t rank, uint64_t process, std::string label = "") {
  WaitMember m;
  m.rank = rank;
  m.process = process;
  m.label = std::move(label);
  return m;
}

WaitMember Outside(int32_t rank) {
  WaitMember m;
  m.rank = rank;
  m.known = false;
  return m;
}

CommWait Wait(uint64_t comm, uint64_t position, std::vector<WaitMember> waiting,
              std::vector<WaitMember> missing) {
  CommWait w;
  w.comm_hash = comm;
  w.position = position;
  w.waiting = std::move(waiting);
  w.missing = std::move(missing);
  return w;
}

TEST(WaitCycleTest, TwoRanksTwoCommunicators) {
  // Process 100 is rank 0 of A and of B, process 101 rank 1 of both: 100 waits in A #40 for 101,
  // which waits in B #12 for 100 (they issued the two communicators' collectives in opposite
  // orders).
  const WaitCycles c = FindWaitCycles({Wait(kA, 40, {Member(0, 100)}, {Member(1, 101)}),
                                       Wait(kB, 12, {Member(1, 101)}, {Member(0, 100)})});
  ASSERT_EQ(c.cycles.size(), 1u);
  EXPECT_FALSE(c.waits_outside);
  const WaitCycle& cy = c.cycles[0];
  EXPECT_EQ(cy.members, (std::vector<uint64_t>{100, 101}));
  EXPECT_EQ(cy.cycle_hops, 2u);
  ASSERT_EQ(cy.hops.size(), 2u);
  EXPECT_EQ(cy.hops[0].comm_hash, kA);
  EXPECT_EQ(cy.hops[1].comm_hash, kB);
  EXPECT_EQ(cy.text,
            "rank 0 waits in comm 0x000000000000000a #40 for rank 1; "
            "rank 1 waits in comm 0x000000000000000b #12 for rank 0");
}

TEST(WaitCycleTest, ThreeRanksThreeCommunicatorsWithLabels) {
  // Pairwise communicators: 7 waits in A for 8, 8 in B for 9, 9 in C for 7.
  const WaitCycles c = FindWaitCycles({
      Wait(kC, 5, {Member(0, 9, "pid 9")}, {Member(1, 7, "pid 7")}),
      Wait(kA, 40, {Member(0, 7, "pid 7")}, {Member(1, 8, "pid 8")}),
      Wait(kB, 12, {Member(0, 8, "pid 8")}, {Member(1, 9, "pid 9")}),
  });
  ASSERT_EQ(c.cycles.size(), 1u);
  const WaitCycle& cy = c.cycles[0];
  EXPECT_EQ(cy.members, (std::vector<uint64_t>{7, 8, 9}));
  EXPECT_EQ(cy.cycle_hops, 3u);
  // From the smallest process, around the cycle.
  EXPECT_EQ(cy.text,
            "rank 0 (pid 7) waits in comm 0x000000000000000a #40 for rank 1 (pid 8); "
            "rank 0 (pid 8) waits in comm 0x000000000000000b #12 for rank 1 (pid 9); "
            "rank 0 (pid 9) waits in comm 0x000000000000000c #5 for rank 1 (pid 7)");
}

TEST(WaitCycleTest, TwoOfThreeRanksDeadlockTheThirdWaits) {
  // A spans processes 10, 11, 12 (ranks 0-2); B spans 11, 12 (ranks 0-1). 10 and 12 issued A #3
  // and wait there for 11; 11 issued B #8 first and waits there for 12: 11 and 12 deadlock, 10 is
  // a bystander.
  const WaitCycles c = FindWaitCycles({
      Wait(kA, 3, {Member(0, 10), Member(2, 12)}, {Member(1, 11)}),
      Wait(kB, 8, {Member(0, 11)}, {Member(1, 12)}),
  });
  ASSERT_EQ(c.cycles.size(), 1u);
  EXPECT_EQ(c.cycles[0].members, (std::vector<uint64_t>{11, 12}));
  EXPECT_EQ(c.cycles[0].text,
            "rank 0 waits in comm 0x000000000000000b #8 for rank 1; "
            "rank 2 waits in comm 0x000000000000000a #3 for rank 1");
}

TEST(WaitCycleTest, AChainIsNoCycle) {
  // 1 waits in A for 2, 2 in B for 3, 3 in C for 4; 4 waits nowhere (the culprit).
  const WaitCycles c = FindWaitCycles({
      Wait(kA, 1, {Member(0, 1)}, {Member(1, 2)}),
      Wait(kB, 1, {Member(0, 2)}, {Member(1, 3)}),
      Wait(kC, 1, {Member(0, 3)}, {Member(1, 4)}),
  });
  EXPECT_TRUE(c.cycles.empty());
  EXPECT_FALSE(c.waits_outside);
}

TEST(WaitCycleTest, ACycleAndItsBystanders) {
  // A 6-rank communicator A: processes 20..25; 20 and 21 deadlock through B; 22..25 wait in A for
  // them (bystanders); 30 waits in C for 22 (a bystander further out).
  std::vector<WaitMember> a_waiting;
  for (int r = 2; r < 6; ++r) a_waiting.push_back(Member(r, static_cast<uint64_t>(20 + r)));
  std::vector<WaitMember> a_waiting_all = a_waiting;
  a_waiting_all.push_back(Member(0, 20));
  const WaitCycles c = FindWaitCycles({
      Wait(kA, 40, a_waiting_all, {Member(1, 21)}),
      Wait(kB, 12, {Member(1, 21)}, {Member(0, 20)}),
      Wait(kC, 2, {Member(0, 30)}, {Member(1, 22)}),
  });
  ASSERT_EQ(c.cycles.size(), 1u);
  EXPECT_EQ(c.cycles[0].members, (std::vector<uint64_t>{20, 21}));
  EXPECT_EQ(c.cycles[0].text,
            "rank 0 waits in comm 0x000000000000000a #40 for rank 1; "
            "rank 1 waits in comm 0x000000000000000b #12 for rank 0");
}

TEST(WaitCycleTest, EveryMemberOfALargerKnotIsNamed) {
  // 0 <-> 1 through A and B; 1 also waits in C for 2, and 2 waits in D for 0: one component of
  // three processes whose shortest cycle through 0 leaves 2 out; 2 still gets its wait.
  constexpr uint64_t kD = 0xD;
  const WaitCycles c = FindWaitCycles({
      Wait(kA, 1, {Member(0, 0)}, {Member(1, 1)}),
      Wait(kB, 1, {Member(0, 1)}, {Member(1, 0)}),
      Wait(kC, 1, {Member(0, 1)}, {Member(1, 2)}),
      Wait(kD, 1, {Member(0, 2)}, {Member(1, 0)}),
  });
  ASSERT_EQ(c.cycles.size(), 1u);
  const WaitCycle& cy = c.cycles[0];
  EXPECT_EQ(cy.members, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(cy.cycle_hops, 2u);
  ASSERT_EQ(cy.hops.size(), 3u);
  EXPECT_EQ(cy.hops[2].comm_hash, kD);
  EXPECT_EQ(cy.hops[2].waiter.process, 2u);
}

TEST(WaitCycleTest, WaitsOnOtherNodesNeverCloseACycle) {
  // 1 waits in A for a rank of another node; 2 waits in B for 1. Even an unknown member that
  // names a waiting process as its key (stale or forged) is no edge.
  WaitMember forged = Outside(3);
  forged.process = 2;
  const WaitCycles c = FindWaitCycles({
      Wait(kA, 9, {Member(0, 1)}, {Outside(1), forged}),
      Wait(kB, 4, {Member(0, 2)}, {Member(1, 1)}),
  });
  EXPECT_TRUE(c.cycles.empty());
  EXPECT_TRUE(c.waits_outside);
}

TEST(WaitCycleTest, AProcessWaitingForItsOwnOtherRank) {
  // Process 40 holds ranks 0 and 1 of A: rank 0 is inside A #2, rank 1 has not issued it, and the
  // process's thread cannot issue it while blocked: a cycle of one member.
  const WaitCycles c = FindWaitCycles({Wait(kA, 2, {Member(0, 40)}, {Member(1, 40)})});
  ASSERT_EQ(c.cycles.size(), 1u);
  EXPECT_EQ(c.cycles[0].members, (std::vector<uint64_t>{40}));
  EXPECT_EQ(c.cycles[0].text, "rank 0 waits in comm 0x000000000000000a #2 for rank 1");
}

TEST(WaitCycleTest, NothingStuck) {
  EXPECT_TRUE(FindWaitCycles({}).cycles.empty());
  // A collective nobody waits in (all its ranks missing) has no edge into it.
  EXPECT_TRUE(FindWaitCycles({Wait(kA, 1, {}, {Member(0, 1), Outside(1)})}).cycles.empty());
  EXPECT_FALSE(FindWaitCycles({Wait(kA, 1, {}, {Outside(1)})}).waits_outside);
}

TEST(WaitCycleTest, TwoCyclesInTheOrderOfTheirSmallestProcess) {
  const WaitCycles c = FindWaitCycles({
      Wait(kA, 1, {Member(0, 50)}, {Member(1, 51)}),
      Wait(kB, 1, {Member(1, 51)}, {Member(0, 50)}),
      Wait(kC, 1, {Member(0, 5)}, {Member(1, 6)}),
      Wait(kC + 1, 1, {Member(1, 6)}, {Member(0, 5)}),
  });
  ASSERT_EQ(c.cycles.size(), 2u);
  EXPECT_EQ(c.cycles[0].members, (std::vector<uint64_t>{5, 6}));
  EXPECT_EQ(c.cycles[1].members, (std::vector<uint64_t>{50, 51}));
}

TEST(WaitCycleTest, ARingOf8192ProcessesIsOneCycle) {
  // Process i waits in its own pair communicator for process i + 1 (mod n): one cycle of n hops,
  // walked without recursion.
  constexpr int kN = 8192;
  std::vector<CommWait> waits;
  for (int i = 0; i < kN; ++i) {
    waits.push_back(Wait(0x1000 + static_cast<uint64_t>(i), 7,
                         {Member(0, static_cast<uint64_t>(i))},
                         {Member(1, static_cast<uint64_t>((i + 1) % kN))}));
  }
  const WaitCycles c = FindWaitCycles(waits);
  ASSERT_EQ(c.cycles.size(), 1u);
  EXPECT_EQ(c.cycles[0].members.size(), static_cast<size_t>(kN));
  EXPECT_EQ(c.cycles[0].cycle_hops, static_cast<size_t>(kN));
  EXPECT_EQ(c.cycles[0].hops.back().target.process, 0u);
  // The text names the first 32 waits and counts the rest.
  EXPECT_EQ(c.cycles[0].text.rfind("; ... 8160 more waits (8192 processes in all)"),
            c.cycles[0].text.size() -
                std::string("; ... 8160 more waits (8192 processes in all)").size());
}

TEST(WaitCycleTest, A8192RankCommunicatorHalfMissing) {
  // World communicator W of 8,192 ranks: the even ranks wait in W #100 for the odd ones, each odd
  // rank waits in its pair communicator for its even partner. Edges grow with the ranks, not
  // their pairs; everything is one component and every member is named once.
  constexpr int kN = 8192;
  CommWait world;
  world.comm_hash = 0xF00D;
  world.position = 100;
  std::vector<CommWait> waits;
  for (int r = 0; r < kN; ++r) {
    const auto proc = static_cast<uint64_t>(r);
    if (r % 2 == 0) {
      world.waiting.push_back(Member(r, proc));
    } else {
      world.missing.push_back(Member(r, proc));
      waits.push_back(Wait(0x2000 + proc, 3, {Member(1, proc)}, {Member(0, proc - 1)}));
    }
  }
  waits.push_back(world);
  const WaitCycles c = FindWaitCycles(waits);
  ASSERT_EQ(c.cycles.size(), 1u);
  EXPECT_EQ(c.cycles[0].members.size(), static_cast<size_t>(kN));
  EXPECT_EQ(c.cycles[0].cycle_hops, 2u);
  EXPECT_EQ(c.cycles[0].hops.size(), static_cast<size_t>(kN));
}

TEST(WaitCycleTest, A8192ProcessChainHasNoCycle) {
  constexpr int kN = 8192;
  std::vector<CommWait> waits;
  for (int i = 0; i + 1 < kN; ++i) {
    waits.push_back(Wait(0x3000 + static_cast<uint64_t>(i), 1,
                         {Member(0, static_cast<uint64_t>(i))},
                         {Member(1, static_cast<uint64_t>(i + 1))}));
  }
  EXPECT_TRUE(FindWaitCycles(waits).cycles.empty());
}

}  // namespace
}  // namespace sentinel::collector
