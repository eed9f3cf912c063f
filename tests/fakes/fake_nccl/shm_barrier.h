// The real cross-process rendezvous of the fake NCCL: one shared-memory segment per communicator
// (/dev/shm/fake_nccl_<commHash>), holding per-rank arrival counters and operation signatures for
// collectives, per-pair, per-direction signature rings for p2p, and the exchange slots of
// ncclCommSplit/Shrink. An operation completes only when every rank it needs posted a compatible
// one at the same position (op_signature.h); otherwise everyone waits, as in NCCL. Ranks may be
// processes or threads; every field is a lock-free std::atomic, so the segment is process-shared
// as is.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fakes/fake_nccl/op_signature.h"

namespace sentinel::testing {

constexpr int kMaxRanks = 64;

// One per communicator per process (the ranks' objects share the segment). Collective and p2p
// calls only from the communicator's progress thread; the split and net-handle calls from any.
class ShmBarrier {
 public:
  // Creates or attaches the segment of `comm_hash`. Returns nullptr (and logs) on failure.
  static ShmBarrier* Attach(uint64_t comm_hash, int nranks);
  static std::string SegmentName(uint64_t comm_hash);
  // Detaches; the last of the nranks ranks to detach unlinks the segment.
  void Detach();

  enum class WaitResult { kOk, kTimeout, kAborted };
  // Why a wait that timed out had not ended: the ranks that never posted the position, and the
  // first rank whose signature there differs from this rank's, with both signatures.
  struct WaitReport {
    std::vector<int> missing;
    std::string disagreement;  // "rank 3 posted AllGather ... where rank 0 posted AllReduce ..."
    // "waiting for rank(s) 2[; <disagreement>]" or "waiting: <disagreement>".
    std::string Text() const;
  };
  // Collective number `ordinal` (1-based) of this rank, with its signature: publish both, then
  // wait until every rank posted a compatible collective at `ordinal`. Without one the wait goes
  // on (no error, no completion) until the timeout (opt-in) or `abort`. `report` may be null.
  WaitResult ArriveColl(int rank, uint64_t ordinal, const OpSignature& sig, double timeout_s,
                        const std::atomic<bool>& abort, WaitReport* report);
  // P2p, matched per (pair, direction, position) as NCCL matches them: this rank's n-th send to
  // `peer` completes only with the peer's n-th receive from this rank of the same size, and the
  // reverse. PostP2p numbers this rank's next operation with `peer` in its direction and
  // publishes it; all p2p ops of one kernel are posted before any waits (they progress
  // concurrently in NCCL, so a ring of Send/Recv pairs cannot deadlock); WaitP2p then waits, in
  // the order they were posted. Both only from the communicator's progress thread.
  uint64_t PostP2p(int rank, int peer, bool is_send, const OpSignature& sig);
  WaitResult WaitP2p(int rank, int peer, bool is_send, uint64_t ordinal, const OpSignature& sig,
                     double timeout_s, const std::atomic<bool>& abort, WaitReport* report);
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
  // Signature rings: a slot is reused only when no rank can still read its old position
  // (shm_barrier.cc, ArriveColl and MayPublishP2p, say why).
  static constexpr int kCollSlots = 4;
  static constexpr int kP2pSlots = 4;
  struct Area {
    std::atomic<int> attached;
    std::atomic<int> detached;
    std::atomic<uint64_t> coll[kMaxRanks];  // the last collective position each rank posted
    SignatureSlot coll_sig[kMaxRanks][kCollSlots];
    SignatureSlot p2p_sig[2][kMaxRanks][kMaxRanks][kP2pSlots];  // [is_recv][rank][peer]
    SplitSlot split[4][kMaxRanks];
    struct NetSlot {
      std::atomic<uint32_t> ready;
      char handle[kNetHandleSize];
    } net[kMaxRanks][kMaxRanks];  // [receiver][sender]
  };
  static_assert(std::atomic<uint64_t>::is_always_lock_free, "process-shared atomics");

  ShmBarrier(Area* area, uint64_t hash, int nranks);
  bool MayPublishP2p(int dir, int peer, uint64_t ordinal) const;
  Area* area_;
  uint64_t hash_;
  int nranks_;
  // This rank's p2p positions per [direction][peer] (progress thread only): posted, published to
  // the ring, and completed.
  std::vector<uint64_t> p2p_posted_[2];
  std::vector<uint64_t> p2p_published_[2];
  std::vector<uint64_t> p2p_done_[2];
};

// Removes a segment by name (launcher clean-up).
void UnlinkSegment(uint64_t comm_hash);

}  // namespace sentinel::testing
