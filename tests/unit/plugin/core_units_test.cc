// Unit tests of the units the profiler core (profiler_*.cc) is built from: the slot pools, the
// reference counts, the context table, function recovery, record building and the overhead budget.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "plugin/base/clock.h"
#include "plugin/base/tick_clock.h"
#include "plugin/core/context_table.h"
#include "plugin/core/event_model.h"
#include "plugin/core/func_recovery.h"
#include "plugin/core/overhead_budget.h"
#include "plugin/core/record_builder.h"
#include "plugin/core/slot_pool.h"
#include "plugin/core/slot_refs.h"
#include "plugin/core/thread_state.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {
namespace {

std::unique_ptr<Slot> NewSlot(Kind k) {
  std::unique_ptr<Slot> s(new Slot());  // value-initialized: zero
  s->tag.store(TagFor(k));
  s->state.store(SlotState::kLive);
  return s;
}

TEST(SlotArena, ClaimsEverySlotOnceThenDropsAndCounts) {
  static SlotArena arena;  // never unmapped, like the plugin's
  ASSERT_TRUE(arena.Map(16).ok());
  ASSERT_EQ(arena.pool(Kind::kColl).size, 16u);
  static ThreadState ts;
  std::set<Slot*> seen;
  for (int i = 0; i < 16; ++i) {
    Slot* s = arena.Claim(Kind::kColl, &ts);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(KindOf(s), Kind::kColl);
    EXPECT_TRUE(seen.insert(s).second);
  }
  EXPECT_EQ(arena.Claim(Kind::kColl, &ts), nullptr);
  EXPECT_EQ(ts.counters[kCtrEventsDroppedPool].load(), 1u);
  // FIFO: the failed claim's 4 probes moved the cursor past slots 0-3, so the next claim looks
  // at slots 4-7 first: a freed slot 4 is found, a freed slot 0 only after a wrap.
  Slot* first = arena.pool(Kind::kColl).begin;
  Slot* fifth = first + 4;
  first->state.store(SlotState::kFree);
  fifth->state.store(SlotState::kFree);
  EXPECT_EQ(arena.Claim(Kind::kColl, &ts), fifth);

  EXPECT_EQ(arena.AsSlot(first), first);
  EXPECT_EQ(arena.AsSlotOfKind(first, Kind::kColl), first);
  EXPECT_EQ(arena.AsSlotOfKind(first, Kind::kP2p), nullptr);
  EXPECT_EQ(arena.AsSlot(reinterpret_cast<char*>(first) + 8), nullptr);  // misaligned
  auto outside = NewSlot(Kind::kColl);  // a valid tag, outside the arena
  EXPECT_EQ(arena.AsSlot(outside.get()), nullptr);
  Slot* never_claimed = arena.pool(Kind::kCeBatch).begin;  // tag still 0
  EXPECT_EQ(arena.AsSlot(never_claimed), nullptr);
}

TEST(SlotRefs, StopOfASoleReferenceFinishesOnceAndASecondStopIsStale) {
  auto s = NewSlot(Kind::kColl);
  s->refs.store(1);
  EXPECT_EQ(MarkStopped(s.get()), RefDrop::kLast);
  EXPECT_EQ(MarkStopped(s.get()), RefDrop::kStale);
  EXPECT_FALSE(TryRef(s.get()));
  EXPECT_EQ(DropRef(s.get()), RefDrop::kStale);
}

TEST(SlotRefs, ChildKeepsTheParentAliveAndTheLastDropEmits) {
  auto s = NewSlot(Kind::kColl);
  s->refs.store(1);
  ASSERT_TRUE(TryRef(s.get()));
  EXPECT_EQ(MarkStopped(s.get()), RefDrop::kHeld);
  EXPECT_EQ(DropRef(s.get()), RefDrop::kHeld);  // the stop's own reference
  EXPECT_EQ(DropRef(s.get()), RefDrop::kLast);  // the child's
  EXPECT_NE(s->refs.load() & kDoneBit, 0u);
  EXPECT_NE(s->refs.load() & kStoppedBit, 0u);
}

TEST(SlotRefs, TruncationClaimsTheRecordSoTheLastReferenceDoesNotEmitIt) {
  auto s = NewSlot(Kind::kColl);
  s->refs.store(2);
  EXPECT_TRUE(ClaimForTruncation(s.get()));
  EXPECT_FALSE(ClaimForTruncation(s.get()));  // once
  EXPECT_EQ(DropRef(s.get()), RefDrop::kHeld);
  EXPECT_EQ(DropRef(s.get()), RefDrop::kLastEmitted);
  auto done = NewSlot(Kind::kColl);
  done->refs.store(0 | kDoneBit);
  EXPECT_FALSE(ClaimForTruncation(done.get()));
}

// A table the machine cannot map (about 4 billion contexts) fails with the plugin's Status: what
// was being mapped, how much, and the errno, for the one log line that turns the plugin off.
TEST(ContextTable, AMappingThatFailsSaysWhatAndWhy) {
  ContextTable table;
  const Status s = table.Map(UINT32_MAX);
  if (s.ok()) GTEST_SKIP() << "this machine mapped " << UINT32_MAX << " contexts (overcommit)";
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(std::strstr(s.message(), "communicator contexts"), nullptr) << s.message();
  EXPECT_NE(std::strstr(s.message(), "4294967295"), nullptr) << s.message();
  EXPECT_EQ(s.error_number(), ENOMEM);
}

TEST(ContextTable, ClaimPublishFinalizeAndReuseAfterAWrap) {
  static ContextTable table;
  ASSERT_TRUE(table.Map(2).ok());
  Context* a = table.Claim();
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->state.load(), ContextState::kClaiming);
  EXPECT_EQ(table.AsContext(a), nullptr);  // not yet published
  a->rank = 3;
  ContextTable::Publish(a);
  EXPECT_EQ(table.AsContext(a), a);
  EXPECT_EQ(table.AsContext(reinterpret_cast<char*>(a) + 8), nullptr);
  Context* b = table.Claim();
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  ContextTable::Publish(b);
  EXPECT_EQ(table.Claim(), nullptr);  // both live
  int live = 0;
  table.ForEachLive([&](Context*) { ++live; });
  EXPECT_EQ(live, 2);
  EXPECT_TRUE(ContextTable::MarkFinalized(a));
  EXPECT_FALSE(ContextTable::MarkFinalized(a));
  EXPECT_EQ(table.AsContext(a), nullptr);
  EXPECT_EQ(table.Claim(), a);  // the finalized one, after the wrap
}

TEST(RecordBuilder, CalibratedGpuTimesProxySumsAndFlags) {
  std::unique_ptr<Context> ctx(new Context());
  ctx->comm_hash = 0xC0;
  ctx->rank = 1;
  ctx->nranks = 4;
  ctx->calib.Reset();
  ctx->calib.Observe(1000, 600);  // offset 400
  auto s = NewSlot(Kind::kColl);
  s->ctx.store(ctx.get());
  s->seq = 7;
  s->bytes = 4096;
  s->start_ns.store(900);
  s->func.store(kSentinelFuncAllReduce);
  s->flags = kSentinelCollApiTimeValid;
  s->gpu_start_raw.store(700);
  s->gpu_end_raw.store(800);
  s->proxy_steps.store(1);
  s->send_bytes.store(10);
  s->send_wait_ticks.store(300);
  s->send_xfer_ticks.store(5000);
  s->recv_wait_ticks.store(70);
  s->recv_xfer_ticks.store(9000);
  TickClock ns_ticks;  // no TSC: ticks are nanoseconds
  ns_ticks.Start(false);
  SentinelWireCollRecord r;
  BuildCollRecord(*s, false, 42, ns_ticks, &r);
  EXPECT_EQ(r.comm_hash, 0xC0u);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.nranks, 4);
  EXPECT_EQ(r.seq, 7u);
  EXPECT_EQ(r.enqueue_ns, 900);
  EXPECT_EQ(r.gpu_start_ns, 1100);
  EXPECT_EQ(r.gpu_end_ns, 1200);
  EXPECT_EQ(r.proxy_send_bytes, 10u);
  EXPECT_EQ(r.proxy_send_wait_ns, 300);
  EXPECT_EQ(r.proxy_send_xfer_ns, 5000);
  EXPECT_EQ(r.proxy_recv_wait_ns, 70);
  EXPECT_EQ(r.proxy_recv_xfer_ns, 9000);
  EXPECT_EQ(r.pid, 42u);
  EXPECT_EQ(r.flags,
            kSentinelCollApiTimeValid | kSentinelCollGpuTimeValid | kSentinelCollProxyValid);

  // No KernelCh timer: no GPU time (zeros, flag clear); truncated marked.
  s->gpu_start_raw.store(kNoGpuStart);
  s->proxy_steps.store(0);
  BuildCollRecord(*s, true, 42, ns_ticks, &r);
  EXPECT_EQ(r.gpu_start_ns, 0);
  EXPECT_EQ(r.proxy_send_bytes, 0u);
  EXPECT_EQ(r.flags, kSentinelCollApiTimeValid | kSentinelCollTruncated);

  // CeColl: host-timed from start to stop.
  auto ce = NewSlot(Kind::kCeColl);
  ce->ctx.store(ctx.get());
  ce->start_ns.store(50);
  ce->stop_ns.store(80);
  BuildCollRecord(*ce, false, 42, ns_ticks, &r);
  EXPECT_EQ(r.gpu_start_ns, 50);
  EXPECT_EQ(r.gpu_end_ns, 80);
  EXPECT_EQ(r.flags, kSentinelCollGpuTimeValid);
}

// The proxy sums are ticks of the clock they were taken with: the record converts them at the
// clock's rate, which is measured, never assumed.
TEST(RecordBuilder, ProxySumsAreConvertedAtTheIntervalClocksRate) {
  if (!TscIsInvariant()) GTEST_SKIP() << "no invariant TSC: ticks are nanoseconds (tested above)";
  TickClock tsc;
  tsc.Start(true);
  tsc.RefineAfter(2000000);
  ASSERT_TRUE(tsc.UsesTsc());
  const double rate = tsc.NsPerTick();
  auto s = NewSlot(Kind::kColl);
  s->proxy_steps.store(1);
  s->send_wait_ticks.store(1000000);
  s->recv_xfer_ticks.store(3000000);
  SentinelWireCollRecord r;
  BuildCollRecord(*s, false, 42, tsc, &r);
  EXPECT_EQ(r.proxy_send_wait_ns, static_cast<int64_t>(1000000 * rate));
  EXPECT_EQ(r.proxy_recv_xfer_ns, static_cast<int64_t>(3000000 * rate));
  EXPECT_NE(r.proxy_send_wait_ns, 1000000) << "converted, not passed through";
}

// The TSC serves intervals only where the kernel keeps time with it; anything else in the
// clocksource file (another clock, a prefix of one, no file) answers no.
TEST(TickClock, TheTscServesOnlyWhereTheKernelsClocksourceIsIt) {
  const std::string path = ::testing::TempDir() + "/current_clocksource";
  auto with = [&](const char* text) {
    std::ofstream(path, std::ios::trunc) << text;
    return KernelClocksourceIsTsc(path.c_str());
  };
  EXPECT_TRUE(with("tsc\n"));
  EXPECT_TRUE(with("tsc"));
  EXPECT_FALSE(with("kvm-clock\n"));
  EXPECT_FALSE(with("hpet\n"));
  EXPECT_FALSE(with("tsc-early\n"));
  EXPECT_FALSE(with("ts\n"));
  EXPECT_FALSE(with(""));
  std::remove(path.c_str());
  EXPECT_FALSE(KernelClocksourceIsTsc(path.c_str()));
}

// A TickClock's interval, converted, lies inside a CLOCK_MONOTONIC bracket of the same interval
// and covers the sleep it timed: a bound that holds on a loaded machine (a sleep is never
// shorter than asked, and the outer bracket contains the inner reads whatever the scheduler does).
TEST(TickClock, AConvertedIntervalLiesInsideTheMonotonicBracketOfIt) {
  for (bool use_tsc : {false, true}) {
    SCOPED_TRACE(use_tsc ? "TSC" : "CLOCK_MONOTONIC");
    TickClock c;
    c.Start(use_tsc && TscServesIntervals());
    c.RefineAfter(1000000);
    const int64_t outer0 = MonoNs();
    const uint64_t t0 = c.Now();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const uint64_t t1 = c.Now();
    const int64_t outer = MonoNs() - outer0;
    const int64_t inner = c.ToNs(static_cast<int64_t>(t1 - t0));
    EXPECT_GE(inner, int64_t{20000000} * 999 / 1000);
    // The rate's error after a 1 ms calibration is below 1e-3 even on a loaded machine (a pair's
    // read is bracketed by the tightest of four tries).
    EXPECT_LE(inner, outer + outer / 1000);
    c.Refine();  // a longer span: the rate moves by less than its first error
    EXPECT_NEAR(c.NsPerTick(), static_cast<double>(inner) / static_cast<double>(t1 - t0),
                c.NsPerTick() * 2e-3);
  }
}

struct Group {
  std::unique_ptr<Context> ctx{new Context()};
  std::unique_ptr<Slot> grp = NewSlot(Kind::kGroupApi);
  std::vector<std::unique_ptr<Slot>> pieces;
  Slot* Piece(uint8_t func, uint64_t count, uint8_t datatype, uint8_t api = kSentinelFuncUnknown) {
    pieces.push_back(NewSlot(Kind::kP2pApi));
    Slot* p = pieces.back().get();
    p->func.store(func);
    p->datatype.store(datatype);
    p->parent.store(grp.get());
    p->api_override.store(kSentinelFuncUnknown);
    NoteP2pApiPiece(grp.get(), p, ctx.get(), count, api);
    return p;
  }
  Group() {
    ctx->nranks = 2;
    ResetGroupRecovery(grp.get());
  }
};

TEST(FuncRecovery, OneSendAndRecvPerRankOfOneShapeIsAnAlltoAll) {
  Group g;
  g.Piece(kSentinelFuncSend, 8, 7);
  g.Piece(kSentinelFuncRecv, 8, 7);
  g.Piece(kSentinelFuncSend, 8, 7);
  Slot* last = g.Piece(kSentinelFuncRecv, 8, 7);
  uint8_t func = 0;
  uint64_t seq = 99;
  ASSERT_TRUE(RecoveredFunc(last, &func, &seq));
  EXPECT_EQ(func, kSentinelFuncAlltoAll);
  EXPECT_EQ(seq, 0u);  // the communicator's first recovered AlltoAll

  Group uneven;
  uneven.Piece(kSentinelFuncSend, 8, 7);
  uneven.Piece(kSentinelFuncRecv, 8, 7);
  uneven.Piece(kSentinelFuncSend, 16, 7);
  Slot* p = uneven.Piece(kSentinelFuncRecv, 8, 7);
  EXPECT_FALSE(RecoveredFunc(p, &func, &seq));

  Group with_coll;
  NoteCollApiPiece(with_coll.grp.get());
  with_coll.Piece(kSentinelFuncSend, 8, 7);
  with_coll.Piece(kSentinelFuncRecv, 8, 7);
  with_coll.Piece(kSentinelFuncSend, 8, 7);
  p = with_coll.Piece(kSentinelFuncRecv, 8, 7);
  EXPECT_FALSE(RecoveredFunc(p, &func, &seq));
}

TEST(FuncRecovery, TheInterposersApiWins) {
  Group g;
  Slot* p = g.Piece(kSentinelFuncSend, 8, 7, kSentinelFuncGather);
  uint8_t func = 0;
  uint64_t seq = 0;
  ASSERT_TRUE(RecoveredFunc(p, &func, &seq));
  EXPECT_EQ(func, kSentinelFuncGather);
}

// One step down per kBudgetConfirmWindows (3) consecutive windows over budget, down to the last.
TEST(OverheadBudget, StepsDownAfterThreeWindowsOverBudgetAndStopsAtTheLast) {
  OverheadBudget b(1.0, 100);  // 1 % of a 100 ns window
  EXPECT_FALSE(b.Observe(0, 0));
  EXPECT_LT(b.last_ratio(), 0);
  EXPECT_FALSE(b.Observe(50, 50));  // window not over yet
  EXPECT_FALSE(b.Observe(100, 2));  // 2 ns in 100: 2 %, the first window over
  EXPECT_DOUBLE_EQ(b.last_ratio(), 0.02);
  EXPECT_FALSE(b.Observe(200, 4));
  EXPECT_TRUE(b.Observe(300, 6));  // the third in a row
  EXPECT_EQ(b.level(), BudgetLevel::kNoProxy);
  int64_t t = 300;
  uint64_t ns = 6;
  for (BudgetLevel next : {BudgetLevel::kKernelChSampled, BudgetLevel::kRecordsSampled}) {
    for (int w = 1; w <= kBudgetConfirmWindows; ++w) {
      t += 100;
      ns += 10;
      EXPECT_EQ(b.Observe(t, ns), w == kBudgetConfirmWindows) << w;
    }
    EXPECT_EQ(b.level(), next);
  }
  for (int w = 0; w < 2 * kBudgetConfirmWindows; ++w) {
    t += 100;
    ns += 90;
    EXPECT_FALSE(b.Observe(t, ns));  // nothing below the last step
  }
  EXPECT_EQ(b.level(), BudgetLevel::kRecordsSampled);
}

// One window over budget between windows under it (a single noisy timed callback counts 256
// times) never steps down, however often it recurs.
TEST(OverheadBudget, IsolatedWindowsOverBudgetNeverStepDown) {
  OverheadBudget b(1.0, 100);
  b.Observe(0, 0);
  int64_t t = 0;
  uint64_t ns = 0;
  for (int w = 0; w < 300; ++w) {
    t += 100;
    ns += (w % 3 == 0) ? 50 : 0;  // 50 % in one window of three, 0 in the others
    EXPECT_FALSE(b.Observe(t, ns)) << w;
  }
  EXPECT_EQ(b.level(), BudgetLevel::kFull);
}

// Levels 2 and 3 keep 8 consecutive collectives out of every 64 (ordinals 64k .. 64k+7): the same
// 1 in 8, but 7 of every 8 kept ones have their predecessor kept too, so a compute segment (the
// end of one collective to the start of the next) is still measured between neighbours. Every
// 8th alone (the old choice) leaves no consecutive pair at all.
TEST(OverheadBudget, SamplesInBurstsOfConsecutiveOrdinals) {
  uint64_t kept = 0;
  uint64_t pairs = 0;
  const uint64_t n = 64 * 1000;
  for (uint64_t o = 1; o < n; ++o) {
    const bool in = InBudgetBurst(o);
    EXPECT_EQ(in, o % 64 < 8) << o;
    kept += in ? 1 : 0;
    pairs += in && InBudgetBurst(o - 1) && o - 1 != 0 ? 1 : 0;
  }
  EXPECT_EQ(kept, n / kBudgetSampleEvery - 1);  // ordinal 0 is not a collective's
  EXPECT_EQ(pairs, 7 * (n / 64) - 1);
  EXPECT_TRUE(InBudgetBurst(0));  // p2p (ordinal 0) is never sampled out
}

TEST(OverheadBudget, ZeroBudgetNeverDegrades) {
  OverheadBudget b(0.0, 100);
  b.Observe(0, 0);
  EXPECT_FALSE(b.Observe(100, 100));
  EXPECT_EQ(b.level(), BudgetLevel::kFull);
  EXPECT_DOUBLE_EQ(b.last_ratio(), 1.0);
}

}  // namespace
}  // namespace sentinel::plugin
