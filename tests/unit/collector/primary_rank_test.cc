// A process's primary rank (PrimaryRankBefore, metrics_snapshot.h), which decides what the default
// /metrics series budget carries and so what the job-wide Prometheus rules can judge: on a node of
// 8 GPUs with tensor parallel inside the node (8 ranks, one node) and pipeline and data parallel
// across nodes (fewer ranks than 8, one per node), each process exports its cross-node rank, not
// its tensor-parallel one, although the latter's communicator is the largest.
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/metrics_snapshot.h"
#include "collector/aggregate/state_order.h"
#include "collector/export/metrics_select.h"
#include "collector/export/prometheus_text.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

using testing::DeliverControl;
using testing::FakeClock;
using testing::MakeColl;

constexpr int kLocal = 8;
constexpr uint64_t kTp = 0x7000;      // 8 ranks, this node only
constexpr uint64_t kPpBase = 0x9100;  // pp.t: 4 ranks on 4 nodes, local rank t is stage 1
constexpr uint64_t kDpBase = 0x9200;  // dp.t: 2 ranks on 2 nodes, local rank t is replica 0

std::string Hex(uint64_t comm) { return absl::StrFormat("0x%016x", comm); }

void CommInit(Aggregator* agg, int client, uint64_t comm, int rank, int nranks, int nnodes) {
  SentinelWireCommInit init = testing::MakeCommInit(comm, rank, nranks);
  init.nnodes = nnodes;
  init.pid = static_cast<uint32_t>(100 + client);
  DeliverControl(agg, client, kSentinelWireCommInit, init);
}

class PrimaryRankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    agg_ = std::make_unique<Aggregator>(config_, &clock_);
    for (int t = 0; t < kLocal; ++t) {
      const int client = t + 1;
      agg_->NoteAccepted(client, static_cast<uint32_t>(100 + client), 0);
      agg_->OnHello(client, testing::MakeHello(static_cast<uint32_t>(100 + client)));
      CommInit(agg_.get(), client, kTp, t, kLocal, 1);
      CommInit(agg_.get(), client, kPpBase + static_cast<uint64_t>(t), 1, 4, 4);
      CommInit(agg_.get(), client, kDpBase + static_cast<uint64_t>(t), 0, 2, 2);
    }
    // A few collectives of each, so that every rank has per-rank series.
    for (uint64_t seq = 0; seq < 3; ++seq) {
      const int64_t at = clock_.MonoNs() + static_cast<int64_t>(seq) * 1000000;
      for (int t = 0; t < kLocal; ++t) {
        const auto tp = MakeColl(kTp, t, kLocal, seq, at + t * 1000, 1000000);
        agg_->OnRecords(t + 1, &tp, 1);
        const auto pp = MakeColl(kPpBase + static_cast<uint64_t>(t), 1, 4, seq, at, 1000000);
        agg_->OnRecords(t + 1, &pp, 1);
        const auto dp = MakeColl(kDpBase + static_cast<uint64_t>(t), 0, 2, seq, at, 1000000);
        agg_->OnRecords(t + 1, &dp, 1);
      }
    }
    clock_.Advance(1000000000);
    agg_->Tick();
  }

  MetricsSnapshot Snapshot() {
    MetricsSnapshot snap;
    agg_->Read([&](const State& s) { snap = TakeMetricsSnapshot(s); });
    return snap;
  }

  // The primary rank of every process, as (comm hash, rank).
  std::vector<std::pair<uint64_t, int32_t>> Primaries() {
    std::vector<std::pair<uint64_t, int32_t>> out;
    agg_->Read([&](const State& s) {
      for (const ProcessState* p : SortedProcesses(s)) {
        const RankState* r = PrimaryRank(s, *p);
        out.emplace_back(r ? r->comm_hash : 0, r ? r->rank : -1);
      }
    });
    return out;
  }

  Config config_;
  FakeClock clock_;
  std::unique_ptr<Aggregator> agg_;
};

TEST_F(PrimaryRankTest, CrossNodeCommunicatorBeforeLargerNodeLocalOne) {
  // Each process's primary rank: its pipeline rank (4 ranks over 4 nodes), not its TP rank (8
  // ranks, one node) nor its DP rank (2 nodes: fewer ranks than the pipeline).
  const auto primaries = Primaries();
  ASSERT_EQ(primaries.size(), static_cast<size_t>(kLocal));
  for (const auto& [comm, rank] : primaries) {
    EXPECT_GE(comm, kPpBase) << Hex(comm);
    EXPECT_LT(comm, kPpBase + kLocal) << Hex(comm);
    EXPECT_EQ(rank, 1);
  }
  // The default series budget carries exactly those communicators.
  const MetricsSnapshot snap = Snapshot();
  const auto exported = ExportedComms(snap, MetricsOptions{});
  EXPECT_FALSE(exported.contains(kTp)) << "the node-local TP communicator should not be exported";
  for (int t = 0; t < kLocal; ++t) {
    EXPECT_TRUE(exported.contains(kPpBase + static_cast<uint64_t>(t))) << t;
    EXPECT_FALSE(exported.contains(kDpBase + static_cast<uint64_t>(t))) << t;
  }
  EXPECT_EQ(exported.size(), static_cast<size_t>(kLocal));
  // And /metrics shows the pipeline ranks' series (what the job-wide rules read), none of TP's.
  const std::string text = RenderPrometheus(snap, MetricsOptions{});
  EXPECT_EQ(text.find("comm=\"" + Hex(kTp) + "\""), std::string::npos) << text;
  EXPECT_NE(
      text.find("sentinel_rank_last_seq{comm=\"" + Hex(kPpBase) + "\",uid=\"0\",rank=\"1\"} 2\n"),
      std::string::npos)
      << text;
}

TEST_F(PrimaryRankTest, CrossNodeCommunicatorThatEndedStaysForItsRetentionOnly) {
  // Rank t's pipeline communicator ends: its DP rank (still spanning nodes) becomes primary, and
  // the ended pipeline one is still exported until its series retention passes.
  for (int t = 0; t < kLocal; ++t) {
    SentinelWireCommEnd end{};
    end.comm_hash = kPpBase + static_cast<uint64_t>(t);
    end.rank = 1;
    DeliverControl(agg_.get(), t + 1, kSentinelWireCommEnd, end);
  }
  agg_->Tick();
  MetricsOptions options;
  options.retention_ns = 5000000000LL;
  auto exported = ExportedComms(Snapshot(), options);
  EXPECT_TRUE(exported.contains(kPpBase));
  EXPECT_TRUE(exported.contains(kDpBase));
  EXPECT_FALSE(exported.contains(kTp));
  clock_.Advance(6000000000LL);
  agg_->Tick();
  exported = ExportedComms(Snapshot(), options);
  EXPECT_FALSE(exported.contains(kPpBase));
  EXPECT_TRUE(exported.contains(kDpBase));
  EXPECT_FALSE(exported.contains(kTp));
}

// A hang: process 1's data-parallel rank has been inside collective #4 (kernel started, AllReduce
// 16 MiB bf16) for 6 s. Its communicator is exported whatever the budget, with what the rank is
// stuck on; so are the process's other communicators, each saying it waits in the data-parallel
// one (the wait-cycle rule pairs such ranks across nodes). The other processes export as before.
TEST_F(PrimaryRankTest, CommunicatorsOfAStuckProcessAreExportedWithWhatItIsStuckOn) {
  const int64_t entered = clock_.MonoNs();
  auto stuck_frame = [&] {
    SentinelWireInFlight in =
        testing::MakeInFlight(kDpBase, 0, 2, 4, 4, 3, entered, clock_.MonoNs());
    in.pid = 101;
    in.flags = kSentinelInFlightSignature;
    in.oldest_bytes = 16u << 20;
    in.oldest_datatype = 9;  // ncclBfloat16
    in.oldest_root = -1;
    DeliverControl(agg_.get(), 1, kSentinelWireInFlight, in);
    // Its other communicators, idle between collectives (the plugin sends every communicator's
    // state once a second).
    for (const auto& [comm, rank, nranks] :
         {std::tuple{kTp, 0, kLocal}, std::tuple{kPpBase, 1, 4}}) {
      SentinelWireInFlight idle =
          testing::MakeInFlight(comm, rank, nranks, 2, 2, 2, 0, clock_.MonoNs());
      idle.pid = 101;
      DeliverControl(agg_.get(), 1, kSentinelWireInFlight, idle);
    }
  };
  stuck_frame();
  clock_.Advance(4000000000LL);
  stuck_frame();
  agg_->Tick();
  // 4 s: not yet (a long collective is not a hang).
  EXPECT_FALSE(ExportedComms(Snapshot(), MetricsOptions{}).contains(kDpBase));
  clock_.Advance(2000000000LL);
  stuck_frame();
  agg_->Tick();
  const MetricsSnapshot snap = Snapshot();
  const auto exported = ExportedComms(snap, MetricsOptions{});
  EXPECT_TRUE(exported.contains(kDpBase));
  EXPECT_TRUE(exported.contains(kTp));
  EXPECT_TRUE(exported.contains(kPpBase));
  EXPECT_FALSE(exported.contains(kDpBase + 1));  // another process: its primary only
  EXPECT_EQ(exported.size(), static_cast<size_t>(kLocal) + 2);
  const std::string text = RenderPrometheus(snap, MetricsOptions{});
  const std::string dp = "comm=\"" + Hex(kDpBase) + "\",uid=\"0\",rank=\"0\"";
  EXPECT_NE(text.find("sentinel_inflight_stuck_ordinal{" + dp + "} 4\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("sentinel_inflight_stuck_op_bytes{" + dp +
                      ",func=\"AllReduce\",datatype=\"bf16\"} 16777216\n"),
            std::string::npos)
      << text;
  // The digest of AllReduce 16 MiB bf16 (op_signature_test pins it), exactly.
  EXPECT_NE(text.find("sentinel_inflight_stuck_signature{" + dp + "} 149101467473106\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sentinel_inflight_waiting_in{comm=\"" + Hex(kPpBase) +
                      "\",uid=\"0\",rank=\"1\",in_comm=\"" + Hex(kDpBase) + "\"} 4\n"),
            std::string::npos)
      << text;
  // Nobody else is stuck: no other rank has these series.
  EXPECT_EQ(text.find("sentinel_inflight_stuck_ordinal{comm=\"" + Hex(kPpBase)), std::string::npos);
  EXPECT_EQ(text.find("sentinel_inflight_waiting_in{comm=\"" + Hex(kDpBase + 1)),
            std::string::npos);
}

// The order itself: spanning first, then the largest, then the lowest hash; a node count of 0 (not
// known) or 1 is node-local.
TEST(PrimaryRankBeforeTest, SpanningThenLargestThenLowestHash) {
  using K = PrimaryRankKey;
  EXPECT_TRUE(PrimaryRankBefore(K{2, 2, 9}, K{1, 8, 1}));
  EXPECT_FALSE(PrimaryRankBefore(K{1, 8, 1}, K{2, 2, 9}));
  EXPECT_FALSE(PrimaryRankBefore(K{4, 4, 9}, K{2, 16, 1}));  // among spanning: the largest
  EXPECT_TRUE(PrimaryRankBefore(K{2, 16, 1}, K{4, 4, 9}));
  EXPECT_TRUE(PrimaryRankBefore(K{2, 4, 1}, K{4, 4, 9}));  // same size: lowest hash
  EXPECT_FALSE(PrimaryRankBefore(K{4, 4, 9}, K{2, 4, 1}));
  EXPECT_TRUE(PrimaryRankBefore(K{0, 8, 1}, K{1, 4, 0}));  // unknown counts as one node
  EXPECT_TRUE(PrimaryRankBefore(K{2, 2, 9}, K{0, 64, 1}));
  // A world communicator spanning the job still comes first (the usual case before: unchanged).
  EXPECT_TRUE(PrimaryRankBefore(K{8, 64, 5}, K{1, 8, 1}));
}

TEST(PrimaryRankBeforeTest, OnTheSnapshotsRankRef) {
  MetricsSnapshot::RankRef local{0x1, 0, 8, true, 1};
  MetricsSnapshot::RankRef cross{0x2, 0, 2, true, 2};
  EXPECT_TRUE(PrimaryRankBefore(cross, local));
  EXPECT_FALSE(PrimaryRankBefore(local, cross));
}

// Two communicators that span other nodes with as many ranks (a pipeline and a data-parallel one
// at 4 nodes as 2 stages x 2 replicas) differ only by hash, which ranks them differently on
// different ranks of one communicator: both are exported, so every rank of each exports it and
// the job-wide rules see it from every node. A smaller or node-local one is not.
TEST(ExportedCommsTest, ACommunicatorThatTiesThePrimaryButForTheHashIsExportedToo) {
  MetricsSnapshot snap;
  snap.now_mono_ns = 1;
  for (uint64_t hash : {0x10ULL, 0x20ULL, 0x30ULL, 0x40ULL}) {
    MetricsSnapshot::Comm comm;
    comm.hash = hash;
    comm.active_count = 1;
    snap.comms.push_back(comm);
  }
  MetricsSnapshot::Process process;
  process.client = 1;
  process.ranks = {
      {0x20, 0, 2, true, 2}, {0x10, 0, 2, true, 2}, {0x30, 0, 8, true, 1}, {0x40, 0, 1, true, 2}};
  snap.processes.push_back(process);
  const auto exported = ExportedComms(snap, MetricsOptions{});
  EXPECT_TRUE(exported.contains(0x10));   // the primary: spanning, 2 ranks, the lower hash
  EXPECT_TRUE(exported.contains(0x20));   // ties it but for the hash
  EXPECT_FALSE(exported.contains(0x30));  // node-local, though larger
  EXPECT_FALSE(exported.contains(0x40));  // spanning, but smaller
  EXPECT_EQ(exported.size(), 2u);
}

}  // namespace
}  // namespace sentinel::collector
