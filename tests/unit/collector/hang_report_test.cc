// `sentinelctl hang-report`'s merge (collector/hang_report.h) on scripted two-node sets, each
// node's record written and read back as the files would be: a mismatch at a position (and an
// earlier divergence), a rank that never arrived, a wait cycle across two communicators, all
// ranks arrived, clocks hours apart between the nodes, separate jobs, and files that contradict
// each other or cannot be read.
#include "collector/hang_report.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "tests/unit/collector/flight_test_util.h"

namespace sentinel::collector {
namespace {

using testing::kBf16;
using testing::kMiB;
using testing::kSec;
using testing::ScriptedNode;

constexpr uint64_t kCommA = 0xa;
constexpr uint64_t kCommB = 0xb;
constexpr int64_t kHours = 3600 * kSec;

// Eight ranks, four per node (node-a: ranks 0-3, pids 100-103; node-b: ranks 4-7, pids 204-207),
// every rank completed collectives 1001..`last` (AllReduce 16 MiB bf16).
struct TwoNodes {
  explicit TwoNodes(int64_t offset_a = 0, int64_t offset_b = 0)
      : a("node-a", offset_a), b("node-b", offset_b) {}
  ScriptedNode& NodeOf(int32_t rank) { return rank < 4 ? a : b; }
  static uint32_t Pid(int32_t rank) { return rank < 4 ? 100 + rank : 200 + rank; }
  void CompleteAll(uint64_t comm, uint32_t last) {
    for (int32_t r = 0; r < 8; ++r) NodeOf(r).Complete(comm, r, 8, Pid(r), 1001, last);
  }
  void Stand(uint64_t comm, int32_t r, uint64_t completed, uint64_t started, uint64_t enqueued,
             uint8_t func = kSentinelFuncAllReduce, uint64_t sig_bytes = 0) {
    NodeOf(r).Stand(comm, r, 8, Pid(r), completed, started, enqueued, func, sig_bytes);
  }
  HangReportResult Report(const std::vector<uint64_t>& comms) {
    return MergeFlightRecords({a.File(comms), b.File(comms)});
  }
  ScriptedNode a;
  ScriptedNode b;
};

TEST(HangReportTest, OpText) {
  FlightOp op;
  op.func = kSentinelFuncAllGather;
  op.bytes = 4 * kMiB;
  op.flags = FlightOp::kBytesKnown;
  op.datatype = kBf16;
  EXPECT_EQ(FlightOpText(op), "AllGather 4 MiB bf16");
  op.func = kSentinelFuncBroadcast;
  op.bytes = 3 * kMiB / 2;
  op.datatype = testing::kFp32;
  op.root = 2;
  EXPECT_EQ(FlightOpText(op), "Broadcast 1.5 MiB fp32 root 2");
  op.func = kSentinelFuncSend;
  op.bytes = 100;
  op.flags |= FlightOp::kP2p;
  op.peer = 3;
  EXPECT_EQ(FlightOpText(op), "Send 100 B fp32 peer 3");
  FlightOp unknown;
  EXPECT_EQ(FlightOpText(unknown), "an operation of unknown function");
}

TEST(HangReportTest, AMismatchAtAPositionIsNamedWithBothSides) {
  TwoNodes job;
  job.CompleteAll(0xc1, 1040);
  for (int32_t r = 0; r < 8; ++r) {
    const bool odd = r == 3;
    const uint8_t func = odd ? kSentinelFuncAllGather : kSentinelFuncAllReduce;
    job.Stand(0xc1, r, 1040, 1041, 1041, func, odd ? 4 * kMiB : 16 * kMiB);
  }
  const HangReportResult rep = job.Report({0xc1});
  EXPECT_TRUE(rep.ok) << rep.text;
  EXPECT_NE(rep.text.find("verdict: mismatch: rank 3 issued AllGather 4 MiB bf16 as collective "
                          "#1041 of comm 0x00000000000000c1; the other 7 ranks issued AllReduce "
                          "16 MiB bf16 (they differ in function)\n"),
            std::string::npos)
      << rep.text;
  const nlohmann::json& j = rep.json["jobs"][0];
  EXPECT_EQ(j["verdict"]["kind"], "mismatch");
  EXPECT_EQ(j["mismatches"][0]["position"], 1041);
  EXPECT_EQ(j["mismatches"][0]["sides"][1]["ranks"], nlohmann::json::array({3}));
  EXPECT_EQ(j["mismatches"][0]["sides"][0]["ranks"].size(), 7u);
  EXPECT_EQ(j["communicators"][0]["stuck_position"], 1041);
  // Rank by rank, each with its own operation.
  EXPECT_NE(rep.text.find("rank 3 (node-a pid 103): AllGather 4 MiB bf16, kernel_started"),
            std::string::npos)
      << rep.text;
}

TEST(HangReportTest, FromFramesWithoutTheSignatureTheFunctionsAreCompared) {
  TwoNodes job;
  job.CompleteAll(0xc1, 1040);
  for (int32_t r = 0; r < 8; ++r) {
    job.Stand(0xc1, r, 1040, 1041, 1041,
              r == 6 ? kSentinelFuncReduceScatter : kSentinelFuncAllReduce);
  }
  const HangReportResult rep = job.Report({0xc1});
  EXPECT_NE(rep.text.find("verdict: mismatch: rank 6 issued ReduceScatter as collective #1041 of "
                          "comm 0x00000000000000c1; the other 7 ranks issued AllReduce "),
            std::string::npos)
      << rep.text;
}

// The command users run: `sentinelctl hang-report` on two nodes' files as sentineld writes them
// (FlightRecordJson), text and --json; a file that cannot be read makes it exit 5 with the reason.
TEST(HangReportTest, SentinelctlHangReportOnTwoNodesFiles) {
  TwoNodes job;
  job.CompleteAll(0xc1, 1040);
  for (int32_t r = 0; r < 8; ++r) {
    const bool odd = r == 6;
    job.Stand(0xc1, r, 1040, 1041, 1041, odd ? kSentinelFuncAllGather : kSentinelFuncAllReduce,
              odd ? 4 * kMiB : 16 * kMiB);
  }
  char tmpl[] = "/tmp/snhangreport-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::vector<std::string> paths;
  for (const ScriptedNode* node : {&job.a, &job.b}) {
    paths.push_back(dir + "/" + node->File({0xc1}).name);
    std::ofstream(paths.back()) << FlightRecordJson(node->Record({0xc1}));
  }
  auto run = [](const std::string& args, int* rc) {
    std::string out;
    FILE* p = popen((std::string(SENTINELCTL_PATH) + " hang-report " + args).c_str(), "r");
    if (p == nullptr) return out;
    char buf[4096];
    size_t n = 0;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    *rc = WEXITSTATUS(pclose(p));
    return out;
  };
  int rc = -1;
  const std::string text = run(paths[0] + " " + paths[1], &rc);
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("verdict: mismatch: rank 6 issued AllGather 4 MiB bf16 as collective #1041"),
            std::string::npos)
      << text;
  const std::string json = run("--json " + paths[0] + " " + paths[1], &rc);
  EXPECT_EQ(rc, 0) << json;
  EXPECT_EQ(nlohmann::json::parse(json, nullptr, false)["jobs"][0]["verdict"]["kind"], "mismatch")
      << json;
  const std::string refused = run(paths[0] + " " + dir + "/absent.json", &rc);
  EXPECT_EQ(rc, 5) << refused;
  EXPECT_NE(refused.find("absent.json"), std::string::npos) << refused;
  for (const std::string& path : paths) unlink(path.c_str());
  rmdir(dir.c_str());
}

TEST(HangReportTest, ASizeOrARootThatDiffersIsAMismatchToo) {
  TwoNodes job;
  job.CompleteAll(0xc1, 1040);
  for (int32_t r = 0; r < 8; ++r) {
    job.Stand(0xc1, r, 1040, 1041, 1041, kSentinelFuncAllReduce, r == 2 ? 8 * kMiB : 16 * kMiB);
  }
  HangReportResult rep = job.Report({0xc1});
  EXPECT_NE(rep.text.find("verdict: mismatch: rank 2 issued AllReduce 8 MiB bf16 as collective "
                          "#1041 of comm 0x00000000000000c1; the other 7 ranks issued AllReduce "
                          "16 MiB bf16 (they differ in size)\n"),
            std::string::npos)
      << rep.text;

  TwoNodes bcast;
  bcast.CompleteAll(0xc5, 1040);
  for (int32_t r = 0; r < 8; ++r) {
    bcast.Stand(0xc5, r, 1040, 1041, 1041, kSentinelFuncBroadcast, kMiB);
  }
  std::vector<FlightFile> files = {bcast.a.File({0xc5}), bcast.b.File({0xc5})};
  // Ranks 4-6 name root 0, rank 7 root 1 (the frames' roots, as a minor-1 plugin sends them).
  for (FlightRank& r : files[1].record.comms[0].ranks) r.ops.back().root = r.rank == 7 ? 1 : 0;
  for (FlightRank& r : files[0].record.comms[0].ranks) r.ops.back().root = 0;
  rep = MergeFlightRecords(files);
  EXPECT_NE(rep.text.find("verdict: mismatch: rank 7 issued Broadcast 1 MiB bf16 root 1 as "
                          "collective #1041 of comm 0x00000000000000c5; the other 7 ranks issued "
                          "Broadcast 1 MiB bf16 root 0 (they differ in root)\n"),
            std::string::npos)
      << rep.text;
}

TEST(HangReportTest, AnEarlierDivergenceIsTheFirstNamedAndTheStuckPositionToo) {
  TwoNodes job;
  for (int32_t r = 0; r < 8; ++r) {
    ScriptedNode& n = job.NodeOf(r);
    n.Complete(0xc1, r, 8, TwoNodes::Pid(r), 1001, 1037);
    // Rank 5's bucket differs at #1038: NCCL completed it anyway (same function, other size).
    n.Complete(0xc1, r, 8, TwoNodes::Pid(r), 1038, 1038, kSentinelFuncAllReduce,
               r == 5 ? 8 * kMiB : 16 * kMiB);
    n.Complete(0xc1, r, 8, TwoNodes::Pid(r), 1039, 1040);
    job.Stand(0xc1, r, 1040, 1041, 1041, r == 5 ? kSentinelFuncAllGather : kSentinelFuncAllReduce);
  }
  const HangReportResult rep = job.Report({0xc1});
  EXPECT_NE(rep.text.find("verdict: mismatch: rank 5 issued AllReduce 8 MiB bf16 as collective "
                          "#1038 of comm 0x00000000000000c1; the other 7 ranks issued AllReduce "
                          "16 MiB bf16 (they differ in size); the first divergence, before the "
                          "stuck #1041"),
            std::string::npos)
      << rep.text;
  EXPECT_NE(rep.text.find("mismatch: rank 5 issued AllGather as collective #1041"),
            std::string::npos)
      << rep.text;
  EXPECT_EQ(rep.json["jobs"][0]["mismatches"].size(), 2u);
}

// Ranks 0-6 wait in #41; rank 7 (node-b) completed #40 and never enqueued #41.
TwoNodes NeverArrived(int64_t offset_a, int64_t offset_b) {
  TwoNodes job(offset_a, offset_b);
  job.CompleteAll(0xc2, 1040);
  for (int32_t r = 0; r < 7; ++r) job.Stand(0xc2, r, 1040, 1041, 1041);
  job.Stand(0xc2, 7, 1040, 1040, 1040);
  return job;
}

TEST(HangReportTest, ARankThatNeverArrivedIsTheCulpritWithItsLastOperation) {
  TwoNodes job = NeverArrived(0, 0);
  const HangReportResult rep = job.Report({0xc2});
  EXPECT_TRUE(rep.ok);
  EXPECT_NE(rep.text.find("verdict: culprits: rank 7 (node-b pid 207) never reached #1041 of comm "
                          "0x00000000000000c2: last operation AllReduce 16 MiB bf16 #1040 "
                          "completed; nothing in flight\n"),
            std::string::npos)
      << rep.text;
  // Each waiting rank's time inside it, from its own clock's two readings.
  EXPECT_NE(rep.text.find(
                "rank 4 (node-b pid 204): AllReduce, kernel_started for 35.0 s by its own clock"),
            std::string::npos)
      << rep.text;
  EXPECT_NE(rep.text.find("stuck at #1041 (AllReduce); 7 waiting there, 1 never reached it"),
            std::string::npos)
      << rep.text;
  const nlohmann::json& c = rep.json["jobs"][0]["communicators"][0];
  EXPECT_EQ(c["never_reached"][0]["rank"], 7);
  EXPECT_EQ(c["never_reached"][0]["node"], "node-b");
}

TEST(HangReportTest, ClocksHoursApartBetweenTheNodesGiveTheSameReport) {
  const std::string same = NeverArrived(0, 0).Report({0xc2}).text;
  // node-b's CLOCK_MONOTONIC 5 hours ahead, then node-a's 7 hours ahead: every node-b time is
  // later (then earlier) than every node-a time, which a merge by time would get wrong.
  EXPECT_EQ(NeverArrived(0, 5 * kHours).Report({0xc2}).text, same);
  EXPECT_EQ(NeverArrived(7 * kHours, 0).Report({0xc2}).text, same);
  EXPECT_EQ(NeverArrived(7 * kHours, 0).Report({0xc2}).json,
            NeverArrived(0, 0).Report({0xc2}).json);
}

TEST(HangReportTest, AWaitCycleAcrossTwoCommunicatorsNamesEveryMember) {
  // pid 100 (node-a) is rank 0 of A and rank 1 of B; pid 200 (node-b) is rank 1 of A, rank 0 of B.
  ScriptedNode a("node-a", 2 * kHours);
  ScriptedNode b("node-b", 0);
  a.Complete(kCommA, 0, 2, 100, 1, 39);
  a.Stand(kCommA, 0, 2, 100, 39, 40, 40);  // waits in A #40
  a.Complete(kCommB, 1, 2, 100, 1, 11);
  a.Stand(kCommB, 1, 2, 100, 11, 11, 11);  // never enqueued B #12
  b.Complete(kCommA, 1, 2, 200, 1, 39);
  b.Stand(kCommA, 1, 2, 200, 39, 39, 39);  // never enqueued A #40
  b.Complete(kCommB, 0, 2, 200, 1, 11);
  b.Stand(kCommB, 0, 2, 200, 11, 12, 12);  // waits in B #12
  const HangReportResult rep =
      MergeFlightRecords({a.File({kCommA, kCommB}), b.File({kCommA, kCommB})});
  EXPECT_TRUE(rep.ok);
  EXPECT_NE(rep.text.find("verdict: cycle: wait cycle across communicators: rank 0 (node-a pid "
                          "100) waits in comm 0x000000000000000a #40 for rank 1 (node-b pid 200); "
                          "rank 0 (node-b pid 200) waits in comm 0x000000000000000b #12 for rank 1 "
                          "(node-a pid 100)\n"),
            std::string::npos)
      << rep.text;
  const nlohmann::json& cycle = rep.json["jobs"][0]["cycle"];
  ASSERT_EQ(cycle.size(), 2u);
  EXPECT_EQ(cycle[0]["waits_for"]["pid"], 200);
  EXPECT_EQ(cycle[1]["waits_for"]["pid"], 100);
  // Each culprit line says where its process waits instead.
  EXPECT_NE(rep.text.find("rank 1 (node-b pid 200) never reached #40 of comm 0x000000000000000a: "
                          "last operation AllReduce 16 MiB bf16 #39 completed; nothing in flight; "
                          "its process waits in comm 0x000000000000000b at #12 as rank 0 "
                          "(kernel_started)"),
            std::string::npos)
      << rep.text;
}

TEST(HangReportTest, AllRanksReachedIsSaidAsSuchAndAMissingNodeIsNamed) {
  TwoNodes job;
  job.CompleteAll(0xc3, 1040);
  for (int32_t r = 0; r < 8; ++r) job.Stand(0xc3, r, 1040, r == 2 ? 1040 : 1041, 1041);
  HangReportResult rep = job.Report({0xc3});
  EXPECT_NE(rep.text.find("verdict: all_reached: all ranks reached #1041 of comm "
                          "0x00000000000000c3: waiting on something outside the record; rank 2's "
                          "kernel for it never started (enqueued only)\n"),
            std::string::npos)
      << rep.text;
  // node-b's file missing: the ranks in the files all reached it, and that is all that is said.
  rep = MergeFlightRecords({job.a.File({0xc3})});
  EXPECT_NE(rep.text.find("all 4 ranks in these files reached #1041 of comm 0x00000000000000c3; "
                          "ranks 4-7 in no file given: the rank holding it back may be among "
                          "them"),
            std::string::npos)
      << rep.text;
}

TEST(HangReportTest, TheStuckPositionIsTheOldestAnyRankWaitsAt) {
  // Rank 7 (a Broadcast's root may finish first) completed #1041 and waits in #1042; the others
  // wait in #1041: the communicator is stuck at #1041, which every rank reached.
  TwoNodes job;
  job.CompleteAll(0xc6, 1040);
  for (int32_t r = 0; r < 7; ++r) job.Stand(0xc6, r, 1040, 1041, 1041);
  job.b.Complete(0xc6, 7, 8, TwoNodes::Pid(7), 1041, 1041);
  job.Stand(0xc6, 7, 1041, 1042, 1042);
  const HangReportResult rep = job.Report({0xc6});
  EXPECT_NE(rep.text.find("stuck at #1041 (AllReduce); 7 waiting there, 0 never reached it"),
            std::string::npos)
      << rep.text;
  EXPECT_NE(rep.text.find("verdict: all_reached: all ranks reached #1041 of comm "
                          "0x00000000000000c6: waiting on something outside the record\n"),
            std::string::npos)
      << rep.text;
}

TEST(HangReportTest, NothingInFlightIsNoHang) {
  TwoNodes job;
  job.CompleteAll(0xc4, 1010);
  const HangReportResult rep = job.Report({0xc4});
  EXPECT_NE(rep.text.find("verdict: no_hang: "), std::string::npos) << rep.text;
}

TEST(HangReportTest, FilesOfDifferentJobsAreReportedAsSuch) {
  ScriptedNode a("node-a", 0);
  ScriptedNode c("node-c", 0);
  a.Complete(kCommA, 0, 2, 100, 1, 5);
  a.Stand(kCommA, 0, 2, 100, 5, 6, 6);
  c.Complete(0xd, 0, 2, 300, 1, 5);
  const HangReportResult rep = MergeFlightRecords({a.File({kCommA}), c.File({0xd})});
  EXPECT_NE(rep.text.find("from 2 different jobs (no communicator in common)"), std::string::npos)
      << rep.text;
  EXPECT_NE(rep.text.find("job 1 (node-a.json)"), std::string::npos) << rep.text;
  EXPECT_NE(rep.text.find("job 2 (node-c.json)"), std::string::npos) << rep.text;
  EXPECT_EQ(rep.json["jobs"].size(), 2u);
}

TEST(HangReportTest, ARankInTwoFilesOrTwoSizesOfOneCommunicatorLeaveTheLaterFileOut) {
  TwoNodes job = NeverArrived(0, 0);
  FlightFile again = job.b.File({0xc2});
  again.name = "copy-of-node-b.json";
  HangReportResult rep = MergeFlightRecords({job.a.File({0xc2}), job.b.File({0xc2}), again});
  EXPECT_FALSE(rep.ok);
  EXPECT_NE(rep.text.find("copy-of-node-b.json: left out: rank 4 of comm 0x00000000000000c2 is "
                          "also in node-b.json (node node-b)"),
            std::string::npos)
      << rep.text;
  // The merge of the others stands.
  EXPECT_NE(rep.text.find("verdict: culprits: rank 7 (node-b pid 207)"), std::string::npos)
      << rep.text;

  FlightFile other = job.b.File({0xc2});
  other.name = "other.json";
  other.record.comms[0].nranks = 16;
  rep = MergeFlightRecords({job.a.File({0xc2}), other});
  EXPECT_FALSE(rep.ok);
  EXPECT_NE(rep.text.find("other.json: left out: comm 0x00000000000000c2 has 16 ranks here and 8 "
                          "in node-a.json"),
            std::string::npos)
      << rep.text;
}

TEST(HangReportTest, HostileSizesStayCheap) {
  // A communicator claiming 2^24 ranks with two of them present: the missing ranks are counted
  // from the gaps, not listed one by one.
  ScriptedNode a("node-a", 0);
  a.Complete(0xe, 0, 1 << 24, 1, 1, 3);
  a.Stand(0xe, 0, 1 << 24, 1, 3, 4, 4);
  a.Complete(0xe, (1 << 24) - 1, 1 << 24, 2, 1, 3);
  const HangReportResult rep = MergeFlightRecords({a.File({0xe})});
  EXPECT_NE(rep.text.find("(ranks 1-16777214 in no file given)"), std::string::npos) << rep.text;
  EXPECT_NE(rep.text.find("rank 16777215 (node-a pid 2) never reached #4"), std::string::npos)
      << rep.text;
}

class HangReportFilesTest : public testing::FlightDirTest {
 protected:
  std::string Put(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
};

TEST_F(HangReportFilesTest, UnreadableFilesAreListedAndTheRestIsMerged) {
  TwoNodes job = NeverArrived(0, 0);
  const std::string a = Put("a.json", FlightRecordJson(job.a.Record({0xc2})));
  const std::string b = Put("b.json", FlightRecordJson(job.b.Record({0xc2})));
  std::string v2 = FlightRecordJson(job.b.Record({0xc2}));
  v2.replace(v2.find("\"version\":1"), 11, "\"version\":2");
  const std::string newer = Put("newer.json", v2);
  const std::string cut = Put("cut.json", FlightRecordJson(job.b.Record({0xc2})).substr(0, 300));
  const std::string garbage = Put("garbage.json", "\x1b[31mnot json\n");
  const std::string fifo = dir_ + "/fifo.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const HangReportResult rep =
      HangReportFromPaths({a, newer, cut, garbage, fifo, dir_ + "/none.json", b});
  EXPECT_FALSE(rep.ok);
  EXPECT_NE(rep.text.find("verdict: culprits: rank 7 (node-b pid 207)"), std::string::npos)
      << rep.text;
  EXPECT_NE(rep.text.find("newer.json: flight record version 2; this reader knows version 1"),
            std::string::npos)
      << rep.text;
  EXPECT_NE(rep.text.find("cut.json: not JSON (truncated or corrupt) at byte"), std::string::npos)
      << rep.text;
  EXPECT_NE(rep.text.find("garbage.json: not JSON"), std::string::npos) << rep.text;
  EXPECT_NE(rep.text.find("fifo.json: not a regular file"), std::string::npos) << rep.text;
  EXPECT_NE(rep.text.find("none.json: No such file"), std::string::npos) << rep.text;
  EXPECT_EQ(rep.text.find('\x1b'), std::string::npos);
  EXPECT_EQ(rep.json["errors"].size(), 5u);
}

}  // namespace
}  // namespace sentinel::collector
