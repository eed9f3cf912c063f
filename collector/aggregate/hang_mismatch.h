// Do the ranks of one communicator disagree about the collective they are stuck in? NCCL completes
// a collective only when every rank issued a compatible one at the same position (same function,
// size, datatype, root, reduction); when code paths diverge it just hangs. Given each rank's
// signature at the stuck position T (where it issued T) and its recent completed collectives by
// position, this says which ranks issued what at T (the sides, the majority when there is one), and
// the first position up to T where two ranks that both know it differ.
//
// Only what the data says: signatures are compared on the fields both sides know
// (op_signature.h), a rank whose signature is unknown is listed as such and never makes a
// mismatch, a rank that has not issued T is not compared, and a tie is a tie (no majority).
//
// Grouped p2p operations have no position of the communicator's collectives: a rank's send #k to
// B is matched with B's receive #k from A (the record's per-(communicator, peer, direction)
// counter), and a size difference or a send or receive with no counterpart on a peer that issued
// its operations is named with both sides.
//
// Bounded work: O(entries x log) for the histories the caller passes (it bounds them), and the
// pairwise questions are answered field by field, never rank by rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collector/aggregate/op_signature.h"

namespace sentinel::collector {

struct PositionedOp {
  uint64_t position = 0;  // the collective's ordinal on the communicator (1 = the first)
  OpSignature signature;
};

// One rank of the communicator, as the caller knows it.
struct RankOps {
  int32_t rank = 0;
  bool issued = false;   // it issued the stuck collective (its signature there may be unknown)
  OpSignature at_stuck;  // its signature at the stuck position, where it issued it
  // Completed collectives, any order; an entry at the stuck position counts as issuing it, entries
  // after it are ignored, and the first entry wins when one position appears twice.
  std::vector<PositionedOp> history;
};

struct SignatureGroup {
  OpSignature signature;
  std::vector<int32_t> ranks;  // ascending
};

// Who issued what at one position.
struct PositionSides {
  uint64_t position = 0;
  // Every distinct signature there: most ranks first, then the lowest rank.
  std::vector<SignatureGroup> groups;
  std::vector<int32_t> unknown;  // issued it, signature unknown: not compared
  bool disagree = false;         // two groups differ on a field both know
  // Indexes into `groups`. The majority is the largest group that differs from another, when it
  // has more ranks than every group it differs from (-1 otherwise).
  int majority = -1;
  // With a majority: the groups that differ from it. Under a tie (`tie`): every group in a
  // conflict, the tied largest ones first.
  std::vector<int> minority;
  bool tie = false;
  size_t tied = 0;  // under a tie: how many of `minority`'s first entries are the tied groups
  // Groups that differ from nothing the verdict names (partly known, agreeing as far as known).
  std::vector<int> undetermined;
};

struct MismatchVerdict {
  PositionSides at_stuck;
  // The first position <= T where two ranks that both know it differ; `first_found` false when
  // none (then `first` is empty). When it is T, `first` repeats `at_stuck`.
  bool first_found = false;
  PositionSides first;
  std::vector<int32_t> not_issued;  // ranks that have not issued T: not compared there
  // Empty when nothing differs. Otherwise "rank 3 issued AllGather 4 MiB bf16 as collective #1041
  // of comm 0x…; the other 7 ranks issued AllReduce 16 MiB bf16 sum" (+ "; first diverged at
  // collective #1037: …" when earlier than T).
  std::string text;
  [[nodiscard]] bool Disagree() const { return at_stuck.disagree || first_found; }
};

// `ranks`: the communicator's ranks as known (node-local ones, or every rank job-wide); each rank
// once (a repeated rank is ignored after its first entry).
MismatchVerdict CompareAtPosition(uint64_t comm_hash, uint64_t stuck_position,
                                  const std::vector<RankOps>& ranks);

// The sides at one position from (rank, signature) pairs (exposed for tools and tests).
PositionSides SidesAt(uint64_t position, std::vector<std::pair<int32_t, OpSignature>> entries);
// "rank 3 issued AllGather 4 MiB as collective #1041 of comm 0x…; the other 7 ranks issued …";
// empty when the sides do not disagree. `where` is put after the first side ("as collective #N of
// comm 0x…").
std::string SidesText(const PositionSides& sides, const std::string& where);
// "first diverged at collective #1037: rank 3 issued AllReduce 8 MiB bf16; the other 7 ranks
// issued AllReduce 16 MiB bf16".
std::string FirstDivergenceText(const PositionSides& first);
// "rank 3", "ranks 0-2,4,6-7".
std::string RankListText(const std::vector<int32_t>& ascending);

// One p2p operation of a rank in the stuck group (or a recent completed one, which only serves as
// a counterpart).
struct P2pOp {
  int32_t rank = 0;
  int32_t peer = -1;
  P2pDirection direction = P2pDirection::kUnknown;
  // Its number among the rank's operations with this peer in this direction on the communicator
  // (1 = the first): the record's `seq` for a p2p piece.
  uint64_t index = 0;
  std::optional<uint64_t> bytes;
  bool in_flight = true;  // in the stuck group (checked); false: completed (a counterpart only)
};

struct P2pMismatch {
  bool size_differs = false;  // otherwise: no counterpart on the peer
  P2pOp op;                   // the side that has it (the send for a size difference)
  std::optional<P2pOp> counterpart;
  std::vector<P2pOp> peer_ops;  // unmatched: what the peer issued in the group instead (a few)
  std::string text;
};

struct P2pComparison {
  std::vector<P2pMismatch> mismatches;  // by (rank, peer, direction, index)
  // In-flight operations whose peer's operations are not known (another node, or a peer that has
  // not issued its group) or whose direction is unknown: not compared.
  std::vector<P2pOp> unknown;
  std::string text;  // the mismatches' texts joined by "; ", empty when none
};

// `issued`: the ranks whose in-flight p2p operations are all in `ops` (those are the peers whose
// missing counterpart is a mismatch). `max_peer_ops` bounds each mismatch's list of the peer's
// operations.
P2pComparison CompareGroupedP2p(uint64_t comm_hash, const std::vector<P2pOp>& ops,
                                const std::vector<int32_t>& issued, size_t max_peer_ops = 4);

}  // namespace sentinel::collector
