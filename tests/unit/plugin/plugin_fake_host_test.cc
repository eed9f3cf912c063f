// Drives the BUILT libnccl-profiler-sentinel.so through the v5/v6/v4 tables like NCCL 2.28 does
// (docs/nccl-facts.md "5.3 Call sequences" A/B/C) and checks the records it dumps (SENTINEL_DUMP).
#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <utility>

#include "tests/unit/plugin/fake_host.h"

namespace sentinel::testing {
namespace {

const std::string& DumpPath() {
  static const std::string path = [] {
    std::string p = MakeTempPath("sentinel-fakehost");
    setenv("SENTINEL_DUMP", p.c_str(), 1);
    setenv("SENTINEL_EVENTS", "proxy", 1);  // default | CollApi | ProxyOp | ProxyStep
    setenv("SENTINEL_PROXY_GRACE_MS", "30", 1);
    setenv("SENTINEL_INFLIGHT_STUCK_MS", "200", 1);  // fixed, so the stuck record comes fast
    return p;
  }();
  return path;
}

FakeHost& Host() {
  DumpPath();
  static FakeHost* host = new FakeHost();
  return *host;
}

constexpr int64_t kGpuSkew = 5'000'000'000'000;  // GPU clock = host clock + 5000 s

class FakeHostTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(Host().ok()) << dlerror(); }
  FakeHost& h() { return Host(); }
  std::vector<nlohmann::json> Dump() { return ReadDump(DumpPath()); }

  // docs/nccl-facts.md "5.3 Call sequences" A on the application thread, then the proxy thread's
  // part on a real second thread.
  void* StandaloneColl(void* ctx, int rank, uint64_t seq, const char* func, size_t api_count,
                       size_t coll_count, const char* dtype, const char* coll_dtype, uint8_t nch,
                       bool net, int root = 0) {
    void* grp = h().GroupApi(ctx, 1);
    void* api = h().CollApi(ctx, grp, func, api_count, dtype, root);
    h().Stop(api);
    h().Record(grp, kSentinelStateGroupEndApiStart, nullptr);
    void* kl = h().Start(ctx, FakeHost::Descr(kSentinelProfileKernelLaunch, grp));
    h().Stop(kl);
    void* group = h().Start(ctx, FakeHost::Descr(kSentinelProfileGroup, nullptr));
    void* coll =
        h().Coll(ctx, api, rank, seq, func, coll_count, coll_dtype, nch, "RING", "SIMPLE", root);
    h().Stop(coll);  // "enqueued"; children still to come
    h().Stop(group);
    h().Stop(grp);
    std::thread proxy([&] {
      if (net) {
        void* send = h().ProxyOp(ctx, coll, 1);
        void* recv = h().ProxyOp(ctx, coll, 0);
        h().Step(ctx, send, true, 1000);
        h().Step(ctx, send, true, 24);
        h().Step(ctx, recv, false, 512);
        h().Stop(send);
        h().Stop(recv);
      }
      h().KernelChs(ctx, coll, nch, kGpuSkew, &min_start_, &max_stop_);
    });
    proxy.join();
    return coll;
  }

  // The process's stale-handle count so far, from the heartbeat that finalizing a new probe
  // communicator flushes (-1 without one).
  int64_t StaleHandlesNow(uint64_t probe_comm) {
    h().v5->finalize(h().InitV5(probe_comm, 1, 0));
    auto hb = LastHeartbeat(Dump());
    return hb.is_null() ? -1 : hb["stale_handles"].get<int64_t>();
  }

  uint64_t min_start_ = 0;
  uint64_t max_stop_ = 0;
};

TEST_F(FakeHostTest, AllReduceRecordIsCompleteAndCalibrated) {
  const uint64_t comm = 0xA11A11A11ull;
  int64_t t0 = plugin::MonoNs();
  void* ctx = h().InitV5(comm, 4, 2, "ar");
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(FakeHost::Mask(), 0x200 | 0x400 | 0x2 | 0x4 | 0x100 | 0x40 | 0x8 | 0x10);
  StandaloneColl(ctx, 2, 7, "AllReduce", 1024, 1024, "ncclFloat32", "ncclFloat32", 2, true);
  int64_t t1 = plugin::MonoNs();
  h().v5->finalize(ctx);
  auto recs = Records(Dump(), comm);
  ASSERT_EQ(recs.size(), 1u);
  const auto& r = recs[0];
  EXPECT_EQ(r["func"], "AllReduce");
  EXPECT_EQ(r["seq"], 7);
  EXPECT_EQ(r["bytes"], 4096);
  EXPECT_EQ(r["datatype"], "ncclFloat32");
  EXPECT_EQ(r["algo"], "RING");
  EXPECT_EQ(r["proto"], "SIMPLE");
  EXPECT_EQ(r["nchannels"], 2);
  EXPECT_EQ(r["rank"], 2);
  EXPECT_EQ(r["nranks"], 4);
  EXPECT_EQ(r["peer"], -1);
  EXPECT_EQ(r["pid"], getpid());
  EXPECT_TRUE(HasFlag(r, "api_time_valid"));
  EXPECT_TRUE(HasFlag(r, "gpu_time_valid"));
  EXPECT_TRUE(HasFlag(r, "proxy_valid"));
  EXPECT_FALSE(HasFlag(r, "truncated"));
  int64_t api = r["api_ns"], enq = r["enqueue_ns"], gs = r["gpu_start_ns"], ge = r["gpu_end_ns"];
  EXPECT_LE(t0, api);
  EXPECT_LE(api, enq);
  // Calibration: durations are exact, and the host-mapped GPU times fall inside the test window
  // (the offset is at most the callback delay above the true one, which here is 3 us).
  EXPECT_EQ(ge - gs, static_cast<int64_t>(max_stop_ - min_start_));
  EXPECT_GE(gs, enq - 10000);
  EXPECT_LE(ge, t1 + 10000);
  EXPECT_EQ(r["proxy_send_bytes"], 1024);
  EXPECT_EQ(r["proxy_recv_bytes"], 512);
  // The proxy sums, taken in ticks of the interval clock (the TSC where it serves) and converted
  // at its measured rate: each covers the sleeps the fake made inside it (two send steps, one
  // recv step, 50 us each per phase; a sleep is never shorter, 1 % is left for the rate's error)
  // and fits in the test's own CLOCK_MONOTONIC window.
  const int64_t window = t1 - t0;
  for (const auto& [key, slept_us] : {std::pair{"proxy_send_wait_ns", 100},
                                      {"proxy_send_xfer_ns", 100},
                                      {"proxy_recv_wait_ns", 50},
                                      {"proxy_recv_xfer_ns", 50}}) {
    SCOPED_TRACE(key);
    EXPECT_GE(r[key].get<int64_t>(), slept_us * 990);
    EXPECT_LE(r[key].get<int64_t>(), window);
  }
  auto inits = Records(Dump(), comm, "comm_init");
  ASSERT_EQ(inits.size(), 1u);
  EXPECT_EQ(inits[0]["abi_version"], 5);
  EXPECT_EQ(inits[0]["comm_name"], "ar");
  EXPECT_EQ(Records(Dump(), comm, "comm_end").size(), 1u);
}

TEST_F(FakeHostTest, EveryCollectiveKind) {
  const uint64_t comm = 0xC011EC7ull;
  void* ctx = h().InitV5(comm, 8, 0);
  // AllGather/Broadcast: the Coll event reports bytes as ncclInt8
  // (docs/nccl-facts.md "5.5 Special cases"); CollApi the user's.
  StandaloneColl(ctx, 0, 1, "AllGather", 100, 400, "ncclFloat32", "ncclInt8", 1, false);
  StandaloneColl(ctx, 0, 2, "ReduceScatter", 64, 64, "ncclBfloat16", "ncclBfloat16", 1, true);
  StandaloneColl(ctx, 0, 3, "Broadcast", 10, 80, "ncclFloat64", "ncclInt8", 1, false, 3);
  StandaloneColl(ctx, 0, 4, "Reduce", 10, 10, "ncclInt64", "ncclInt64", 1, false, 5);
  StandaloneColl(ctx, 0, 5, "AllReduce", 3, 3, "ncclFloat16", "ncclFloat16", 1, false);
  h().v5->finalize(ctx);
  auto recs = Records(Dump(), comm);
  ASSERT_EQ(recs.size(), 5u);
  std::map<std::string, nlohmann::json> by_func;
  for (auto& r : recs) by_func[r["func"]] = r;
  EXPECT_EQ(by_func["AllGather"]["bytes"], 400);
  EXPECT_EQ(by_func["ReduceScatter"]["bytes"], 128);
  EXPECT_EQ(by_func["Broadcast"]["bytes"], 80);
  EXPECT_EQ(by_func["Broadcast"]["root"], 3);
  EXPECT_EQ(by_func["Reduce"]["bytes"], 80);
  EXPECT_EQ(by_func["Reduce"]["root"], 5);
  EXPECT_EQ(by_func["AllReduce"]["bytes"], 6);
  EXPECT_EQ(by_func["AllReduce"]["root"], -1);
  for (auto& r : recs) EXPECT_FALSE(HasFlag(r, "truncated")) << r.dump();
}

TEST_F(FakeHostTest, SendRecvSequencePerPeerAndDirection) {
  const uint64_t comm = 0x5E4D4ECull;
  void* ctx = h().InitV5(comm, 4, 1);
  for (int iter = 0; iter < 2; ++iter) {
    void* grp = h().GroupApi(ctx, 2);
    void* sapi = h().P2pApi(ctx, grp, "Send", 256, "ncclInt32");
    h().Stop(sapi);
    void* rapi = h().P2pApi(ctx, grp, "Recv", 256, "ncclInt32");
    h().Stop(rapi);
    h().Record(grp, kSentinelStateGroupEndApiStart, nullptr);
    void* send = h().P2p(ctx, sapi, 1, "Send", 256, "ncclInt32", 2, 1);
    void* recv = h().P2p(ctx, rapi, 1, "Recv", 256, "ncclInt32", 0, 1);
    h().Stop(send);
    h().Stop(recv);
    h().Stop(grp);
    h().KernelChs(ctx, send, 1, kGpuSkew, nullptr, nullptr);
    h().KernelChs(ctx, recv, 1, kGpuSkew, nullptr, nullptr);
  }
  h().v5->finalize(ctx);
  auto recs = Records(Dump(), comm);
  ASSERT_EQ(recs.size(), 4u);
  int sends = 0, recvs = 0;
  for (auto& r : recs) {
    EXPECT_TRUE(HasFlag(r, "p2p"));
    EXPECT_FALSE(HasFlag(r, "func_recovered"));
    EXPECT_EQ(r["bytes"], 1024);
    if (r["func"] == "Send") {
      EXPECT_EQ(r["peer"], 2);
      EXPECT_EQ(r["seq"], sends++);
    } else {
      EXPECT_EQ(r["func"], "Recv");
      EXPECT_EQ(r["peer"], 0);
      EXPECT_EQ(r["seq"], recvs++);
    }
  }
}

TEST_F(FakeHostTest, AlltoAllIsRecoveredFromSendRecvPieces) {
  const uint64_t comm = 0xA2Aull;
  const int n = 4;
  void* ctx = h().InitV5(comm, n, 0);
  for (int call = 0; call < 2; ++call) {
    void* grp = h().GroupApi(ctx, 1);
    std::vector<void*> sapi, rapi;
    for (int p = 0; p < n; ++p) {
      sapi.push_back(h().P2pApi(ctx, grp, "Send", 32, "ncclFloat32"));
      h().Stop(sapi.back());
      rapi.push_back(h().P2pApi(ctx, grp, "Recv", 32, "ncclFloat32"));
      h().Stop(rapi.back());
    }
    h().Record(grp, kSentinelStateGroupEndApiStart, nullptr);
    std::vector<void*> ops;
    for (int p = 0; p < n; ++p) {
      ops.push_back(h().P2p(ctx, sapi[p], 0, "Send", 32, "ncclFloat32", p, 1));
      ops.push_back(h().P2p(ctx, rapi[p], 0, "Recv", 32, "ncclFloat32", p, 1));
    }
    for (void* op : ops) h().Stop(op);
    h().Stop(grp);
    for (void* op : ops) h().KernelChs(ctx, op, 1, kGpuSkew, nullptr, nullptr);
  }
  h().v5->finalize(ctx);
  auto recs = Records(Dump(), comm);
  ASSERT_EQ(recs.size(), 2u * 2 * n);
  std::map<int, int> per_seq;
  for (auto& r : recs) {
    EXPECT_EQ(r["func"], "AlltoAll");
    EXPECT_TRUE(HasFlag(r, "func_recovered"));
    EXPECT_TRUE(HasFlag(r, "p2p"));
    per_seq[r["seq"]]++;
  }
  EXPECT_EQ(per_seq[0], 2 * n);
  EXPECT_EQ(per_seq[1], 2 * n);
}

TEST_F(FakeHostTest, NestedGroupWithFusedCollectivesAndTwoCommsOnOneThread) {
  const uint64_t comm_a = 0xAAA1ull, comm_b = 0xBBB2ull;
  void* a = h().InitV5(comm_a, 2, 0);
  void* b = h().InitV5(comm_b, 4, 3);
  // docs/nccl-facts.md "5.3 Call sequences" B, with operations on two communicators sharing one
  // GroupApi (depth 3: nested).
  void* grp = h().GroupApi(a, 3);
  void* api1 = h().CollApi(a, grp, "AllReduce", 8, "ncclFloat32");
  h().Stop(api1);
  void* api2 = h().CollApi(a, grp, "AllReduce", 16, "ncclFloat32");
  h().Stop(api2);
  void* api3 = h().CollApi(b, grp, "AllGather", 4, "ncclFloat32");
  h().Stop(api3);
  h().Record(grp, kSentinelStateGroupEndApiStart, nullptr);
  void* c1 = h().Coll(a, api1, 0, 10, "AllReduce", 8, "ncclFloat32", 1);
  void* c2 = h().Coll(a, api2, 0, 11, "AllReduce", 16, "ncclFloat32", 1);
  void* c3 = h().Coll(b, api3, 3, 20, "AllGather", 16, "ncclInt8", 1);
  h().Stop(c1);
  h().Stop(c2);
  h().Stop(c3);
  h().Stop(grp);
  h().KernelChs(a, c1, 1, kGpuSkew, nullptr, nullptr);
  h().KernelChs(a, c2, 1, kGpuSkew, nullptr, nullptr);
  h().KernelChs(b, c3, 1, kGpuSkew, nullptr, nullptr);
  h().v5->finalize(a);
  h().v5->finalize(b);
  auto all = Dump();
  auto ra = Records(all, comm_a);
  auto rb = Records(all, comm_b);
  ASSERT_EQ(ra.size(), 2u);
  ASSERT_EQ(rb.size(), 1u);
  EXPECT_EQ(ra[0]["rank"], 0);
  EXPECT_EQ(ra[0]["nranks"], 2);
  EXPECT_EQ(rb[0]["rank"], 3);
  EXPECT_EQ(rb[0]["nranks"], 4);
  EXPECT_EQ(rb[0]["func"], "AllGather");
  std::set<int> seqs = {ra[0]["seq"].get<int>(), ra[1]["seq"].get<int>()};
  EXPECT_EQ(seqs, (std::set<int>{10, 11}));
}

TEST_F(FakeHostTest, NonblockingOrderChildrenAfterParentsStopped) {
  const uint64_t comm = 0x0B10C4ull;
  void* ctx = h().InitV5(comm, 2, 1);
  void* grp = h().GroupApi(ctx, 1);
  void* api = h().CollApi(ctx, grp, "AllReduce", 4, "ncclInt32");
  h().Stop(api);
  h().Record(grp, kSentinelStateGroupEndApiStart, nullptr);
  h().Stop(grp);  // GroupApi stops on the app thread before the launch thread runs
  void* coll = nullptr;
  std::thread launcher([&] {
    void* kl = h().Start(ctx, FakeHost::Descr(kSentinelProfileKernelLaunch, grp));
    h().Stop(kl);
    coll = h().Coll(ctx, api, 1, 1, "AllReduce", 4, "ncclInt32", 2);
    h().Stop(coll);
  });
  launcher.join();
  std::thread proxy([&] {
    void* op = h().ProxyOp(ctx, coll, 1);
    h().Step(ctx, op, true, 16);
    h().Stop(op);
    h().KernelChs(ctx, coll, 2, kGpuSkew, nullptr, nullptr);
  });
  proxy.join();
  h().v5->finalize(ctx);
  auto recs = Records(Dump(), comm);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_TRUE(HasFlag(recs[0], "api_time_valid"));
  EXPECT_TRUE(HasFlag(recs[0], "proxy_valid"));
  EXPECT_FALSE(HasFlag(recs[0], "truncated"));
  EXPECT_EQ(recs[0]["proxy_send_bytes"], 16);
}

TEST_F(FakeHostTest, CudaGraphReplaysUseTheCaptureTimeCollApi) {
  const uint64_t comm = 0x64A9Full;
  void* ctx = h().InitV5(comm, 2, 0);
  void* grp = h().GroupApi(ctx, 1, true);
  void* api = h().CollApi(ctx, grp, "AllReduce", 64, "ncclFloat32", 0, true);
  h().Stop(api);
  // NCCL's stale CollApi handle is stopped again and again (docs/nccl-facts.md "5.6 Pitfalls" item
  // 1)
  h().Stop(api);
  h().Record(grp, kSentinelStateGroupEndApiStart, nullptr);
  h().Stop(grp);
  for (int replay = 0; replay < 3; ++replay) {
    std::thread cuda_callback([&] {
      void* coll = h().Coll(ctx, api, 0, 42, "AllReduce", 64, "ncclFloat32", 1);
      h().Stop(coll);
      h().KernelChs(ctx, coll, 1, kGpuSkew, nullptr, nullptr);
    });
    cuda_callback.join();
  }
  // A replay whose parent pointer is garbage: the record has no API time, and nothing crashes.
  void* bogus = reinterpret_cast<void*>(0x1234);
  void* coll = h().Coll(ctx, bogus, 0, 43, "AllReduce", 64, "ncclFloat32", 1);
  h().Stop(coll);
  h().KernelChs(ctx, coll, 1, kGpuSkew, nullptr, nullptr);
  h().v5->finalize(ctx);
  auto recs = Records(Dump(), comm);
  ASSERT_EQ(recs.size(), 4u);
  // Replays ran on different threads (different rings), so the dump order is not fixed.
  std::vector<nlohmann::json> replays;
  for (auto& r : recs) {
    if (r["seq"] == 43) {
      EXPECT_FALSE(HasFlag(r, "api_time_valid"));
    } else {
      replays.push_back(r);
    }
  }
  ASSERT_EQ(replays.size(), 3u);
  for (auto& r : replays) {
    EXPECT_EQ(r["seq"], 42);
    EXPECT_TRUE(HasFlag(r, "graph_captured"));
    EXPECT_TRUE(HasFlag(r, "api_time_valid"));
    EXPECT_EQ(r["api_ns"], replays[0]["api_ns"]);
  }
}

TEST_F(FakeHostTest, PxnProxyOpsFromAnotherPidAreNeverDereferenced) {
  const uint64_t comm = 0x9A7Eull;
  void* ctx = h().InitV5(comm, 2, 0);
  void* grp = h().GroupApi(ctx, 1);
  void* api = h().CollApi(ctx, grp, "AllReduce", 4, "ncclInt32");
  h().Stop(api);
  void* coll = h().Coll(ctx, api, 0, 1, "AllReduce", 4, "ncclInt32", 1);
  h().Stop(coll);
  h().Stop(grp);
  // Foreign pid with garbage context and parent: must return NULL without touching them.
  void* garbage = reinterpret_cast<void*>(0xdeadbeefULL);
  void* op = h().ProxyOp(garbage, garbage, 1, getpid() + 100000);
  EXPECT_EQ(op, nullptr);
  void* step = h().Start(garbage, FakeHost::Descr(kSentinelProfileProxyStep, op));
  EXPECT_EQ(step, nullptr);
  h().Stop(step);
  // Same pid (single-process multi-GPU) but a garbage parent: tolerated, no handle.
  EXPECT_EQ(h().ProxyOp(ctx, garbage, 1), nullptr);
  h().KernelChs(ctx, coll, 1, kGpuSkew, nullptr, nullptr);
  h().v5->finalize(ctx);
  auto all = Dump();
  EXPECT_EQ(Records(all, comm).size(), 1u);
  auto hb = LastHeartbeat(all);
  ASSERT_FALSE(hb.is_null());
  EXPECT_GE(hb["pxn_foreign"].get<int>(), 1);
  EXPECT_GE(hb["stale_handles"].get<int>(), 2);
}

TEST_F(FakeHostTest, V4TableArgumentOrderLegacyGroupParentAndGarbageP2pChannels) {
  const uint64_t comm = 0x44444ull;
  void* ctx = h().InitV4(comm, 2, 1);
  ASSERT_NE(ctx, nullptr);
  auto start = [&](SentinelEventDescrV4 d) {
    void* hd = nullptr;
    h().v4->start_event(ctx, &hd, &d);
    return hd;
  };
  SentinelEventDescrV4 g;
  memset(&g, 0, sizeof(g));
  g.type = kSentinelProfileGroup;
  void* group = start(g);
  SentinelEventDescrV4 c;
  memset(&c, 0, sizeof(c));
  c.type = kSentinelProfileColl;
  c.parent_obj = group;
  c.coll.seq_number = 9;
  c.coll.func = "AllReduce";
  c.coll.count = 2;
  c.coll.datatype = "ncclFloat64";
  c.coll.n_channels = 1;
  c.coll.algo = "TREE";
  c.coll.proto = "LL";
  void* coll = start(c);
  SentinelEventDescrV4 p;
  memset(&p, 0, sizeof(p));
  p.type = kSentinelProfileP2p;
  p.parent_obj = group;
  p.p2p.func = "Send";
  p.p2p.count = 5;
  p.p2p.datatype = "ncclInt8";
  p.p2p.peer = 0;
  p.p2p.n_channels = 0xAB;  // garbage on 2.28 (docs/nccl-facts.md "3.8 What older plugin ABIs see")
  void* p2p = start(p);
  h().v4->stop_event(coll);
  h().v4->stop_event(p2p);
  h().v4->stop_event(group);
  SentinelEventDescrV4 k;
  memset(&k, 0, sizeof(k));
  k.type = kSentinelProfileKernelCh;
  k.parent_obj = coll;
  k.kernel_ch.p_timer = 1000;
  void* kch = start(k);
  SentinelEventStateArgs a;
  a.kernel_ch.p_timer = 2000;
  h().v4->record_event_state(kch, kSentinelStateKernelChStop, &a);
  h().v4->stop_event(kch);
  // The P2p's channel count is unknown, so it completes after the grace period.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  h().v4->finalize(ctx);
  auto all = Dump();
  auto recs = Records(all, comm);
  ASSERT_EQ(recs.size(), 2u);
  for (auto& r : recs) {
    EXPECT_EQ(r["rank"], 1);
    EXPECT_FALSE(HasFlag(r, "truncated")) << r.dump();
    EXPECT_FALSE(HasFlag(r, "api_time_valid"));
  }
  auto inits = Records(all, comm, "comm_init");
  ASSERT_EQ(inits.size(), 1u);
  EXPECT_EQ(inits[0]["abi_version"], 4);
}

TEST_F(FakeHostTest, V6CopyEngineCollectiveIsTimedByThePlugin) {
  const uint64_t comm = 0xCECEull;
  void* ctx = nullptr;
  h().v6->init(&ctx, comm, &FakeHost::Mask(), nullptr, 1, 2, 0, nullptr);
  SentinelEventDescrV6 d;
  memset(&d, 0, sizeof(d));
  d.type = kSentinelProfileCeColl;
  d.ce_coll.seq_number = 3;
  d.ce_coll.func = "AllGather";
  d.ce_coll.count = 100;
  d.ce_coll.datatype = "ncclInt8";
  void* ce = nullptr;
  h().v6->start_event(ctx, &ce, &d);
  ASSERT_NE(ce, nullptr);
  SentinelEventDescrV6 s;
  memset(&s, 0, sizeof(s));
  s.type = kSentinelProfileCeSync;
  s.parent_obj = ce;
  void* sync = nullptr;
  h().v6->start_event(ctx, &sync, &s);
  h().v6->stop_event(ce);
  h().v6->stop_event(sync);
  h().v6->finalize(ctx);
  auto recs = Records(Dump(), comm);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0]["func"], "AllGather");
  EXPECT_EQ(recs[0]["seq"], 3);
  EXPECT_EQ(recs[0]["bytes"], 100);
  EXPECT_TRUE(HasFlag(recs[0], "gpu_time_valid"));
  EXPECT_GE(recs[0]["gpu_end_ns"].get<int64_t>(), recs[0]["gpu_start_ns"].get<int64_t>());
}

TEST_F(FakeHostTest, FinalizeTruncatesRecordsStillWaitingForChildren) {
  const uint64_t comm = 0x7E0Cull;
  void* ctx = h().InitV5(comm, 2, 0);
  void* coll = h().Coll(ctx, nullptr, 0, 5, "AllReduce", 4, "ncclInt32", 4);
  h().Stop(coll);
  h().KernelChs(ctx, coll, 2, kGpuSkew, nullptr, nullptr);  // 2 of 4 channels only
  h().v5->finalize(ctx);
  auto recs = Records(Dump(), comm);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_TRUE(HasFlag(recs[0], "truncated"));
  EXPECT_EQ(recs[0]["seq"], 5);
}

// A KernelCh start takes a shortcut when its context is its parent's and still live; every other
// case keeps the checks of the other starts: a garbage context, or a collective of a communicator
// already finalized, gets no handle and is counted stale (exactly these two).
TEST_F(FakeHostTest, KernelChStartOutsideItsLiveContextGetsNoHandleAndIsCountedStale) {
  const int64_t stale0 = StaleHandlesNow(0x5C01ull);
  const uint64_t comm = 0x5C0Dull;
  void* ctx = h().InitV5(comm, 2, 0);
  void* coll = h().Coll(ctx, nullptr, 0, 7, "AllReduce", 4, "ncclInt32", 2);
  h().Stop(coll);
  h().KernelChs(ctx, coll, 1, kGpuSkew, nullptr, nullptr);  // 1 of 2 channels: still waiting
  auto d = FakeHost::Descr(kSentinelProfileKernelCh, coll);
  d.kernel_ch.channel_id = 1;
  d.kernel_ch.p_timer = 1000;
  EXPECT_EQ(h().Start(reinterpret_cast<void*>(0xdeadbeefULL), d), nullptr);
  h().v5->finalize(ctx);  // emits the record truncated; the slot lives until channel 1 stops
  EXPECT_EQ(h().Start(ctx, d), nullptr);
  EXPECT_EQ(StaleHandlesNow(0x5C02ull) - stale0, 2);
  auto recs = Records(Dump(), comm);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_TRUE(HasFlag(recs[0], "truncated"));
  EXPECT_EQ(recs[0]["seq"], 7);
}

// A collective's GPU time spans all its KernelCh channels whatever their order, beside a channel
// started twice and a channel beyond its n_channels (each of those gets a KernelCh slot of its
// own), and the record waits for its last channel: the expected channels share one reference and
// keep their timers per channel (KernelChTimes), folded into the record when it is built.
TEST_F(FakeHostTest, GpuTimeSpansEveryChannelInAnyOrderAndTheRecordWaitsForTheLast) {
  const int64_t stale0 = StaleHandlesNow(0x6C01ull);
  const uint64_t comm = 0x6C0Dull;
  void* ctx = h().InitV5(comm, 2, 0);
  void* coll = h().Coll(ctx, nullptr, 0, 11, "AllReduce", 4, "ncclInt32", 3);
  h().Stop(coll);
  const int64_t base = plugin::MonoNs() + kGpuSkew;
  struct Channel {
    uint8_t id;
    int64_t start;
    int64_t end;
    void* handle = nullptr;
  };
  // Expected channels 2, 0 (the earliest start) and 5 (the latest end); then channel 0 again and
  // channel 9 (beyond n_channels = 3).
  std::vector<Channel> chans = {
      {2, 300, 1000}, {0, 50, 900}, {5, 200, 1500}, {0, 100, 1100}, {9, 400, 1200}};
  for (Channel& c : chans) {
    auto d = FakeHost::Descr(kSentinelProfileKernelCh, coll);
    d.kernel_ch.channel_id = c.id;
    d.kernel_ch.p_timer = static_cast<uint64_t>(base - 3000 + c.start);
    c.handle = h().Start(ctx, d);
    ASSERT_NE(c.handle, nullptr) << int{c.id};
  }
  EXPECT_NE(chans[1].handle, chans[3].handle);  // the second start of channel 0 is its own
  // Stops in another order: the two others first, then the expected ones, channel 5 last.
  for (size_t i : {3u, 4u, 1u, 0u, 2u}) {
    SentinelEventStateArgs a;
    memset(&a, 0, sizeof(a));
    a.kernel_ch.p_timer = static_cast<uint64_t>(base - 3000 + chans[i].end);
    h().Record(chans[i].handle, kSentinelStateKernelChStop, &a);
    h().Stop(chans[i].handle);
  }
  h().v5->finalize(ctx);
  EXPECT_EQ(StaleHandlesNow(0x6C02ull) - stale0, 0);
  auto recs = Records(Dump(), comm);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_FALSE(HasFlag(recs[0], "truncated"));
  ASSERT_TRUE(HasFlag(recs[0], "gpu_time_valid"));
  EXPECT_EQ(recs[0]["gpu_end_ns"].get<int64_t>() - recs[0]["gpu_start_ns"].get<int64_t>(),
            1500 - 50);
}

// The in-flight state through the built .so: a collective whose kernel started and never ended,
// and one behind it that was only enqueued, show as enqueued 3 / GPU-started 2 / completed 1 with
// the oldest's enqueue time, seqNumber and function, flagged stuck past SENTINEL_INFLIGHT_STUCK_MS;
// once they finish, the next state says nothing is in flight.
TEST_F(FakeHostTest, InFlightStateOfAHungCollective) {
  const uint64_t comm = 0x1F1F1F1Full;
  void* ctx = h().InitV5(comm, 4, 1, "inflight");
  StandaloneColl(ctx, 1, 0, "AllReduce", 256, 256, "ncclFloat32", "ncclFloat32", 1, false);
  int64_t before = plugin::MonoNs();
  void* b = h().Coll(ctx, nullptr, 1, 1, "AllReduce", 256, "ncclFloat32", 2);
  int64_t after = plugin::MonoNs();
  h().Stop(b);  // enqueued; the kernel below starts on channel 0 and never ends
  void* ch0 = nullptr;
  std::thread([&] {
    auto d = FakeHost::Descr(kSentinelProfileKernelCh, b);
    d.kernel_ch.p_timer = static_cast<uint64_t>(plugin::MonoNs() + kGpuSkew);
    ch0 = h().Start(ctx, d);
  }).join();
  void* c = h().Coll(ctx, nullptr, 1, 0, "AllGather", 256, "ncclInt8", 1);
  h().Stop(c);  // queued behind it on the stream: no kernel yet

  auto latest = [&] {
    auto states = Records(Dump(), comm, "in_flight");
    return states.empty() ? nlohmann::json() : states.back();
  };
  // States go out once a second (at once when stuck); 30 s is for a loaded TSan run.
  nlohmann::json st;
  auto latest_until = [&](const std::function<bool(const nlohmann::json&)>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    do {
      st = latest();
      if (!st.is_null() && done(st)) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } while (std::chrono::steady_clock::now() < deadline);
  };
  // The first state with all three events in it (a slow machine may report the stuck one before
  // the third collective is enqueued).
  latest_until(
      [](const nlohmann::json& s) { return HasFlag(s, "stuck") && s.value("enqueued", 0) == 3; });
  ASSERT_FALSE(st.is_null());
  ASSERT_TRUE(HasFlag(st, "stuck")) << st.dump();
  EXPECT_FALSE(HasFlag(st, "no_kernel_ch"));
  EXPECT_EQ(st["rank"], 1);
  EXPECT_EQ(st["nranks"], 4);
  EXPECT_EQ(st["pid"], getpid());
  EXPECT_EQ(st["enqueued"], 3);
  EXPECT_EQ(st["gpu_started"], 2);
  EXPECT_EQ(st["completed"], 1);
  EXPECT_EQ(st["oldest_func"], "AllReduce");
  EXPECT_EQ(st["oldest_seq"], 1);
  int64_t since = st["oldest_since_ns"];
  EXPECT_GE(since, before);
  EXPECT_LE(since, after);
  EXPECT_GE(static_cast<int64_t>(st["now_ns"]) - since, 200'000'000);
  // No record of either collective while they hang.
  EXPECT_EQ(Records(Dump(), comm).size(), 1u);

  // The kernels finish: both records complete and the state drains.
  std::thread([&] {
    SentinelEventStateArgs a;
    memset(&a, 0, sizeof(a));
    a.kernel_ch.p_timer = static_cast<uint64_t>(plugin::MonoNs() + kGpuSkew);
    h().Record(ch0, kSentinelStateKernelChStop, &a);
    h().Stop(ch0);
    auto d = FakeHost::Descr(kSentinelProfileKernelCh, b);
    d.kernel_ch.channel_id = 1;
    d.kernel_ch.p_timer = static_cast<uint64_t>(plugin::MonoNs() + kGpuSkew);
    void* ch1 = h().Start(ctx, d);
    h().Record(ch1, kSentinelStateKernelChStop, &a);
    h().Stop(ch1);
    h().KernelChs(ctx, c, 1, kGpuSkew, nullptr, nullptr);
  }).join();
  latest_until([](const nlohmann::json& s) { return s.value("completed", 0) == 3; });
  ASSERT_FALSE(st.is_null());
  EXPECT_EQ(st["enqueued"], 3);
  EXPECT_EQ(st["gpu_started"], 3);
  EXPECT_EQ(st["completed"], 3);
  EXPECT_EQ(st["oldest_since_ns"], 0);
  EXPECT_FALSE(HasFlag(st, "stuck"));
  EXPECT_EQ(Records(Dump(), comm).size(), 3u);
  h().v5->finalize(ctx);
}

}  // namespace
}  // namespace sentinel::testing
