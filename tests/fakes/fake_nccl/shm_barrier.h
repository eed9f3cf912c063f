// The real cross-process rendezvous of the fake NCCL: one shared-memory segment per communicator
// (/dev/shm/fake_nccl_<commHash>), holding per-rank arrival counters for collectives, per-pair
// counters for p2p, and the exchange slots of ncclCommSplit/Shrink. Ranks may be processes or
// threads; every field is a lock-free std::atomic, so the segment is process-shared as is.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace sentinel::testing {

constexpr int kMaxRanks = 64;

class ShmBarrier {
 public:
  // Creates or attaches the segment of `comm_hash`. Returns nullptr (and logs) on failure.
  static ShmBarrier* Attach(uint64_t comm_hash, int nranks);
  static std::string SegmentName(uint64_t comm_hash);
  // Detaches; the last of the nranks ranks to detach unlinks the segment.
  void Detach();

  enum class WaitResult { kOk, kTimeout, kAborted };
  // Collective number `ordinal` (1-based) of this rank: publish, then wait for every rank.
  WaitResult ArriveColl(int rank, uint64_t ordinal, double timeout_s,
                        const std::atomic<bool>& abort, std::vector<int>* missing);
  // P2p with `peer`, the `ordinal`-th operation between the pair on this side.
  WaitResult ArriveP2p(int rank, int peer, uint64_t ordinal, double timeout_s,
                       const std::atomic<bool>& abort);
  // The two halves of ArriveP2p: all p2p ops of one kernel arrive together (they progress
  // concurrently in NCCL), then each waits for its peer.
  void PublishP2p(int rank, int peer, uint64_t ordinal);
  WaitResult WaitP2p(int rank, int peer, uint64_t ordinal, double timeout_s,
                     const std::atomic<bool>& abort);
  // Split exchange number `split_count` among `participants` (old ranks); fills colors/keys.
  WaitResult ExchangeSplit(int rank, int split_count, int color, int key,
                           const std::vector<int>& participants, double timeout_s,
                           std::vector<int>* colors, std::vector<int>* keys);
  // External net plugin: the listen handle of `receiver` for its connection from `sender`,
  // published once per communicator (runtime connect), read by the sender before connect.
  static constexpr size_t kNetHandleSize = 128;
  void PublishNetHandle(int receiver, int sender, const void* handle);
  WaitResult WaitNetHandle(int receiver, int sender, void* handle, double timeout_s,
                           const std::atomic<bool>& abort);

 private:
  struct SplitSlot {
    std::atomic<int64_t> seq;
    std::atomic<int> color;
    std::atomic<int> key;
  };
  struct Area {
    std::atomic<int> attached;
    std::atomic<int> detached;
    std::atomic<uint64_t> coll[kMaxRanks];
    std::atomic<uint64_t> p2p[kMaxRanks][kMaxRanks];
    SplitSlot split[4][kMaxRanks];
    struct NetSlot {
      std::atomic<uint32_t> ready;
      char handle[kNetHandleSize];
    } net[kMaxRanks][kMaxRanks];  // [receiver][sender]
  };
  static_assert(std::atomic<uint64_t>::is_always_lock_free, "process-shared atomics");

  ShmBarrier(Area* area, uint64_t hash, int nranks) : area_(area), hash_(hash), nranks_(nranks) {}
  Area* area_;
  uint64_t hash_;
  int nranks_;
};

// Removes a segment by name (launcher clean-up).
void UnlinkSegment(uint64_t comm_hash);

}  // namespace sentinel::testing
