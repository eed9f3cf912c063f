// /proc/<pid> readers on fake trees: parsing, bounds, missing and hostile files, a gone process.
#include "collector/evidence/proc_sample.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "tests/unit/collector/evidence/fake_host_tree.h"

namespace sentinel::collector {
namespace {

using testing::FakeHostTree;

// Process 100 (started at tick 9000, 42 major faults) with threads 100 and 101.
void WriteTwoThreadProcess(const FakeHostTree& tree) {
  tree.WriteStat(100, "python3", 'S', 42, 9000);
  tree.WriteTask(100, 100, 1'000'000, 500, 10, 3);
  tree.WriteTask(100, 101, 2'000'000, 700, 20, 4);
}

TEST(ProcSampleTest, ReadsStatAndSumsThreads) {
  FakeHostTree tree;
  WriteTwoThreadProcess(tree);
  const ProcSample s = ReadProcSample(tree.roots(), 100);
  EXPECT_FALSE(s.gone);
  ASSERT_TRUE(s.has_stat) << s.stat_why;
  EXPECT_EQ(s.state, 'S');
  EXPECT_EQ(s.major_faults, 42u);
  EXPECT_EQ(s.starttime_ticks, 9000u);
  EXPECT_EQ(s.threads, 2u);
  ASSERT_EQ(s.tasks.size(), 2u);
  EXPECT_EQ(s.tasks[0].tid, 100u);
  EXPECT_EQ(s.tasks[1].cpu_ns, 2'000'000u);
  EXPECT_EQ(s.tasks[1].wait_ns, 700u);
  EXPECT_EQ(s.tasks[1].voluntary_switches, 20u);
  EXPECT_EQ(s.tasks[1].involuntary_switches, 4u);
  EXPECT_TRUE(s.tasks_why.empty());
  EXPECT_TRUE(s.ctxt_why.empty());
}

// A thread that has not run since the last read (the same CPU time and timeslices) keeps its
// switch counts without its status being read: here its status is made unreadable garbage, and the
// counts still come through. A thread that ran is read again.
TEST(ProcSampleTest, AThreadThatHasNotRunKeepsItsSwitchCountsUnread) {
  FakeHostTree tree;
  WriteTwoThreadProcess(tree);
  const ProcSample first = ReadProcSample(tree.roots(), 100);
  ASSERT_EQ(first.tasks.size(), 2u);
  EXPECT_EQ(first.ctxt_kept, 0u);
  // Thread 100 sleeps on: its status is garbage now (were it read, it would have no counts).
  tree.Write(tree.Proc("100/task/100/status"), "Name:\tx\n");
  // Thread 101 ran: more CPU time and switches.
  tree.WriteTask(100, 101, 2'500'000, 700, 25, 4);
  const ProcSample second = ReadProcSample(tree.roots(), 100, &first);
  ASSERT_EQ(second.tasks.size(), 2u);
  EXPECT_EQ(second.ctxt_kept, 1u);
  EXPECT_TRUE(second.tasks[0].has_ctxt);
  EXPECT_EQ(second.tasks[0].voluntary_switches, 10u);
  EXPECT_EQ(second.tasks[0].involuntary_switches, 3u);
  EXPECT_EQ(second.tasks[1].voluntary_switches, 25u);
  EXPECT_EQ(second.tasks[1].cpu_ns, 2'500'000u);
  // Without the previous sample the garbage is read: no counts for thread 100.
  const ProcSample fresh = ReadProcSample(tree.roots(), 100);
  EXPECT_FALSE(fresh.tasks[0].has_ctxt);
  EXPECT_EQ(fresh.ctxt_kept, 0u);
}

// Only the same CPU time and the same timeslices keep the counts: a thread on a CPU at the last
// read that then blocked has run longer (the same timeslices, more CPU time); another process under
// the same pid (another start time) is read whole.
TEST(ProcSampleTest, MoreCpuTimeOrAnotherProcessIsReadAgain) {
  FakeHostTree tree;
  tree.WriteStat(100, "python3", 'R', 1, 9000);
  tree.WriteTask(100, 100, 1'000'000, 500, 10, 3);
  const ProcSample first = ReadProcSample(tree.roots(), 100);
  // It blocked after the read: one voluntary switch, no new timeslice, more CPU time.
  const std::string dir = tree.Proc("100/task/100");
  tree.Write(dir + "/schedstat", "1000800 500 14\n");
  tree.Write(dir + "/status", "voluntary_ctxt_switches:\t11\nnonvoluntary_ctxt_switches:\t3\n");
  const ProcSample second = ReadProcSample(tree.roots(), 100, &first);
  EXPECT_EQ(second.ctxt_kept, 0u);
  EXPECT_EQ(second.tasks[0].voluntary_switches, 11u);
  // The pid reused by a process started later, with the same thread counters by chance.
  tree.WriteStat(100, "python3", 'R', 1, 9500);
  tree.Write(dir + "/status", "voluntary_ctxt_switches:\t1\nnonvoluntary_ctxt_switches:\t0\n");
  const ProcSample reused = ReadProcSample(tree.roots(), 100, &second);
  EXPECT_EQ(reused.ctxt_kept, 0u);
  EXPECT_EQ(reused.tasks[0].voluntary_switches, 1u);
}

TEST(ProcSampleTest, CommWithParenthesesAndSpaces) {
  char state = 0;
  uint64_t majflt = 0;
  uint64_t start = 0;
  const std::string fields = " 1 2 3 4 5 6 7 8 77 0 1 2 3 4 5 6 7 8 12345 99 100\n";
  ASSERT_TRUE(ParseProcStat("7 (a) S 1 2 (b)) R" + fields, &state, &majflt, &start));
  EXPECT_EQ(state, 'R');
  EXPECT_EQ(majflt, 77u);
  EXPECT_EQ(start, 12345u);
  // The same through a file: comm ") S 9 9 9" must not shift the fields.
  FakeHostTree tree;
  tree.WriteStat(5, ") S 9 9 9 (x", 'D', 3, 777);
  tree.WriteTask(5, 5, 1, 2, 3, 4);
  const ProcSample s = ReadProcSample(tree.roots(), 5);
  ASSERT_TRUE(s.has_stat) << s.stat_why;
  EXPECT_EQ(s.state, 'D');
  EXPECT_EQ(s.major_faults, 3u);
  EXPECT_EQ(s.starttime_ticks, 777u);
}

TEST(ProcSampleTest, GarbageIsRefusedNotZero) {
  char state = 0;
  uint64_t a = 0;
  uint64_t b = 0;
  EXPECT_FALSE(ParseProcStat("", &state, &a, &b));
  EXPECT_FALSE(ParseProcStat("1 (x S 1 2", &state, &a, &b));
  EXPECT_FALSE(ParseProcStat("1 (x) S 1 2 3", &state, &a, &b));  // too few fields
  EXPECT_FALSE(
      ParseProcStat("1 (x) S 1 2 3 4 5 6 7 8 -9 0 1 2 3 4 5 6 7 8 12 9\n", &state, &a, &b));
  EXPECT_FALSE(ParseSchedstat("12 abc 3", &a, &b));
  EXPECT_FALSE(ParseSchedstat("12 3", &a, &b));
  EXPECT_FALSE(ParseSchedstat("99999999999999999999999 1 1", &a, &b));  // overflow
  EXPECT_FALSE(ParseSchedstat("-1 2 3", &a, &b));
  EXPECT_FALSE(ParseStatusSwitches("voluntary_ctxt_switches:\t12\n", &a, &b));
  EXPECT_FALSE(ParseStatusSwitches("voluntary_ctxt_switches:\t1x\nnonvoluntary_ctxt_switches:\t2\n",
                                   &a, &b));
  // A key that only begins like ours is not ours.
  EXPECT_FALSE(ParseStatusSwitches(
      "voluntary_ctxt_switches_x:\t1\nnonvoluntary_ctxt_switches:\t2\n", &a, &b));
  uint64_t v = 0;
  EXPECT_FALSE(ParseU64("18446744073709551616", &v));
  ASSERT_TRUE(ParseU64(" 18446744073709551615\n", &v));
  EXPECT_EQ(v, UINT64_MAX);
}

TEST(ProcSampleTest, GarbageFilesGiveReasons) {
  FakeHostTree tree;
  FakeHostTree::Write(tree.Proc("9/stat"), "9 (x) S garbage\n");
  FakeHostTree::Write(tree.Proc("9/task/9/schedstat"), "lots of words\n");
  FakeHostTree::Write(tree.Proc("9/task/9/status"), "Name:\tx\n");
  const ProcSample s = ReadProcSample(tree.roots(), 9);
  EXPECT_FALSE(s.gone);
  EXPECT_FALSE(s.has_stat);
  EXPECT_NE(s.stat_why.find("stat: unparsable"), std::string::npos) << s.stat_why;
  ASSERT_EQ(s.tasks.size(), 1u);
  EXPECT_FALSE(s.tasks[0].has_sched);
  EXPECT_NE(s.tasks_why.find("schedstat: unparsable"), std::string::npos) << s.tasks_why;
  EXPECT_NE(s.ctxt_why.find("ctxt_switches"), std::string::npos) << s.ctxt_why;
}

TEST(ProcSampleTest, HugeLinesAreReadBoundedAndRefused) {
  FakeHostTree tree;
  tree.WriteStat(11, "x", 'R', 1, 2);
  // A schedstat of 1 MiB of digits: the bounded read sees 4 KiB of them, a number far too long.
  FakeHostTree::Write(tree.Proc("11/task/11/schedstat"), std::string(1 << 20, '7'));
  // A status whose switch lines sit past the 16 KiB bound, behind a huge Groups: line.
  FakeHostTree::Write(tree.Proc("11/task/11/status"),
                      "Groups:\t" + std::string(64 << 10, '1') +
                          "\nvoluntary_ctxt_switches:\t1\nnonvoluntary_ctxt_switches:\t2\n");
  std::string text;
  ASSERT_EQ(ReadBoundedFile(tree.Proc("11/task/11/schedstat"), kProcFileLimit, &text), 0);
  EXPECT_EQ(text.size(), kProcFileLimit);
  const ProcSample s = ReadProcSample(tree.roots(), 11);
  ASSERT_EQ(s.tasks.size(), 1u);
  EXPECT_FALSE(s.tasks[0].has_sched);
  EXPECT_FALSE(s.tasks[0].has_ctxt);
  EXPECT_FALSE(s.tasks_why.empty());
  EXPECT_FALSE(s.ctxt_why.empty());
}

TEST(ProcSampleTest, MissingFileAndDirectoryInPlaceOfFile) {
  FakeHostTree tree;
  tree.WriteStat(12, "x", 'S', 0, 5);
  // Thread 12: no schedstat at all; thread 13: a directory where the file should be.
  FakeHostTree::Write(tree.Proc("12/task/12/status"),
                      "voluntary_ctxt_switches:\t1\nnonvoluntary_ctxt_switches:\t2\n");
  FakeHostTree::MakeDirs(tree.Proc("12/task/13/schedstat"));
  FakeHostTree::MakeDirs(tree.Proc("12/task/13/status"));
  const ProcSample s = ReadProcSample(tree.roots(), 12);
  ASSERT_EQ(s.tasks.size(), 2u);
  EXPECT_FALSE(s.tasks[0].has_sched);
  EXPECT_TRUE(s.tasks[0].has_ctxt);
  EXPECT_FALSE(s.tasks[1].has_sched);
  EXPECT_FALSE(s.tasks[1].has_ctxt);
  EXPECT_NE(s.tasks_why.find("schedstat: no such file (kernel without CONFIG_SCHED_INFO)"),
            std::string::npos)
      << s.tasks_why;
  EXPECT_TRUE(s.ctxt_why.empty()) << s.ctxt_why;  // one thread's switches were read

  std::string text;
  EXPECT_EQ(ReadBoundedFile(tree.Proc("12/task/13/status"), 64, &text), EISDIR);
}

TEST(ProcSampleTest, FifoInPlaceOfAFileDoesNotBlockThePoll) {
  FakeHostTree tree;
  tree.WriteStat(16, "x", 'S', 0, 5);
  FakeHostTree::MakeDirs(tree.Proc("16/task/16"));
  ASSERT_EQ(mkfifo(tree.Proc("16/task/16/schedstat").c_str(), 0600), 0);
  ASSERT_EQ(mkfifo(tree.Proc("16/task/16/status").c_str(), 0600), 0);
  const ProcSample s = ReadProcSample(tree.roots(), 16);  // would hang in open() without a writer
  ASSERT_EQ(s.tasks.size(), 1u);
  EXPECT_FALSE(s.tasks[0].has_sched);
  EXPECT_FALSE(s.tasks[0].has_ctxt);
  EXPECT_NE(s.tasks_why.find("schedstat: unparsable"), std::string::npos) << s.tasks_why;
}

TEST(ProcSampleTest, StatThatIsADirectoryIsNotGone) {
  FakeHostTree tree;
  FakeHostTree::MakeDirs(tree.Proc("14/stat"));
  FakeHostTree::MakeDirs(tree.Proc("14/task"));
  const ProcSample s = ReadProcSample(tree.roots(), 14);
  EXPECT_FALSE(s.gone);
  EXPECT_FALSE(s.has_stat);
  EXPECT_NE(s.stat_why.find("Is a directory"), std::string::npos) << s.stat_why;
  EXPECT_NE(s.tasks_why.find("no thread left"), std::string::npos) << s.tasks_why;
}

TEST(ProcSampleTest, GoneIsItsOwnStateNotAZombie) {
  FakeHostTree tree;
  const ProcSample gone = ReadProcSample(tree.roots(), 4321);
  EXPECT_TRUE(gone.gone);
  EXPECT_NE(gone.gone_why.find("/4321: process gone"), std::string::npos) << gone.gone_why;
  EXPECT_FALSE(gone.has_stat);

  tree.WriteStat(77, "defunct", 'Z', 1, 10);
  tree.WriteTask(77, 77, 5, 6, 7, 8);
  const ProcSample zombie = ReadProcSample(tree.roots(), 77);
  EXPECT_FALSE(zombie.gone);
  EXPECT_EQ(zombie.state, 'Z');
}

TEST(ProcSampleTest, AtMostTheBoundOfTasksAreRead) {
  FakeHostTree tree;
  tree.WriteStat(15, "many", 'S', 0, 5);
  FakeHostTree::MakeDirs(tree.Proc("15/task"));
  for (uint32_t tid = 1; tid <= kMaxTasksPerProcess + 3; ++tid) {
    ASSERT_EQ(mkdir(tree.Proc(absl::StrCat("15/task/", tid)).c_str(), 0755), 0);
  }
  FakeHostTree::MakeDirs(tree.Proc("15/task/not-a-tid"));
  const ProcSample s = ReadProcSample(tree.roots(), 15);
  EXPECT_TRUE(s.tasks_truncated);
  EXPECT_EQ(s.tasks.size(), kMaxTasksPerProcess);
  EXPECT_EQ(s.threads, kMaxTasksPerProcess + 1);
}

TEST(ProcSampleTest, ReadsThisProcess) {
  const ProcSample s = ReadProcSample(EvidenceRoots{}, static_cast<uint32_t>(getpid()));
  ASSERT_FALSE(s.gone);
  ASSERT_TRUE(s.has_stat) << s.stat_why;
  EXPECT_EQ(s.state, 'R');
  ASSERT_GE(s.tasks.size(), 1u);
  EXPECT_TRUE(s.tasks_why.empty()) << s.tasks_why;
  EXPECT_GT(s.tasks[0].cpu_ns, 0u);
  // Its own /proc/<pid>/io: this test has read files, so rchar + wchar is above 0.
  ASSERT_TRUE(s.has_io) << s.io_why;
  EXPECT_GT(s.io_chars, 0u);
}

// /proc/<pid>/io: rchar + wchar, both required; anything else refused with a reason, never 0.
TEST(ProcSampleTest, IoCountersAreSummedAndGarbageRefused) {
  uint64_t chars = 7;
  ASSERT_TRUE(ParseProcIo("rchar: 100\nwchar: 23\nsyscr: 5\nsyscw: 2\nread_bytes: 0\n", &chars));
  EXPECT_EQ(chars, 123u);
  chars = 7;
  EXPECT_FALSE(ParseProcIo("rchar: 100\n", &chars));  // no wchar
  EXPECT_FALSE(ParseProcIo("rchar: x\nwchar: 1\n", &chars));
  EXPECT_FALSE(ParseProcIo("rchar: 18446744073709551615\nwchar: 1\n", &chars));  // overflow
  EXPECT_EQ(chars, 7u);

  FakeHostTree tree;
  tree.WriteStat(80, "python", 'S', 0, 1);
  FakeHostTree::Write(tree.Proc("80/io"), "garbage\n");
  const ProcSample bad = ReadProcSample(tree.roots(), 80);
  EXPECT_FALSE(bad.has_io);
  EXPECT_NE(bad.io_why.find("80/io: unparsable"), std::string::npos) << bad.io_why;
  tree.WriteStat(81, "python", 'S', 0, 1);  // no io file: another user's process, as unreadable
  const ProcSample none = ReadProcSample(tree.roots(), 81);
  EXPECT_FALSE(none.has_io);
  EXPECT_NE(none.io_why.find("81/io"), std::string::npos) << none.io_why;
}

}  // namespace
}  // namespace sentinel::collector
