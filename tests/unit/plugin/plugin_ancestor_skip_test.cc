// The ancestors NCCL emits around every collective that the mask did not ask for
// (plugin/core/ancestor_skip.h), driven through the BUILT plugin with the exact calls NCCL 2.28.9
// makes (tests/fakes/fake_nccl/nccl_call_sequence.h): at Coll | KernelCh GroupApi and CollApi are
// answered with NULL and Group with one shared handle, while every Coll still gets its record with
// the kernel times of all its channels, nothing is counted stale or dropped, and the in-flight
// count returns to zero. At the default mask and at `all` (the ctest registrations with
// SENTINEL_EVENTS=default and =all) GroupApi and CollApi keep their slots and the records their
// API time, as before; Group and KernelLaunch, which no record reads, are answered at every mask.
#include <gtest/gtest.h>

#include <memory>
#include <set>

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

// Replays kCollectives AllReduces; returns, per event type, the set of handles the plugin gave.
std::map<uint32_t, std::set<void*>> ReplayAndCollect(void* ctx, int mask) {
  auto r = std::make_unique<seq::Replayer>(mask, kChannels, 1);
  std::map<uint32_t, std::set<void*>> handles;
  for (int i = 0; i < kCollectives; ++i) {
    r->Run(Host().v5, ctx);
    const seq::Sequence& s = r->sequence();
    for (int c = 0; c < s.n; ++c) {
      if (s.calls[c].op == seq::Op::kStart) {
        handles[s.calls[c].type].insert(r->handle(s.calls[c].handle));
      }
    }
  }
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
  if (inspector_mask) {
    EXPECT_EQ(handles[kSentinelProfileGroupApi], std::set<void*>{nullptr});
    EXPECT_EQ(handles[kSentinelProfileCollApi], std::set<void*>{nullptr});
  } else {
    EXPECT_EQ(handles[kSentinelProfileGroupApi].count(nullptr), 0u);
    EXPECT_EQ(handles[kSentinelProfileCollApi].count(nullptr), 0u);
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
    // The API time comes from CollApi, which only the default mask keeps.
    EXPECT_EQ(HasFlag(r, "api_time_valid"), !inspector_mask);
  }
  auto hb = LastHeartbeat(all);
  ASSERT_FALSE(hb.is_null());
  EXPECT_EQ(hb["stale_handles"], 0);  // the shared Group handle's stops are not stale
  EXPECT_EQ(hb["events_dropped_pool"], 0);
  EXPECT_EQ(hb["records_dropped_ring"], 0);
  EXPECT_EQ(hb["records_truncated"], 0);
}

}  // namespace
}  // namespace sentinel::testing
