// An operation's signature as the profiler plugin can see it: what two ranks must agree on at the
// same position of a communicator for NCCL to complete it (function, size, datatype, root, and for
// a p2p piece the peer and direction). Every field may be unknown; two signatures are compared only
// on the fields both sides know, so an unknown field never makes a mismatch.
//
// What the plugin's records carry (docs/nccl-facts.md "3.5 Event descriptors"): the v4..v6 Coll
// event has no reduction operation, so `red_op` stays unknown unless another source (the LD_PRELOAD
// interposer, which sees the API call) fills it; for AllGather and Broadcast the Coll event gives
// the count in bytes with datatype "ncclInt8" (docs/nccl-facts.md "5.5 Special cases"), so their
// datatype is unknown from a record. Pure functions, no allocation but the texts; usable by
// sentineld and by tools that read its files.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

enum class P2pDirection : uint8_t {
  kNone,     // not a p2p operation
  kSend,     // sends to `peer`
  kRecv,     // receives from `peer`
  kUnknown,  // a p2p piece whose direction is not known (its function was recovered)
};

struct OpSignature {
  uint8_t func = kSentinelFuncUnknown;          // kSentinelFunc*; unknown: the whole signature is
  std::optional<uint64_t> bytes;                // count x datatype size, as the record's `bytes`
  uint8_t datatype = kSentinelDatatypeUnknown;  // the wire's code (ncclDataType_t numbering)
  std::optional<int32_t> root;                  // -1: not a rooted operation
  std::optional<uint8_t> red_op;  // ncclRedOp_t value (nccl.h), where a source knows it
  int32_t peer = -1;              // p2p: the peer's rank; -1 collectives or unknown
  P2pDirection direction = P2pDirection::kNone;
};

// The fields ConflictingFields reports, as bits.
enum SignatureField : uint32_t {
  kSigFunc = 1u << 0,
  kSigBytes = 1u << 1,
  kSigDatatype = 1u << 2,
  kSigRoot = 1u << 3,
  kSigRedOp = 1u << 4,
  kSigPeer = 1u << 5,
  kSigDirection = 1u << 6,
};

// Each field as a plain value with whether it is known (bit i of kSig* is field i): the one rule
// ConflictingFields applies, and the linear comparison of many signatures (hang_mismatch.h).
inline constexpr size_t kSignatureFields = 7;
struct SignatureFields {
  std::array<bool, kSignatureFields> known{};  // all false for an unknown signature
  std::array<uint64_t, kSignatureFields> value{};
};
SignatureFields FieldsOf(const OpSignature& s);

// From a completed record: function, bytes, root of Broadcast/Reduce (-1 otherwise), datatype
// (unknown for AllGather and Broadcast, see above), and for a p2p piece its peer and direction.
OpSignature SignatureFromRecord(const SentinelWireCollRecord& r);
// A rank's oldest incomplete collective from its in-flight state: unknown when nothing is in
// flight (`oldest_func` then holds 0, Broadcast's code); the function alone from a plugin that
// sends no signature (wire minor 0, no kSentinelInFlightSignature); else as from a record.
OpSignature SignatureFromInFlight(const SentinelWireInFlight& in);
// Only the function is known.
OpSignature SignatureFromFunc(uint8_t func);

// Unknown: its function is unknown, and nothing of it is compared.
inline bool SignatureKnown(const OpSignature& s) { return s.func != kSentinelFuncUnknown; }

// The fields both signatures know and that differ (kSig* bits); 0 when either is unknown or they
// agree on everything both know.
uint32_t ConflictingFields(const OpSignature& a, const OpSignature& b);
inline bool SignaturesConflict(const OpSignature& a, const OpSignature& b) {
  return ConflictingFields(a, b) != 0;
}
// A 48-bit digest of the signature's fields, the unknown ones included, the same in every process
// and build (FNV-1a over the fields, not absl::Hash, which is seeded per process): exported as a
// value that compares exactly across nodes (every integer below 2^53 is a double), so the job-wide
// rules can tell ranks stuck at one position on different operations. Never 0 for a known
// signature; 0 for an unknown one. Equal signatures give equal digests; different ones collide
// with odds of about 2^-48.
uint64_t SignatureDigest(const OpSignature& s);
// Identical, unknown fields included (grouping).
bool SameSignature(const OpSignature& a, const OpSignature& b);
// A total order consistent with SameSignature (deterministic grouping).
bool SignatureBefore(const OpSignature& a, const OpSignature& b);

// "AllGather 4 MiB bf16", "Broadcast 16 MiB fp32 root 1", "AllReduce 16 MiB bf16 sum",
// "Send 1 MiB to rank 5", "Recv 1 MiB from rank 5"; unknown fields are left out, an unknown
// signature is "unknown".
std::string SignatureText(const OpSignature& s);
// "function", "size", "datatype", "root", "reduction", "peer", "direction", joined by ", ".
std::string SignatureFieldsText(uint32_t fields);
// The size exactly, in the largest unit it is a whole multiple of: "4 MiB", "1536 KiB", "100 B"
// (two different sizes never read the same).
std::string ExactBytesText(uint64_t bytes);
// "bf16", "fp32", "fp8e4m3", "int8", "uint64"; derived from the wire's NCCL names
// (common/wire_names.h) so the two never disagree; "unknown" for an unknown code.
std::string ShortDatatypeName(uint8_t datatype);
// "sum", "prod", "max", "min", "avg"; "op N" for a user-defined one.
std::string RedOpName(uint8_t op);
// A communicator as alerts spell it: "0x%016x" (the same as CommLabel in snapshot.h).
std::string CommHex(uint64_t comm_hash);

}  // namespace sentinel::collector
