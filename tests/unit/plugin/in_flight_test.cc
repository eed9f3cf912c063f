// The in-flight state of hang detection, linked directly: the lock-free per-communicator counters
// (single thread, ring overwrite, concurrent writers against a reader; ctest label tsan), the
// drainer's send policy (period, prompt stuck record, adaptive and fixed thresholds) and the
// JSON line of the dump.
#include "plugin/core/in_flight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "plugin/core/in_flight_monitor.h"
#include "plugin/transport/jsonl_sink.h"

namespace sentinel::plugin {
namespace {

constexpr int64_t kMs = 1'000'000;

// Zeroed like the plugin's mmap'ed contexts.
std::unique_ptr<InFlightCounters> NewCounters() {
  auto c = std::make_unique<InFlightCounters>();
  c->Reset();
  return c;
}

TEST(InFlightCounters, OrdinalsStagesAndOldest) {
  auto c = NewCounters();
  InFlightSnapshot s = c->Read();
  EXPECT_EQ(s.enqueued, 0u);
  EXPECT_FALSE(s.oldest_valid);
  InFlightSignature ar;
  ar.bytes = 16 << 20;
  ar.datatype = 9;  // bfloat16
  InFlightSignature bcast;
  bcast.bytes = 4 << 20;
  bcast.datatype = 7;  // float32
  bcast.root = 3;
  EXPECT_EQ(c->OnEnqueue(100, 0, kSentinelFuncAllReduce, ar), 1u);
  EXPECT_EQ(c->OnEnqueue(200, 0, kSentinelFuncBroadcast, bcast), 2u);
  EXPECT_EQ(c->OnEnqueue(300, 1, kSentinelFuncAllReduce, ar), 3u);
  c->OnGpuStart(1);
  c->OnGpuStart(1);  // a second channel of the same collective
  s = c->Read();
  EXPECT_EQ(s.enqueued, 3u);
  EXPECT_EQ(s.gpu_started, 1u);
  EXPECT_EQ(s.completed, 0u);
  ASSERT_TRUE(s.oldest_valid);
  EXPECT_EQ(s.oldest_since_ns, 100);
  EXPECT_EQ(s.oldest_func, kSentinelFuncAllReduce);
  EXPECT_EQ(s.oldest_sig.bytes, 16u << 20);
  EXPECT_EQ(s.oldest_sig.datatype, 9);
  EXPECT_EQ(s.oldest_sig.root, -1);
  c->OnComplete(1);
  s = c->Read();
  ASSERT_TRUE(s.oldest_valid);  // the broadcast: its own signature, root included
  EXPECT_EQ(s.oldest_func, kSentinelFuncBroadcast);
  EXPECT_EQ(s.oldest_sig.bytes, 4u << 20);
  EXPECT_EQ(s.oldest_sig.datatype, 7);
  EXPECT_EQ(s.oldest_sig.root, 3);
  c->OnComplete(2);  // its KernelCh start was lost: completion implies the kernel started
  s = c->Read();
  EXPECT_EQ(s.gpu_started, 2u);
  EXPECT_EQ(s.completed, 2u);
  ASSERT_TRUE(s.oldest_valid);
  EXPECT_EQ(s.oldest_since_ns, 300);
  EXPECT_EQ(s.oldest_seq, 1u);
  c->OnComplete(3);
  s = c->Read();
  EXPECT_EQ(s.completed, 3u);
  EXPECT_FALSE(s.oldest_valid);  // nothing in flight
  c->Reset();
  EXPECT_EQ(c->Read().enqueued, 0u);
}

TEST(InFlightCounters, OverwrittenRingEntryIsNeverMisread) {
  auto c = NewCounters();
  for (uint64_t i = 1; i <= kInFlightRing + 1; ++i) {
    c->OnEnqueue(static_cast<int64_t>(i), i, kSentinelFuncAllReduce, InFlightSignature{});
  }
  InFlightSnapshot s = c->Read();
  EXPECT_EQ(s.enqueued, kInFlightRing + 1);
  EXPECT_FALSE(s.oldest_valid);  // ordinal 1's entry now holds ordinal kInFlightRing + 1
  c->OnComplete(1);
  s = c->Read();
  ASSERT_TRUE(s.oldest_valid);
  EXPECT_EQ(s.oldest_since_ns, 2);
}

TEST(InFlightCounters, ConcurrentEnqueuersGetDistinctOrdinals) {
  auto c = NewCounters();
  constexpr int kThreads = 4;
  constexpr int kEach = 20000;
  std::vector<std::vector<uint64_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i)
        got[t].push_back(c->OnEnqueue(i + 1, 0, 0, InFlightSignature{}));
    });
  }
  for (auto& th : threads) th.join();
  std::set<uint64_t> all;
  for (const auto& v : got) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kEach));
  EXPECT_EQ(*all.begin(), 1u);
  EXPECT_EQ(*all.rbegin(), static_cast<uint64_t>(kThreads * kEach));
  EXPECT_EQ(c->Read().enqueued, static_cast<uint64_t>(kThreads * kEach));
}

// NCCL's shape: an enqueuing thread, the proxy progress thread starting each channel's kernel, a
// completing thread, each handed the work by the previous stage (release/acquire, as NCCL's own
// queues do), and the drainer reading at the same time. Every snapshot must be ordered, monotonic
// and, when it names the oldest collective, name exactly that one. One run; *named_out: the
// snapshots that named an oldest collective.
void RunStagesAgainstAReader(uint64_t* named_out) {
  auto c = NewCounters();
  constexpr uint64_t kTotal = 20000;
  constexpr uint64_t kMaxAhead = 64;  // a bounded queue, as NCCL's
  constexpr int kChannels = 3;
  std::atomic<uint64_t> enq_done{0};
  std::atomic<uint64_t> kernel_done{0};
  std::atomic<uint64_t> complete_done{0};
  std::atomic<bool> stop{false};
  auto since_of = [](uint64_t o) { return static_cast<int64_t>(o * 1000 + 7); };

  std::thread enqueuer([&] {
    for (uint64_t o = 1; o <= kTotal; ++o) {
      while (o > complete_done.load(std::memory_order_acquire) + kMaxAhead) {
        std::this_thread::yield();
      }
      InFlightSignature sig;
      sig.bytes = o * 5;
      sig.root = static_cast<int32_t>(o % 7);
      sig.datatype = static_cast<uint8_t>(o % 11);
      uint64_t got = c->OnEnqueue(since_of(o), o * 3, static_cast<uint8_t>(o % 5), sig);
      if (got != o) ADD_FAILURE() << "ordinal " << got << " for " << o;
      enq_done.store(o, std::memory_order_release);
    }
  });
  // Every KernelCh start of a communicator comes from its one proxy progress thread
  // (docs/nccl-facts.md, Threads and concurrency), each channel of a collective in turn:
  // OnGpuStart has one writer, as in NCCL.
  std::thread proxy([&] {
    for (uint64_t o = 1; o <= kTotal; ++o) {
      while (enq_done.load(std::memory_order_acquire) < o) std::this_thread::yield();
      for (int ch = 0; ch < kChannels; ++ch) c->OnGpuStart(o);
      kernel_done.store(o, std::memory_order_release);
    }
  });
  std::thread completer([&] {
    for (uint64_t o = 1; o <= kTotal; ++o) {
      while (kernel_done.load(std::memory_order_acquire) < o) std::this_thread::yield();
      c->OnComplete(o);
      complete_done.store(o, std::memory_order_release);
    }
  });
  uint64_t named = 0;
  std::thread reader([&] {
    InFlightSnapshot prev;
    while (!stop.load(std::memory_order_acquire)) {
      InFlightSnapshot s = c->Read();
      if (!(s.completed <= s.gpu_started && s.gpu_started <= s.enqueued)) {
        ADD_FAILURE() << s.completed << " " << s.gpu_started << " " << s.enqueued;
        return;
      }
      if (s.enqueued < prev.enqueued || s.gpu_started < prev.gpu_started ||
          s.completed < prev.completed) {
        ADD_FAILURE() << "went backwards";
        return;
      }
      if (s.oldest_valid) {
        ++named;
        uint64_t o = s.completed + 1;
        if (s.oldest_since_ns != since_of(o) || s.oldest_seq != o * 3 || s.oldest_func != o % 5 ||
            s.oldest_sig.bytes != o * 5 || s.oldest_sig.root != static_cast<int32_t>(o % 7) ||
            s.oldest_sig.datatype != o % 11) {
          ADD_FAILURE() << "torn oldest entry for ordinal " << o;
          return;
        }
      }
      prev = s;
    }
  });
  enqueuer.join();
  proxy.join();
  completer.join();
  stop.store(true, std::memory_order_release);
  reader.join();
  InFlightSnapshot s = c->Read();
  EXPECT_EQ(s.enqueued, kTotal);
  EXPECT_EQ(s.gpu_started, kTotal);
  EXPECT_EQ(s.completed, kTotal);
  *named_out = named;  // > 0 implies the reader read: judged by the caller
}

TEST(InFlightCounters, ConcurrentStagesAgainstAReader) {
  // The reader must have seen collectives in flight, and named them right, in at least one run.
  // On a busy machine the writers (about 4 ms) can finish before the reader is first scheduled:
  // then the run is repeated, up to 50 times, rather than judged by the scheduler.
  uint64_t named = 0;
  for (int run = 0; run < 50 && named == 0 && !HasFailure(); ++run) RunStagesAgainstAReader(&named);
  EXPECT_GT(named, 0u);
}

// ---- The drainer's send policy. ----------------------------------------------------------------
InFlightSample Sample(uint64_t enq, uint64_t gpu, uint64_t done, int64_t since = 0) {
  InFlightSample s;
  s.comm_hash = 0xabc;
  s.rank = 3;
  s.nranks = 8;
  s.pid = 42;
  s.snap.enqueued = enq;
  s.snap.gpu_started = gpu;
  s.snap.completed = done;
  if (enq > done && since > 0) {
    s.snap.oldest_valid = true;
    s.snap.oldest_since_ns = since;
    s.snap.oldest_seq = done;  // NCCL seqNumber of an AllReduce-only job: ordinal - 1
    s.snap.oldest_func = kSentinelFuncAllReduce;
  }
  return s;
}

TEST(InFlightMonitor, OncePerPeriodAndAtOnceWhenStuck) {
  InFlightMonitorOptions o;
  o.fixed_threshold_ns = 500 * kMs;
  InFlightMonitor m(o);
  std::vector<SentinelWireInFlight> out;
  int64_t t0 = 10'000 * kMs;
  InFlightSample idle = Sample(4, 4, 4);
  m.Observe(&idle, 1, t0, false, &out);
  ASSERT_EQ(out.size(), 1u);  // a new communicator: at once
  EXPECT_EQ(out[0].comm_hash, 0xabcu);
  EXPECT_EQ(out[0].rank, 3);
  EXPECT_EQ(out[0].nranks, 8);
  EXPECT_EQ(out[0].pid, 42u);
  EXPECT_EQ(out[0].completed, 4u);
  EXPECT_EQ(out[0].oldest_since_ns, 0);
  EXPECT_EQ(out[0].flags, 0);
  out.clear();
  // Busy but young: nothing until the period.
  InFlightSample busy = Sample(5, 5, 4, t0 + 100 * kMs);
  m.Observe(&busy, 1, t0 + 200 * kMs, false, &out);
  EXPECT_TRUE(out.empty());
  // Past the threshold: at once, flagged, once per stuck collective.
  m.Observe(&busy, 1, t0 + 601 * kMs + 100 * kMs, false, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].flags & kSentinelInFlightStuck, kSentinelInFlightStuck);
  EXPECT_EQ(out[0].enqueued, 5u);
  EXPECT_EQ(out[0].gpu_started, 5u);
  EXPECT_EQ(out[0].completed, 4u);
  EXPECT_EQ(out[0].oldest_since_ns, t0 + 100 * kMs);
  EXPECT_EQ(out[0].oldest_seq, 4u);
  EXPECT_EQ(out[0].oldest_func, kSentinelFuncAllReduce);
  out.clear();
  m.Observe(&busy, 1, t0 + 800 * kMs, false, &out);
  EXPECT_TRUE(out.empty());
  // Still stuck a period later: the periodic record keeps the flag.
  m.Observe(&busy, 1, t0 + 1702 * kMs, false, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0].flags & kSentinelInFlightStuck, 0);
  out.clear();
  // force (final drain) sends regardless.
  m.Observe(&busy, 1, t0 + 1703 * kMs, true, &out);
  EXPECT_EQ(out.size(), 1u);
}

TEST(InFlightMonitor, ThresholdFollowsTheJobsOwnScale) {
  InFlightMonitorOptions o;  // adaptive: 10 x recent in-flight time, floor 100 ms
  InFlightMonitor m(o);
  std::vector<SentinelWireInFlight> out;
  int64_t t = 1'000'000 * kMs;
  EXPECT_EQ(m.ThresholdNs(0xabc, 3, t), 100 * kMs);
  // Collectives that stay in flight ~300 ms each (a slow pipeline step), drained every 25 ms.
  uint64_t done = 0;
  for (int coll = 0; coll < 5; ++coll) {
    int64_t since = t;
    for (int64_t at = 0; at <= 300 * kMs; at += 25 * kMs) {
      InFlightSample s = Sample(done + 1, done + 1, done, since);
      m.Observe(&s, 1, since + at, false, &out);
    }
    t = since + 310 * kMs;
    ++done;
    InFlightSample s = Sample(done, done, done);
    m.Observe(&s, 1, t, false, &out);
  }
  int64_t th = m.ThresholdNs(0xabc, 3, t);
  EXPECT_GE(th, 10 * 290 * kMs);
  EXPECT_LE(th, 10 * 310 * kMs);
  // A collective in flight 1 s is not stuck at this scale (it would be in a fast job).
  out.clear();
  InFlightSample slow = Sample(done + 1, done + 1, done, t);
  m.Observe(&slow, 1, t + 1000 * kMs, false, &out);
  for (const auto& r : out) EXPECT_EQ(r.flags & kSentinelInFlightStuck, 0);
  // The scale decays (half-life 60 s): a long quiet time brings the floor back.
  EXPECT_LT(m.ThresholdNs(0xabc, 3, t + 600'000 * kMs), 101 * kMs);
  // Fixed threshold (SENTINEL_INFLIGHT_STUCK_MS) ignores the scale.
  o.fixed_threshold_ns = 2000 * kMs;
  InFlightMonitor fixed(o);
  EXPECT_EQ(fixed.ThresholdNs(0xabc, 3, t), 2000 * kMs);
}

TEST(InFlightMonitor, FlagsCachedOldestAndFinalizedComms) {
  InFlightMonitor m{InFlightMonitorOptions()};
  std::vector<SentinelWireInFlight> out;
  int64_t t = 5'000 * kMs;
  InFlightSample a = Sample(2, 2, 1, t - 10 * kMs);
  a.kernel_ch = false;
  m.Observe(&a, 1, t, false, &out);
  ASSERT_EQ(out.size(), 1u);
  // Its oldest collective was read: its signature goes with it.
  EXPECT_EQ(out[0].flags, kSentinelInFlightNoKernelCh | kSentinelInFlightSignature);
  // The oldest's ring entry is overwritten later: the value read before is kept.
  InFlightSample b = a;
  b.snap.enqueued = 2 + kInFlightRing;
  b.snap.oldest_valid = false;
  out.clear();
  m.Observe(&b, 1, t + 2000 * kMs, false, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].oldest_since_ns, t - 10 * kMs);
  EXPECT_NE(out[0].flags & kSentinelInFlightStuck, 0);
  EXPECT_NE(out[0].flags & kSentinelInFlightSignature, 0);  // the signature read before, too
  // Finalized (absent): forgotten; a re-init with the same identity is new again.
  out.clear();
  m.Observe(nullptr, 0, t + 2100 * kMs, false, &out);
  m.Observe(&a, 1, t + 2200 * kMs, false, &out);
  EXPECT_EQ(out.size(), 1u);
}

TEST(InFlightJson, DumpLine) {
  SentinelWireInFlight r{};
  r.comm_hash = 0x1234;
  r.now_ns = 99;
  r.enqueued = 7;
  r.gpu_started = 7;
  r.completed = 6;
  r.oldest_since_ns = 50;
  r.oldest_seq = 6;
  r.rank = 2;
  r.nranks = 4;
  r.pid = 77;
  r.oldest_func = kSentinelFuncAllReduce;
  r.flags = kSentinelInFlightStuck | kSentinelInFlightSignature;
  r.oldest_bytes = 1 << 20;
  r.oldest_datatype = 9;
  r.oldest_root = -1;
  EXPECT_EQ(JsonlSink::InFlightToJson(r),
            "{\"type\":\"in_flight\",\"comm\":\"0x0000000000001234\",\"rank\":2,\"nranks\":4,"
            "\"pid\":77,\"now_ns\":99,\"enqueued\":7,\"gpu_started\":7,\"completed\":6,"
            "\"oldest_since_ns\":50,\"oldest_seq\":6,\"oldest_func\":\"AllReduce\","
            "\"oldest_bytes\":1048576,\"oldest_datatype\":\"ncclBfloat16\",\"oldest_root\":-1,"
            "\"flags\":[\"stuck\",\"signature\"]}");
}

}  // namespace
}  // namespace sentinel::plugin
