// The fake NCCL hangs where NCCL hangs although no rank stopped: an operation completes only when
// every rank posted a compatible one at the same position (function, count and datatype as NCCL
// compares them, root, reduction; for p2p the size per pair, direction and position). Ranks are
// in-process communicators of one clique (ncclCommInitAll), each with its own progress thread;
// a hung wait neither completes nor fails, and only ncclCommAbort ends it.
#include <atomic>
#include <chrono>
#include <functional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "fake_nccl.h"
#include "tests/integration/fake_nccl/test_util.h"

namespace sentinel::testing {
namespace {

constexpr int kObserveMs = 1500;  // long enough for a compatible collective to complete many times
constexpr int kCompleteMs = 30000;  // generous: a loaded 2-core machine

char g_buf[1 << 16];  // the fake never touches buffers

// One clique of in-process ranks, and one thread per rank synchronizing its stream.
class Clique {
 public:
  explicit Clique(int n)
      : comms_(static_cast<size_t>(n), nullptr), results_(static_cast<size_t>(n)) {
    EXPECT_EQ(ncclCommInitAll(comms_.data(), n, nullptr), ncclSuccess);
    for (auto& r : results_) r.store(kWaiting);
  }
  ~Clique() {
    if (!ended_) AbortAll();
  }
  ncclComm_t operator[](int r) const { return comms_[static_cast<size_t>(r)]; }
  int size() const { return static_cast<int>(comms_.size()); }
  // The test ended the communicators itself.
  void MarkEnded() { ended_ = true; }

  // Each rank's thread waits for its stream (fakeNcclStreamSynchronize), keeping the result.
  void StartSyncs() {
    for (size_t r = 0; r < comms_.size(); ++r) {
      threads_.emplace_back([this, r] { results_[r].store(fakeNcclStreamSynchronize(comms_[r])); });
    }
  }
  int Returned() const {
    int n = 0;
    for (const auto& r : results_) n += r.load() != kWaiting ? 1 : 0;
    return n;
  }
  int Result(int r) const { return results_[static_cast<size_t>(r)].load(); }
  bool AnyAsyncError() const {
    for (ncclComm_t c : comms_) {
      ncclResult_t state = ncclSuccess;
      if (ncclCommGetAsyncError(c, &state) != ncclSuccess || state != ncclSuccess) return true;
    }
    return false;
  }
  // Completed streams are destroyed, hung ones aborted (which wakes their sync threads).
  void AbortAll() {
    ended_ = true;
    for (ncclComm_t c : comms_) ncclCommAbort(c);
    for (std::thread& t : threads_) t.join();
  }
  void DestroyAll() {
    ended_ = true;
    for (std::thread& t : threads_) t.join();
    for (ncclComm_t c : comms_) ncclCommDestroy(c);
  }

  static constexpr int kWaiting = -1;

 private:
  std::vector<ncclComm_t> comms_;
  std::vector<std::atomic<int>> results_;
  std::vector<std::thread> threads_;
  bool ended_ = false;
};

// The ranks' streams all complete (successfully) within the generous deadline.
void ExpectCompletes(Clique& c) {
  c.StartSyncs();
  EXPECT_TRUE(Eventually([&] { return c.Returned() == c.size(); }, kCompleteMs));
  for (int r = 0; r < c.size(); ++r) {
    EXPECT_EQ(c.Result(r), static_cast<int>(ncclSuccess)) << "rank " << r;
  }
  c.DestroyAll();
}

// No rank's stream completes or fails while we watch; an abort then ends every wait.
void ExpectHangsUntilAbort(Clique& c) {
  c.StartSyncs();
  std::this_thread::sleep_for(std::chrono::milliseconds(kObserveMs));
  EXPECT_EQ(c.Returned(), 0) << "a rank's operations completed although the ranks disagree";
  EXPECT_FALSE(c.AnyAsyncError()) << "NCCL reports no error for a mismatch: it just waits";
  c.AbortAll();
  for (int r = 0; r < c.size(); ++r) {
    EXPECT_EQ(c.Result(r), static_cast<int>(ncclRemoteError)) << "rank " << r;
  }
}

TEST(FakeNcclMismatchTest, CompatibleOperationsComplete) {
  Clique c(4);
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(ncclAllReduce(g_buf, g_buf, 1024, ncclFloat32, ncclSum, c[r], nullptr), ncclSuccess);
  }
  // AllGather and Broadcast compare bytes (NCCL rewrites them as ncclInt8): 1024 float32 on some
  // ranks and 4096 int8 on the others agree.
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(r < 2 ? ncclAllGather(g_buf, g_buf, 1024, ncclFloat32, c[r], nullptr)
                    : ncclAllGather(g_buf, g_buf, 4096, ncclInt8, c[r], nullptr),
              ncclSuccess);
  }
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(r == 1 ? ncclBroadcast(g_buf, g_buf, 1024, ncclInt8, 2, c[r], nullptr)
                     : ncclBroadcast(g_buf, g_buf, 256, ncclFloat32, 2, c[r], nullptr),
              ncclSuccess);
  }
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(ncclReduce(g_buf, g_buf, 512, ncclBfloat16, ncclMax, 1, c[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclReduceScatter(g_buf, g_buf, 64, ncclFloat64, ncclAvg, c[r], nullptr),
              ncclSuccess);
  }
  // A ring of grouped Send/Recv, then an AlltoAll.
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclSend(g_buf, 100, ncclFloat32, (r + 1) % 4, c[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclRecv(g_buf, 100, ncclFloat32, (r + 3) % 4, c[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  }
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(ncclAlltoAll(g_buf, g_buf, 32, ncclFloat32, c[r], nullptr), ncclSuccess);
  }
  ExpectCompletes(c);
}

TEST(FakeNcclMismatchTest, ManyP2pWithOnePeerMatchByPosition) {
  // Seven sends of different sizes from rank 0 to rank 1 in one group (more than the signature
  // ring holds at once), each matched by rank 1's receive at the same position; the sizes in
  // bytes agree although the datatypes differ.
  Clique c(2);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (size_t i = 1; i <= 7; ++i) {
    ASSERT_EQ(ncclSend(g_buf, 256 * i, ncclFloat32, 1, c[0], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (size_t i = 1; i <= 7; ++i) {
    ASSERT_EQ(ncclRecv(g_buf, 1024 * i, ncclInt8, 0, c[1], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ExpectCompletes(c);
}

// One kind of disagreement: rank 3 of 4 issues `odd`, the others `usual`.
struct MismatchCase {
  const char* name;
  std::function<ncclResult_t(ncclComm_t)> usual;
  std::function<ncclResult_t(ncclComm_t)> odd;
};

void PrintTo(const MismatchCase& c, std::ostream* os) { *os << c.name; }

class CollectiveMismatchTest : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(CollectiveMismatchTest, HangsWithoutErrorUntilAbort) {
  Clique c(4);
  // One compatible collective first: the mismatch is at position 2, not at the start.
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(ncclAllReduce(g_buf, g_buf, 64, ncclFloat32, ncclSum, c[r], nullptr), ncclSuccess);
  }
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(r == 3 ? GetParam().odd(c[r]) : GetParam().usual(c[r]), ncclSuccess);
  }
  ExpectHangsUntilAbort(c);
}

ncclResult_t AllReduce(ncclComm_t c, size_t count, ncclDataType_t t, ncclRedOp_t op) {
  return ncclAllReduce(g_buf, g_buf, count, t, op, c, nullptr);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, CollectiveMismatchTest,
    ::testing::Values(
        MismatchCase{"func", [](ncclComm_t c) { return AllReduce(c, 1024, ncclFloat32, ncclSum); },
                     [](ncclComm_t c) {
                       return ncclAllGather(g_buf, g_buf, 1024, ncclFloat32, c, nullptr);
                     }},
        MismatchCase{"count", [](ncclComm_t c) { return AllReduce(c, 1024, ncclFloat32, ncclSum); },
                     [](ncclComm_t c) { return AllReduce(c, 2048, ncclFloat32, ncclSum); }},
        MismatchCase{"dtype", [](ncclComm_t c) { return AllReduce(c, 1024, ncclFloat32, ncclSum); },
                     [](ncclComm_t c) { return AllReduce(c, 1024, ncclBfloat16, ncclSum); }},
        MismatchCase{"redop", [](ncclComm_t c) { return AllReduce(c, 1024, ncclFloat32, ncclSum); },
                     [](ncclComm_t c) { return AllReduce(c, 1024, ncclFloat32, ncclMax); }},
        MismatchCase{"broadcast_root",
                     [](ncclComm_t c) {
                       return ncclBroadcast(g_buf, g_buf, 1024, ncclFloat32, 0, c, nullptr);
                     },
                     [](ncclComm_t c) {
                       return ncclBroadcast(g_buf, g_buf, 1024, ncclFloat32, 1, c, nullptr);
                     }},
        MismatchCase{"reduce_root",
                     [](ncclComm_t c) {
                       return ncclReduce(g_buf, g_buf, 1024, ncclFloat32, ncclSum, 0, c, nullptr);
                     },
                     [](ncclComm_t c) {
                       return ncclReduce(g_buf, g_buf, 1024, ncclFloat32, ncclSum, 2, c, nullptr);
                     }},
        MismatchCase{
            "allgather_bytes",
            [](ncclComm_t c) { return ncclAllGather(g_buf, g_buf, 1024, ncclFloat32, c, nullptr); },
            [](ncclComm_t c) { return ncclAllGather(g_buf, g_buf, 1024, ncclInt8, c, nullptr); }}),
    [](const ::testing::TestParamInfo<MismatchCase>& info) {
      return std::string(info.param.name);
    });

TEST(FakeNcclMismatchTest, P2pSizeMismatchHangs) {
  Clique c(2);
  ASSERT_EQ(ncclSend(g_buf, 1024, ncclFloat32, 1, c[0], nullptr), ncclSuccess);  // 4096 bytes
  ASSERT_EQ(ncclRecv(g_buf, 2048, ncclInt8, 0, c[1], nullptr), ncclSuccess);
  ExpectHangsUntilAbort(c);
}

TEST(FakeNcclMismatchTest, SendsWithoutReceivesHang) {
  // A send matches only a receive of its peer: two ranks that both send first wait forever.
  Clique c(2);
  ASSERT_EQ(ncclSend(g_buf, 1024, ncclFloat32, 1, c[0], nullptr), ncclSuccess);
  ASSERT_EQ(ncclSend(g_buf, 1024, ncclFloat32, 0, c[1], nullptr), ncclSuccess);
  ExpectHangsUntilAbort(c);
}

TEST(FakeNcclMismatchTest, TwoCommunicatorCycleHangs) {
  // Rank 0 waits in comm A for rank 1, which waits in comm B for rank 0: each rank issues on its
  // first communicator and synchronizes before it issues on the second.
  Clique a(2);
  Clique b(2);
  std::atomic<int> finished{0};
  auto rank = [&](ncclComm_t first, ncclComm_t second) {
    if (ncclAllReduce(g_buf, g_buf, 1024, ncclFloat32, ncclSum, first, nullptr) != ncclSuccess ||
        fakeNcclStreamSynchronize(first) != ncclSuccess) {
      return;  // aborted: `second` may be gone
    }
    if (ncclAllReduce(g_buf, g_buf, 1024, ncclFloat32, ncclSum, second, nullptr) == ncclSuccess &&
        fakeNcclStreamSynchronize(second) == ncclSuccess) {
      finished.fetch_add(1);
    }
  };
  std::thread rank0(rank, a[0], b[0]);
  std::thread rank1(rank, b[1], a[1]);
  std::this_thread::sleep_for(std::chrono::milliseconds(kObserveMs));
  EXPECT_EQ(finished.load(), 0);
  EXPECT_FALSE(a.AnyAsyncError() || b.AnyAsyncError());
  // The communicators the ranks wait in go first, which ends their threads; then the others.
  ncclCommAbort(a[0]);
  ncclCommAbort(b[1]);
  rank0.join();
  rank1.join();
  ncclCommAbort(a[1]);
  ncclCommAbort(b[0]);
  a.MarkEnded();
  b.MarkEnded();
}

}  // namespace
}  // namespace sentinel::testing
