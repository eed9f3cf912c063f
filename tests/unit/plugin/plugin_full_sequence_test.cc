// The records of NCCL 2.28.9's full call sequence at the `all` mask (every ancestor, ProxyOp and
// ProxyStep with their states: tests/fakes/fake_nccl/nccl_call_sequence.h), driven through the
// BUILT plugin's v5 table: every network step's bytes reach its collective's record, which keeps
// its API time and GPU times, and nothing is counted stale, foreign, dropped or truncated. Guards
// the hot path's shortcuts at this mask: the ProxyOp/ProxyStep starts straight from NCCL's
// descriptor, the proxy sums added with loads and stores by the one proxy thread, and the CollApi
// that no longer holds its GroupApi.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "tests/fakes/fake_nccl/nccl_call_sequence.h"
#include "tests/unit/plugin/fake_host.h"

namespace sentinel::testing {
namespace {

namespace seq = nccl_seq;

const std::string& DumpPath() {
  static const std::string path = [] {
    std::string p = MakeTempPath("sentinel-full-sequence");
    setenv("SENTINEL_DUMP", p.c_str(), 1);
    setenv("SENTINEL_EVENTS", "all", 1);
    setenv("SENTINEL_BUDGET", "0", 1);
    return p;
  }();
  return path;
}

FakeHost& Host() {
  DumpPath();
  static FakeHost* host = new FakeHost();
  return *host;
}

constexpr int kCollectives = 150;
constexpr int kChannels = 4;
constexpr int kSteps = 3;
constexpr int64_t kStepBytes = 65536;  // the Replayer's transSize at every step state

TEST(FullSequence, EveryStepReachesItsCollectivesRecord) {
  ASSERT_TRUE(Host().ok()) << dlerror();
  const uint64_t comm = 0xF0115E9ull;
  void* ctx = Host().InitV5(comm, 8, 5, "full-sequence");
  const int mask = FakeHost::Mask();
  ASSERT_NE(mask & kSentinelProfileProxyStep, 0) << "SENTINEL_EVENTS=all sets every bit we keep";
  ASSERT_NE(mask & kSentinelProfileCollApi, 0);
  auto r = std::make_unique<seq::Replayer>(mask, kChannels, kSteps);
  for (int i = 0; i < kCollectives; ++i) r->Run(Host().v5, ctx);
  Host().v5->finalize(ctx);

  auto all = ReadDump(DumpPath());
  auto recs = Records(all, comm);
  ASSERT_EQ(recs.size(), static_cast<size_t>(kCollectives));
  for (int i = 0; i < kCollectives; ++i) {
    const auto& rec = recs[static_cast<size_t>(i)];
    EXPECT_EQ(rec["seq"], i);
    EXPECT_EQ(rec["func"], "AllReduce");
    EXPECT_EQ(rec["nchannels"], kChannels);
    EXPECT_TRUE(HasFlag(rec, "api_time_valid"));
    EXPECT_TRUE(HasFlag(rec, "gpu_time_valid"));
    EXPECT_TRUE(HasFlag(rec, "proxy_valid"));
    EXPECT_FALSE(HasFlag(rec, "truncated"));
    // One send and one receive per channel, kSteps steps each, every one counted.
    EXPECT_EQ(rec["proxy_send_bytes"], kChannels * kSteps * kStepBytes);
    EXPECT_EQ(rec["proxy_recv_bytes"], kChannels * kSteps * kStepBytes);
    EXPECT_GE(rec["proxy_send_wait_ns"].get<int64_t>(), 0);
    EXPECT_GE(rec["proxy_send_xfer_ns"].get<int64_t>(), 0);
    EXPECT_GE(rec["proxy_recv_wait_ns"].get<int64_t>(), 0);
    EXPECT_GE(rec["proxy_recv_xfer_ns"].get<int64_t>(), 0);
  }
  auto hb = LastHeartbeat(all);
  ASSERT_FALSE(hb.is_null());
  EXPECT_EQ(hb["stale_handles"], 0);
  EXPECT_EQ(hb["pxn_foreign"], 0);  // the ProxyOps carry this process's pid
  EXPECT_EQ(hb["events_dropped_pool"], 0);
  EXPECT_EQ(hb["records_dropped_ring"], 0);
  EXPECT_EQ(hb["records_truncated"], 0);
}

// A ProxyOp stopped while one of its steps is still open (not NCCL's order, but a host's bug must
// not lose the step): the op waits for the step, whose bytes still reach the record, and a second
// stop of the op is a stale handle. Exercises the ProxyOp's one-thread count (slot_refs.h) on its
// held path.
TEST(FullSequence, AProxyOpStoppedBeforeItsStepWaitsForIt) {
  ASSERT_TRUE(Host().ok()) << dlerror();
  const uint64_t comm = 0xF0115EAull;
  void* ctx = Host().InitV5(comm, 2, 0, "op-before-step");
  void* grp = Host().GroupApi(ctx, 1);
  void* api = Host().CollApi(ctx, grp, "AllReduce", 1024, "ncclFloat32");
  Host().Stop(api);
  Host().Record(grp, kSentinelStateGroupEndApiStart, nullptr);
  void* coll = Host().Coll(ctx, api, 0, 0, "AllReduce", 1024, "ncclFloat32", 1);
  Host().Stop(coll);
  Host().Stop(grp);
  void* op = Host().ProxyOp(ctx, coll, 1);
  ASSERT_NE(op, nullptr);
  void* step = Host().Start(ctx, FakeHost::Descr(kSentinelProfileProxyStep, op));
  ASSERT_NE(step, nullptr);
  SentinelEventStateArgs a;
  memset(&a, 0, sizeof(a));
  Host().Record(step, kSentinelStateProxyStepSendGpuWait, &a);
  a.proxy_step.trans_size = 4096;
  Host().Record(step, kSentinelStateProxyStepSendWait, &a);
  Host().Stop(op);  // the step is still open
  Host().Stop(op);  // stale: already stopped
  Host().Stop(step);
  Host().KernelChs(ctx, coll, 1, 0, nullptr, nullptr);
  Host().v5->finalize(ctx);

  auto all = ReadDump(DumpPath());
  auto recs = Records(all, comm);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_TRUE(HasFlag(recs[0], "proxy_valid"));
  EXPECT_FALSE(HasFlag(recs[0], "truncated"));
  EXPECT_EQ(recs[0]["proxy_send_bytes"], 4096);
  auto hb = LastHeartbeat(all);
  ASSERT_FALSE(hb.is_null());
  EXPECT_EQ(hb["stale_handles"], 1);  // the second stop of the op, nothing else
  EXPECT_EQ(hb["records_truncated"], 0);
}

}  // namespace
}  // namespace sentinel::testing
