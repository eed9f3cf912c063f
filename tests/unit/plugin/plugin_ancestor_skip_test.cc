// The ancestors NCCL emits around every collective that the mask did not ask for
// (plugin/core/ancestor_skip.h), driven through the BUILT plugin with the exact calls NCCL 2.28.9
// makes (tests/fakes/fake_nccl/nccl_call_sequence.h): at Coll | KernelCh GroupApi and CollApi are
// answered with NULL and Group with one shared handle, while every Coll still gets its record with
// the kernel times of all its channels, nothing is counted stale or dropped, and the in-flight
// count returns to zero. At the default mask (the ctest registration with SENTINEL_EVENTS=default)
// the same holds on a thread that never started a P2pApi: GroupApi is kept only on threads that
// have (the AlltoAll recovery's groups), and CollApi is not kept, so the records carry no API
// time. At `all` both are kept and the records have their API time. Group and KernelLaunch, which
// no record reads, are answered at every mask.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "plugin/base/event_mask.h"
#include "tests/fakes/fake_nccl/nccl_call_sequence.h"
#include "tests/unit/plugin/fake_host.h"

namespace sentinel::testing {
namespace {

namespace seq = nccl_seq;

const std::string& DumpPath() {
  static const std::string path = [] {
    std::string p = MakeTempPath("sentinel-ancestors");
    setenv("SENTINEL_DUMP", p.c_str(), 1);
    setenv("SENTINEL_EVENTS", "Coll,KernelCh", 0);  // the ctest registration may say otherwise
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

constexpr int kCollectives = 200;
constexpr int kChannels = 4;

// Replays kCollectives AllReduces on a new thread (one that never started a P2pApi); returns, per
// event type, the set of handles the plugin gave.
std::map<uint32_t, std::set<void*>> ReplayAndCollect(void* ctx, int mask) {
  std::map<uint32_t, std::set<void*>> handles;
  std::thread app([&] {
    auto r = std::make_unique<seq::Replayer>(mask, kChannels, 1);
    for (int i = 0; i < kCollectives; ++i) {
      r->Run(Host().v5, ctx);
      const seq::Sequence& s = r->sequence();
      for (int c = 0; c < s.n; ++c) {
        if (s.calls[c].op == seq::Op::kStart) {
          handles[s.calls[c].type].insert(r->handle(s.calls[c].handle));
        }
      }
    }
  });
  app.join();
  return handles;
}

TEST(AncestorSkip, CollectivesKeepTheirRecordsWhateverTheAncestorsGet) {
  ASSERT_TRUE(Host().ok()) << dlerror();
  const uint64_t comm = 0xA5CE5705ull;
  void* ctx = Host().InitV5(comm, 8, 3, "ancestors");
  const int mask = FakeHost::Mask();
  const bool inspector_mask = mask == (kSentinelProfileColl | kSentinelProfileKernelCh);
  auto handles = ReplayAndCollect(ctx, mask);
  Host().v5->finalize(ctx);

  // What the ancestors got.
  // One shared handle, never NULL: NCCL's graph seqNumber rule reads it (ancestor_skip.h).
  EXPECT_EQ(handles[kSentinelProfileGroup].size(), 1u);
  EXPECT_EQ(handles[kSentinelProfileGroup].count(nullptr), 0u);
  // GroupApi: kept with its own bit (or P2pApi's, on a thread that started a P2pApi: not this
  // one); CollApi: kept with its own bit only.
  const bool group_kept = (mask & kSentinelProfileGroupApi) != 0;
  const bool coll_api_kept = (mask & kSentinelProfileCollApi) != 0;
  if (inspector_mask || mask == static_cast<int>(plugin::kMaskDefault & 0xFFF)) {
    ASSERT_FALSE(group_kept || coll_api_kept);
  }
  if (group_kept) {
    EXPECT_EQ(handles[kSentinelProfileGroupApi].count(nullptr), 0u);
  } else {
    EXPECT_EQ(handles[kSentinelProfileGroupApi], std::set<void*>{nullptr});
  }
  if (coll_api_kept) {
    EXPECT_EQ(handles[kSentinelProfileCollApi].count(nullptr), 0u);
  } else {
    EXPECT_EQ(handles[kSentinelProfileCollApi], std::set<void*>{nullptr});
  }
  // KernelLaunch (with its own bit, as under `all`): no record reads it.
  if (mask & kSentinelProfileKernelLaunch) {
    EXPECT_EQ(handles[kSentinelProfileKernelLaunch], std::set<void*>{nullptr});
  }
  EXPECT_EQ(handles[kSentinelProfileColl].count(nullptr), 0u);
  EXPECT_EQ(handles[kSentinelProfileKernelCh].count(nullptr), 0u);

  // Every collective's record, complete, with its channels' kernel times.
  auto all = ReadDump(DumpPath());
  auto recs = Records(all, comm);
  ASSERT_EQ(recs.size(), static_cast<size_t>(kCollectives));
  for (int i = 0; i < kCollectives; ++i) {
    const auto& r = recs[static_cast<size_t>(i)];
    EXPECT_EQ(r["seq"], i);
    EXPECT_EQ(r["func"], "AllReduce");
    EXPECT_EQ(r["bytes"], 4 << 20);
    EXPECT_EQ(r["nchannels"], kChannels);
    EXPECT_EQ(r["rank"], 3);
    EXPECT_TRUE(HasFlag(r, "gpu_time_valid"));
    EXPECT_FALSE(HasFlag(r, "truncated"));
    // The Replayer's GPU timers: channel c runs [base + c, base + 5000 + c].
    EXPECT_EQ(r["gpu_end_ns"].get<int64_t>() - r["gpu_start_ns"].get<int64_t>(),
              5000 + kChannels - 1);
    // The API time comes from a kept CollApi.
    EXPECT_EQ(HasFlag(r, "api_time_valid"), coll_api_kept);
    if (!coll_api_kept) {
      EXPECT_EQ(r["api_ns"], 0);
    }
  }
  auto hb = LastHeartbeat(all);
  ASSERT_FALSE(hb.is_null());
  EXPECT_EQ(hb["stale_handles"], 0);  // the shared Group handle's stops are not stale
  EXPECT_EQ(hb["events_dropped_pool"], 0);
  EXPECT_EQ(hb["records_dropped_ring"], 0);
  EXPECT_EQ(hb["records_truncated"], 0);
}

// A CollApi answered with NULL (the default mask's) still tells its group that it holds a
// collective, which the AlltoAll recovery reads: nranks Sends and Recvs of one shape beside a
// collective are no AlltoAll, and without the collective they are. At the default mask a thread's
// groups are kept from its first P2pApi on, so its first P2P group stays plain Send/Recv (never a
// wrong AlltoAll); at `all` (GroupApi asked for) every group is kept. At masks without P2p or
// P2pApi there is nothing to recover.
TEST(AncestorSkip, ASkippedCollApiStillMakesItsGroupNoAlltoAll) {
  ASSERT_TRUE(Host().ok()) << dlerror();
  const uint64_t comm = 0xC011A2Aull;
  const int n = 2;
  void* ctx = Host().InitV5(comm, n, 0, "recovery");
  const int mask = FakeHost::Mask();
  if ((mask & kSentinelProfileP2p) == 0 || (mask & kSentinelProfileP2pApi) == 0) {
    Host().v5->finalize(ctx);
    GTEST_SKIP() << "no P2p or no P2pApi at mask 0x" << std::hex << mask;
  }
  FakeHost& h = Host();
  const bool every_group_kept = (mask & kSentinelProfileGroupApi) != 0;
  uint64_t coll_seq = 0;
  bool first = true;
  std::thread app([&] {  // a thread that never started a P2pApi
    for (bool with_coll : {false, true, false, true}) {
      void* grp = nullptr;
      {
        auto d = FakeHost::Descr(kSentinelProfileGroupApi, nullptr);
        d.group_api.group_depth = 1;
        grp = h.Start(ctx, d);
      }
      if (first && !every_group_kept) {
        EXPECT_EQ(grp, nullptr);  // the thread's first group, before any P2pApi
      } else {
        ASSERT_NE(grp, nullptr);
      }
      first = false;
      if (grp != nullptr) h.Record(grp, kSentinelStateGroupStartApiStop, nullptr);
      void* coll_api = nullptr;
      if (with_coll) {
        coll_api = h.CollApi(ctx, grp, "AllReduce", 64, "ncclFloat32");
        if (coll_api != nullptr) h.Stop(coll_api);  // NCCL skips the stop of a NULL handle
      }
      std::vector<void*> pieces;
      for (int p = 0; p < n; ++p) {
        for (const char* func : {"Send", "Recv"}) {
          pieces.push_back(h.P2pApi(ctx, grp, func, 32, "ncclFloat32"));
          ASSERT_NE(pieces.back(), nullptr);
          h.Stop(pieces.back());
        }
      }
      if (grp != nullptr) h.Record(grp, kSentinelStateGroupEndApiStart, nullptr);
      std::vector<void*> ops;
      if (with_coll) {
        ops.push_back(h.Coll(ctx, coll_api, 0, coll_seq++, "AllReduce", 64, "ncclFloat32", 1));
      }
      for (size_t i = 0; i < pieces.size(); ++i) {
        ops.push_back(h.P2p(ctx, pieces[i], 0, i % 2 == 0 ? "Send" : "Recv", 32, "ncclFloat32",
                            static_cast<int>(i / 2), 1));
      }
      for (void* op : ops) h.Stop(op);
      if (grp != nullptr) h.Stop(grp);
      for (void* op : ops) h.KernelChs(ctx, op, 1, 0, nullptr, nullptr);
    }
  });
  app.join();
  h.v5->finalize(ctx);
  auto recs = Records(ReadDump(DumpPath()), comm);
  ASSERT_EQ(recs.size(), 2u + 4 * 2 * n);
  int alltoall = 0, plain = 0, colls = 0;
  for (auto& r : recs) {
    if (r["func"] == "AllReduce") {
      ++colls;
    } else if (r["func"] == "AlltoAll") {
      ++alltoall;
      EXPECT_TRUE(HasFlag(r, "func_recovered")) << r.dump();
    } else {
      ++plain;
      EXPECT_FALSE(HasFlag(r, "func_recovered")) << r.dump();
    }
  }
  EXPECT_EQ(colls, 2);
  // The groups without a collective: the second always, the first where every group is kept.
  const int alltoall_groups = every_group_kept ? 2 : 1;
  EXPECT_EQ(alltoall, alltoall_groups * 2 * n);
  EXPECT_EQ(plain, (4 - alltoall_groups) * 2 * n);
}

}  // namespace
}  // namespace sentinel::testing
