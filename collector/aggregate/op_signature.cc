// An operation's signature: see op_signature.h.
#include "collector/aggregate/op_signature.h"

#include <cstring>
#include <iterator>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "common/wire_names.h"

namespace sentinel::collector {
namespace {

bool SigIsRooted(uint8_t func) {
  return func == kSentinelFuncBroadcast || func == kSentinelFuncReduce;
}

// NCCL describes these two in bytes at the Coll event, whatever the user's type.
bool SigDatatypeHidden(uint8_t func) {
  return func == kSentinelFuncAllGather || func == kSentinelFuncBroadcast;
}

bool SigDirectionKnown(P2pDirection d) { return d != P2pDirection::kUnknown; }

auto SigKey(const OpSignature& s) {
  return std::make_tuple(s.func, s.bytes.has_value(), s.bytes.value_or(0), s.datatype,
                         s.root.has_value(), s.root.value_or(0), s.red_op.has_value(),
                         s.red_op.value_or(0), s.peer, static_cast<uint8_t>(s.direction));
}

}  // namespace

OpSignature SignatureFromRecord(const SentinelWireCollRecord& r) {
  OpSignature s;
  s.func = r.func;
  if (!SignatureKnown(s)) return s;
  s.bytes = r.bytes;
  if (!SigDatatypeHidden(r.func)) s.datatype = r.datatype;
  if ((r.flags & kSentinelCollIsP2p) != 0) {
    s.peer = r.peer >= 0 ? r.peer : -1;
    if (r.func == kSentinelFuncSend) {
      s.direction = P2pDirection::kSend;
    } else if (r.func == kSentinelFuncRecv) {
      s.direction = P2pDirection::kRecv;
    } else {
      s.direction = P2pDirection::kUnknown;
    }
    return s;
  }
  s.root = SigIsRooted(r.func) ? r.root : -1;
  return s;
}

OpSignature SignatureFromInFlight(const SentinelWireInFlight& in) {
  if (in.enqueued <= in.completed) return OpSignature{};
  OpSignature s = SignatureFromFunc(in.oldest_func);
  if (!SignatureKnown(s) || (in.flags & kSentinelInFlightSignature) == 0) return s;
  s.bytes = in.oldest_bytes;
  if (!SigDatatypeHidden(in.oldest_func)) s.datatype = in.oldest_datatype;
  s.root = SigIsRooted(in.oldest_func) ? in.oldest_root : -1;
  return s;
}

OpSignature SignatureFromFunc(uint8_t func) {
  OpSignature s;
  s.func = func;
  return s;
}

SignatureFields FieldsOf(const OpSignature& s) {
  static_assert(kSigFunc == 1u << 0 && kSigBytes == 1u << 1 && kSigDatatype == 1u << 2 &&
                    kSigRoot == 1u << 3 && kSigRedOp == 1u << 4 && kSigPeer == 1u << 5 &&
                    kSigDirection == 1u << 6,
                "field i is bit i");
  SignatureFields f;
  if (!SignatureKnown(s)) return f;
  auto put = [&f](size_t i, bool known, uint64_t value) {
    f.known[i] = known;
    f.value[i] = value;
  };
  put(0, true, s.func);
  put(1, s.bytes.has_value(), s.bytes.value_or(0));
  put(2, s.datatype != kSentinelDatatypeUnknown, s.datatype);
  put(3, s.root.has_value(), static_cast<uint64_t>(int64_t{s.root.value_or(0)}));
  put(4, s.red_op.has_value(), s.red_op.value_or(0));
  put(5, s.peer >= 0, static_cast<uint64_t>(int64_t{s.peer}));
  put(6, SigDirectionKnown(s.direction), static_cast<uint8_t>(s.direction));
  return f;
}

uint64_t SignatureDigest(const OpSignature& s) {
  if (!SignatureKnown(s)) return 0;
  constexpr uint64_t kFnvOffset = 14695981039346656037ULL;
  constexpr uint64_t kFnvPrime = 1099511628211ULL;
  uint64_t h = kFnvOffset;
  auto mix_byte = [&h](uint8_t b) { h = (h ^ b) * kFnvPrime; };
  const SignatureFields f = FieldsOf(s);
  for (size_t i = 0; i < kSignatureFields; ++i) {
    mix_byte(f.known[i] ? 1 : 0);
    for (int shift = 0; shift < 64; shift += 8) {
      mix_byte(static_cast<uint8_t>(f.value[i] >> shift));
    }
  }
  // Fold the high bits in, keep 48: exact as a double.
  const uint64_t digest = (h ^ (h >> 48)) & ((uint64_t{1} << 48) - 1);
  return digest == 0 ? 1 : digest;
}

uint32_t ConflictingFields(const OpSignature& a, const OpSignature& b) {
  const SignatureFields fa = FieldsOf(a);
  const SignatureFields fb = FieldsOf(b);
  uint32_t out = 0;
  for (size_t i = 0; i < kSignatureFields; ++i) {
    if (fa.known[i] && fb.known[i] && fa.value[i] != fb.value[i]) out |= 1u << i;
  }
  return out;
}

bool SameSignature(const OpSignature& a, const OpSignature& b) { return SigKey(a) == SigKey(b); }

bool SignatureBefore(const OpSignature& a, const OpSignature& b) { return SigKey(a) < SigKey(b); }

std::string SignatureText(const OpSignature& s) {
  if (!SignatureKnown(s)) return "unknown";
  std::string out = rules::FuncName(s.func);
  if (s.bytes) absl::StrAppend(&out, " ", ExactBytesText(*s.bytes));
  const bool p2p = s.direction != P2pDirection::kNone;
  // A p2p piece is matched by its size alone: its datatype would only clutter the text.
  if (!p2p && s.datatype != kSentinelDatatypeUnknown) {
    absl::StrAppend(&out, " ", ShortDatatypeName(s.datatype));
  }
  if (s.red_op) absl::StrAppend(&out, " ", RedOpName(*s.red_op));
  if (s.root && *s.root >= 0) absl::StrAppend(&out, " root ", *s.root);
  if (p2p && s.peer >= 0) {
    const char* prep = s.direction == P2pDirection::kSend   ? " to rank "
                       : s.direction == P2pDirection::kRecv ? " from rank "
                                                            : " with rank ";
    absl::StrAppend(&out, prep, s.peer);
  }
  return out;
}

std::string SignatureFieldsText(uint32_t fields) {
  static constexpr std::pair<uint32_t, const char*> kNames[] = {
      {kSigFunc, "function"},      {kSigBytes, "size"},      {kSigDatatype, "datatype"},
      {kSigRoot, "root"},          {kSigRedOp, "reduction"}, {kSigPeer, "peer"},
      {kSigDirection, "direction"}};
  std::vector<const char*> names;
  for (const auto& [bit, name] : kNames) {
    if ((fields & bit) != 0) names.push_back(name);
  }
  return absl::StrJoin(names, ", ");
}

std::string ExactBytesText(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t unit = 0;
  while (unit + 1 < std::size(kUnits) && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return absl::StrCat(bytes, " ", kUnits[unit]);
}

std::string ShortDatatypeName(uint8_t datatype) {
  // "ncclBfloat16" -> "bf16", "ncclFloat32" -> "fp32", "ncclUint64" -> "uint64".
  const char* name = rules::DatatypeName(datatype);
  if (std::strncmp(name, "nccl", 4) != 0) return "unknown";
  std::string rest = name + 4;
  static constexpr std::pair<const char*, const char*> kStems[] = {
      {"Bfloat", "bf"}, {"Float", "fp"}, {"Uint", "uint"}, {"Int", "int"}};
  for (const auto& [stem, shorter] : kStems) {
    const size_t n = std::strlen(stem);
    if (rest.compare(0, n, stem) == 0) return absl::StrCat(shorter, rest.substr(n));
  }
  return absl::AsciiStrToLower(rest);
}

std::string RedOpName(uint8_t op) {
  // ncclRedOp_t as nccl.h numbers it; values from ncclNumOps (5) on are made by
  // ncclRedOpCreatePreMulSum.
  static constexpr const char* kOps[] = {"sum", "prod", "max", "min", "avg"};
  if (op < std::size(kOps)) return kOps[op];
  return absl::StrCat("op ", op);
}

std::string CommHex(uint64_t comm_hash) { return absl::StrFormat("0x%016x", comm_hash); }

}  // namespace sentinel::collector
