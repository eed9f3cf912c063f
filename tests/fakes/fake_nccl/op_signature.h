// What every rank must agree on for an operation at one position of a communicator to complete,
// as NCCL needs it (function, element count and datatype, root, reduction; for p2p the bytes
// between one sender and its receiver), and the slot of the rendezvous segment that publishes a
// rank's signature to the other processes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace sentinel::testing {

// ncclFunc_t numbering, as the profiler descriptors carry it.
enum FuncId {
  kBroadcast = 0,
  kReduce = 1,
  kAllGather = 2,
  kReduceScatter = 3,
  kAllReduce = 4,
  kSend = 6,
  kRecv = 7,
};
const char* FuncName(int func);

// One rank's operation at one position. Fields NCCL does not look at for a function hold -1 (root
// outside Broadcast/Reduce, op outside the reductions), so they never make two ranks disagree.
struct OpSignature {
  int func = 0;
  int datatype = 0;
  int root = -1;
  int redop = -1;
  uint64_t count = 0;

  // A collective: AllGather and Broadcast become bytes of ncclInt8, as NCCL rewrites them before
  // they reach its kernels (docs/nccl-facts.md "5.5 Special cases").
  static OpSignature Coll(int func, size_t count, int datatype, size_t type_size, int root,
                          int redop);
  // One side of a p2p transfer: only its bytes must equal the other side's.
  static OpSignature P2p(int func, size_t bytes);

  bool operator==(const OpSignature& o) const {
    return func == o.func && datatype == o.datatype && root == o.root && redop == o.redop &&
           count == o.count;
  }
  bool operator!=(const OpSignature& o) const { return !(*this == o); }
  // "AllGather count 1048576 datatype 0", "Reduce count 256 datatype 7 op 0 root 1",
  // "Send 4096 bytes".
  std::string Describe() const;
};

// A rank's signature for one position, published through shared memory (process-shared: every
// field is a lock-free atomic, and all-zero bytes are a valid empty slot). A seqlock keyed by the
// position: the writer clears the stamp, writes the fields, then stamps the position; a reader
// trusts the fields only if it saw the same stamp before and after reading them. One writer per
// slot (the rank that owns it); any number of readers. Rendezvous keep a small ring of slots per
// rank and reuse one only once every reader is past its old position (shm_barrier.cc says why
// that holds for each ring).
struct SignatureSlot {
  std::atomic<uint64_t> stamp;  // the position (1-based) of the fields; 0 while they are written
  std::atomic<uint64_t> count;
  std::atomic<uint64_t> packed;  // func, datatype, root + 1, redop + 1: 16 bits each

  void Publish(uint64_t position, const OpSignature& sig);
  enum class Read {
    kNotYet,  // nothing for `position` yet (or being rewritten: look again)
    kRead,    // *sig holds the owner's signature for `position`
    kPassed,  // the owner already published a later position of this ring
  };
  Read ReadAt(uint64_t position, OpSignature* sig) const;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "process-shared atomics");

}  // namespace sentinel::testing
