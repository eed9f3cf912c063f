// Operation signatures of the fake NCCL's rendezvous; see op_signature.h.
#include "tests/fakes/fake_nccl/op_signature.h"

#include <cstdio>

namespace sentinel::testing {

const char* FuncName(int func) {
  switch (func) {
    case kBroadcast:
      return "Broadcast";
    case kReduce:
      return "Reduce";
    case kAllGather:
      return "AllGather";
    case kReduceScatter:
      return "ReduceScatter";
    case kAllReduce:
      return "AllReduce";
    case kSend:
      return "Send";
    case kRecv:
      return "Recv";
    default:
      return "Invalid";
  }
}

OpSignature OpSignature::Coll(int func, size_t count, int datatype, size_t type_size, int root,
                              int redop) {
  OpSignature s;
  s.func = func;
  s.datatype = datatype;
  s.count = count;
  if (func == kAllGather || func == kBroadcast) {
    s.count = static_cast<uint64_t>(count) * type_size;
    s.datatype = 0;  // ncclInt8
  }
  if (func == kBroadcast || func == kReduce) s.root = root;
  if (func == kAllReduce || func == kReduce || func == kReduceScatter) s.redop = redop;
  return s;
}

OpSignature OpSignature::P2p(int func, size_t bytes) {
  OpSignature s;
  s.func = func;
  s.count = bytes;
  return s;
}

std::string OpSignature::Describe() const {
  char text[160];
  if (func == kSend || func == kRecv) {
    snprintf(text, sizeof(text), "%s %llu bytes", FuncName(func),
             static_cast<unsigned long long>(count));
    return text;
  }
  int n = snprintf(text, sizeof(text), "%s count %llu datatype %d", FuncName(func),
                   static_cast<unsigned long long>(count), datatype);
  if (redop >= 0 && n > 0 && static_cast<size_t>(n) < sizeof(text)) {
    n += snprintf(text + n, sizeof(text) - static_cast<size_t>(n), " op %d", redop);
  }
  if (root >= 0 && n > 0 && static_cast<size_t>(n) < sizeof(text)) {
    snprintf(text + n, sizeof(text) - static_cast<size_t>(n), " root %d", root);
  }
  return text;
}

namespace {

uint64_t Field(int v) { return static_cast<uint64_t>(static_cast<uint16_t>(v)); }

int Unfield(uint64_t packed, int shift) { return static_cast<int>((packed >> shift) & 0xffff); }

}  // namespace

void SignatureSlot::Publish(uint64_t position, const OpSignature& sig) {
  // Relaxed stores fenced by release on both sides: a reader that sees the final stamp sees these
  // fields, and one that sees a field of this write before the stamp sees the cleared stamp
  // afterwards and looks again.
  stamp.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  count.store(sig.count, std::memory_order_relaxed);
  packed.store(Field(sig.func) | Field(sig.datatype) << 16 | Field(sig.root + 1) << 32 |
                   Field(sig.redop + 1) << 48,
               std::memory_order_relaxed);
  stamp.store(position, std::memory_order_release);
}

SignatureSlot::Read SignatureSlot::ReadAt(uint64_t position, OpSignature* sig) const {
  const uint64_t before = stamp.load(std::memory_order_acquire);
  if (before > position) return Read::kPassed;
  if (before != position) return Read::kNotYet;
  const uint64_t c = count.load(std::memory_order_relaxed);
  const uint64_t p = packed.load(std::memory_order_relaxed);
  // Orders the field loads before the second stamp load: a rewrite that began meanwhile shows.
  std::atomic_thread_fence(std::memory_order_acquire);
  if (stamp.load(std::memory_order_relaxed) != before) return Read::kNotYet;
  sig->count = c;
  sig->func = Unfield(p, 0);
  sig->datatype = Unfield(p, 16);
  sig->root = Unfield(p, 32) - 1;
  sig->redop = Unfield(p, 48) - 1;
  return Read::kRead;
}

}  // namespace sentinel::testing
