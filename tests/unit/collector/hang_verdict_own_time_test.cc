// The hang verdict sentineld sends (wire type 13) carries, for each waiting rank, that rank's own
// time inside the stuck collective, measured from the entry time that rank reported: the plugin
// checks it against its own clock with only a fixed tolerance (plugin/entry/hang_abort.h).
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "collector/aggregate/aggregator.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

using testing::FakeClock;
using testing::MakeCommInit;

constexpr uint64_t kComm = 0xC0FFEE0000000001ULL;
constexpr int64_t kSec = 1000000000;

class HangVerdictOwnTimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.hang_timeout_ns = 30 * kSec;
    agg_ = std::make_unique<Aggregator>(config_, &clock_);
  }
  template <typename T>
  void Control(int client, uint16_t type, const T& body) {
    testing::DeliverControl(agg_.get(), client, type, body);
  }
  // Ranks 0..n-1 of kComm, each its own process on client rank + 1 (pid 500 + rank).
  void ConnectRanks(int n) {
    for (int r = 0; r < n; ++r) {
      agg_->NoteAccepted(r + 1, static_cast<uint32_t>(500 + r), 0);
      agg_->OnHello(r + 1, testing::MakeHello(9));
      Control(r + 1, kSentinelWireCommInit, MakeCommInit(kComm, r, n));
    }
  }
  void InFlight(int client, int rank, int nranks, uint64_t enq, uint64_t done, int64_t since) {
    Control(client, kSentinelWireInFlight,
            testing::MakeInFlight(kComm, rank, nranks, enq, enq, done, since, clock_.MonoNs()));
  }

  Config config_;
  FakeClock clock_;
  std::unique_ptr<Aggregator> agg_;
};

// Ranks 0, 1 and 2 entered collective #12 at 0 s, 4 s and 9 s; rank 3 never launched it. Each
// waiting rank's frame claims exactly its own time, so each can confirm it by its own clock.
// Before, all three were told rank 0's (the longest) time: rank 2's claim was 9 s over its own.
TEST_F(HangVerdictOwnTimeTest, EachWaitingRankIsToldItsOwnTime) {
  constexpr int kRanks = 4;
  ConnectRanks(kRanks);
  const int64_t t0 = clock_.MonoNs();
  const std::map<int, int64_t> entered = {{0, t0}, {1, t0 + 4 * kSec}, {2, t0 + 9 * kSec}};
  std::vector<std::pair<int, std::string>> frames;
  for (int s = 0; s < 60 && frames.empty(); ++s) {
    for (const auto& [rank, since] : entered) {
      const bool inside = clock_.MonoNs() >= since;
      InFlight(rank + 1, rank, kRanks, inside ? 12 : 11, 11, since);
    }
    InFlight(4, 3, kRanks, 11, 11, 0);
    clock_.Advance(kSec);
    agg_->Tick();
    frames = agg_->TakeOutbound();
  }
  const int64_t now = clock_.MonoNs();
  ASSERT_EQ(frames.size(), 3u) << "the 3 waiting ranks are told";
  for (const auto& [client, bytes] : frames) {
    ASSERT_EQ(bytes.size(), sizeof(SentinelWireFrameHeader) + sizeof(SentinelWireHangVerdict));
    SentinelWireHangVerdict w{};
    std::memcpy(&w, bytes.data() + sizeof(SentinelWireFrameHeader), sizeof(w));
    ASSERT_EQ(client, w.rank + 1) << "a rank's verdict goes to its own connection";
    ASSERT_TRUE(entered.count(w.rank)) << w.rank;
    EXPECT_EQ(w.ordinal, 12u);
    EXPECT_EQ(w.waiting_ns, now - entered.at(w.rank)) << "rank " << w.rank;
  }
}

// Rank 0 (the first to connect) issues AllGather, its first (NCCL seq 0), where ranks 1-3 issue
// AllReduce seq 11 as collective #12. Every rank is told the collective as it issued it: the
// plugin refuses a verdict whose seq is not its own oldest's. Before, the three AllReduce ranks
// were told rank 0's seq (taken from whichever stuck rank came first) and each refused it.
TEST_F(HangVerdictOwnTimeTest, EachRankIsToldTheCollectiveAsItIssuedIt) {
  constexpr int kRanks = 4;
  ConnectRanks(kRanks);
  const int64_t t0 = clock_.MonoNs();
  std::vector<std::pair<int, std::string>> frames;
  for (int s = 0; s < 60 && frames.empty(); ++s) {
    for (int r = 0; r < kRanks; ++r) {
      SentinelWireInFlight in =
          testing::MakeInFlight(kComm, r, kRanks, 12, 12, 11, t0, clock_.MonoNs());
      in.flags |= kSentinelInFlightSignature;
      in.oldest_func = r == 0 ? kSentinelFuncAllGather : kSentinelFuncAllReduce;
      in.oldest_seq = r == 0 ? 0 : 11;
      in.oldest_bytes = r == 0 ? (4u << 20) : (16u << 20);
      in.oldest_datatype = 9;
      in.oldest_root = -1;
      Control(r + 1, kSentinelWireInFlight, in);
    }
    clock_.Advance(kSec);
    agg_->Tick();
    frames = agg_->TakeOutbound();
  }
  ASSERT_EQ(frames.size(), 4u) << "every rank inside the collective is told, rank 0 too";
  for (const auto& [client, bytes] : frames) {
    ASSERT_EQ(bytes.size(), sizeof(SentinelWireFrameHeader) + sizeof(SentinelWireHangVerdict));
    SentinelWireHangVerdict w{};
    std::memcpy(&w, bytes.data() + sizeof(SentinelWireFrameHeader), sizeof(w));
    EXPECT_EQ(w.ordinal, 12u);
    EXPECT_EQ(w.seq, w.rank == 0 ? 0u : 11u) << "rank " << w.rank;
    EXPECT_EQ(w.func, w.rank == 0 ? kSentinelFuncAllGather : kSentinelFuncAllReduce)
        << "rank " << w.rank;
    EXPECT_NE(std::string(w.culprits).find("rank 0 mismatched"), std::string::npos) << w.culprits;
  }
}

}  // namespace
}  // namespace sentinel::collector
