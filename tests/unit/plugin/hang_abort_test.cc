// SENTINEL_ON_HANG on the plugin side (plugin/entry/hang_abort.h): the mode, the message, and
// the handle registry: a verdict aborts exactly the paired communicator, once, on a thread of
// our own; the application's own teardown of that handle is then answered without NCCL.
#include "plugin/entry/hang_abort.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace sentinel::plugin {
namespace {

SentinelWireHangVerdict Verdict(uint64_t hash, int rank) {
  SentinelWireHangVerdict v{};
  v.comm_hash = hash;
  v.rank = rank;
  v.ordinal = 4;
  v.seq = 3;
  v.func = kSentinelFuncAllReduce;
  v.waiting_ns = 2100000000;
  v.hang_timeout_ns = 2000000000;
  std::snprintf(v.culprits, sizeof(v.culprits), "rank 2 never_launched on host a pid 42");
  std::snprintf(v.exclude, sizeof(v.exclude), "host-b (straggler)");
  return v;
}

std::atomic<int> g_aborts{0};
std::atomic<void*> g_aborted{nullptr};
std::atomic<std::thread::id> g_abort_thread{};
int FakeAbort(void* comm) {
  g_aborted.store(comm);
  g_abort_thread.store(std::this_thread::get_id());
  g_aborts.fetch_add(1);
  return 0;
}

TEST(HangAbort, ParsesTheMode) {
  bool bad = true;
  EXPECT_EQ(ParseOnHang(nullptr, &bad), OnHangMode::kOff);
  EXPECT_FALSE(bad);
  EXPECT_EQ(ParseOnHang("off", &bad), OnHangMode::kOff);
  EXPECT_EQ(ParseOnHang("report", &bad), OnHangMode::kOff);
  EXPECT_EQ(ParseOnHang("abort", &bad), OnHangMode::kAbort);
  EXPECT_FALSE(bad);
  EXPECT_EQ(ParseOnHang("kill", &bad), OnHangMode::kOff);
  EXPECT_TRUE(bad);
}

TEST(HangAbort, MessageNamesCollectiveCulpritAndExclusions) {
  char line[1400];
  SentinelWireHangVerdict v = Verdict(0xabc, 3);
  FormatHangAbortMessage(v, true, line, sizeof(line));
  EXPECT_STREQ(line,
               "SENTINEL_ON_HANG=abort: aborting communicator 0x0000000000000abc rank 3: "
               "sentineld confirmed a hang in AllReduce (collective #4, NCCL seq 3), stuck 2.1 s "
               "(--hang-timeout 2.0 s); culprit: rank 2 never_launched on host a pid 42; "
               "exclude on restart: host-b (straggler)");
  // Unterminated strings from the wire stay bounded.
  std::memset(v.culprits, 'x', sizeof(v.culprits));
  std::memset(v.exclude, 'y', sizeof(v.exclude));
  FormatHangAbortMessage(v, false, line, sizeof(line));
  EXPECT_EQ(std::string(line).rfind("hang reported on", 0), 0u);
  EXPECT_LT(std::strlen(line), sizeof(line));
}

// Only this test sets SENTINEL_ON_HANG (the mode is read once per process).
TEST(HangAbort, AbortsThePairedCommunicatorOnceFromItsOwnThread) {
  ASSERT_EQ(setenv("SENTINEL_ON_HANG", "abort", 1), 0);
  int comm_a = 0;
  int comm_b = 0;
  // Two creations on this thread, each paired with the profiler init NCCL ran during it.
  HangAbortBeginCreate();
  HangAbortNoteProfilerInit(0xabc, 3);
  HangAbortEndCreate(&comm_a);
  HangAbortBeginCreate();
  HangAbortNoteProfilerInit(0xdef, 1);
  HangAbortEndCreate(&comm_b);
  // A creation whose init ran elsewhere pairs nothing.
  int comm_c = 0;
  HangAbortBeginCreate();
  HangAbortEndCreate(&comm_c);

  // Without the interposer's abort function (no LD_PRELOAD): passive.
  OnHangVerdict(Verdict(0xabc, 3));
  EXPECT_FALSE(HangAbortIsAborted(&comm_a));
  EXPECT_EQ(g_aborts.load(), 0);

  HangAbortSetAbortFn(&FakeAbort);
  OnHangVerdict(Verdict(0x999, 0));  // not ours
  OnHangVerdict(Verdict(0xabc, 2));  // our comm, another rank
  ASSERT_TRUE(HangAbortWaitIdle(5000));
  EXPECT_EQ(g_aborts.load(), 0);

  OnHangVerdict(Verdict(0xabc, 3));
  OnHangVerdict(Verdict(0xabc, 3));  // a repeat: aborted once
  ASSERT_TRUE(HangAbortWaitIdle(5000));
  EXPECT_EQ(g_aborts.load(), 1);
  EXPECT_EQ(g_aborted.load(), &comm_a);
  EXPECT_NE(g_abort_thread.load(), std::this_thread::get_id());
  EXPECT_TRUE(HangAbortIsAborted(&comm_a));
  EXPECT_FALSE(HangAbortIsAborted(&comm_b));
  EXPECT_FALSE(HangAbortIsAborted(&comm_c));
  // The application's own destroy: answered for the aborted handle, forwarded for the other.
  EXPECT_TRUE(HangAbortHostTeardown(&comm_a));
  EXPECT_TRUE(HangAbortHostTeardown(&comm_a));
  EXPECT_FALSE(HangAbortHostTeardown(&comm_b));
  OnHangVerdict(Verdict(0xdef, 1));  // comm_b was destroyed by the host: nothing to abort
  ASSERT_TRUE(HangAbortWaitIdle(5000));
  EXPECT_EQ(g_aborts.load(), 1);
  HangAbortSetAbortFn(nullptr);
  unsetenv("SENTINEL_ON_HANG");
}

}  // namespace
}  // namespace sentinel::plugin
