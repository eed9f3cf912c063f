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

OpSignature SignatureFromFunc(uint8_t func) {
  OpSignature s;
  s.func = func;
  return s;
}

uint32_t ConflictingFields(const OpSignature& a, const OpSignature& b) {
  if (!SignatureKnown(a) || !SignatureKnown(b)) return 0;
  uint32_t out = 0;
  if (a.func != b.func) out |= kSigFunc;
  if (a.bytes && b.bytes && *a.bytes != *b.bytes) out |= kSigBytes;
  if (a.datatype != kSentinelDatatypeUnknown && b.datatype != kSentinelDatatypeUnknown &&
      a.datatype != b.datatype) {
    out |= kSigDatatype;
  }
  if (a.root && b.root && *a.root != *b.root) out |= kSigRoot;
  if (a.red_op && b.red_op && *a.red_op != *b.red_op) out |= kSigRedOp;
  if (a.peer >= 0 && b.peer >= 0 && a.peer != b.peer) out |= kSigPeer;
  if (SigDirectionKnown(a.direction) && SigDirectionKnown(b.direction) &&
      a.direction != b.direction) {
    out |= kSigDirection;
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
