// The flight history: per (communicator, rank) of this node, the last N operations the rank
// reported (its collective and p2p records) and where it stood in flight (its last in-flight
// frame), kept so that a hang (or `sentinelctl record`) can write them out as a flight record
// (collector/log/flight_record.h). Fixed memory per rank: a ring of N operations allocated when the
// rank first appears, nothing allocated per record after that; a per-uid byte budget bounds the
// ranks x communicators one user's jobs may hold.
//
// Thread-safety: none; the aggregator calls it under its lock. Ownership: it owns every rank's
// ring; a FlightRankHistory pointer stays valid until Forget() of its key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "collector/aggregate/hang_mismatch.h"
#include "collector/aggregate/op_signature.h"
#include "collector/aggregate/snapshot.h"
#include "collector/base/ring.h"
#include "collector/log/flight_record.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

// The 64-bit ordinal whose low 32 bits are `lo`, nearest to `near` (a rank's counters are 64-bit
// in its in-flight frames, its records carry only the low half: SentinelWireCollRecord.ordinal_lo).
uint64_t WidenOrdinal(uint32_t lo, uint64_t near);

// An operation of the history as the signature comparison reads it (op_signature.h), by the rules
// SignatureFromRecord applies to the record it came from: the size only where known, no datatype
// for AllGather and Broadcast, a root only for a rooted collective, a p2p piece's peer and
// direction.
OpSignature FlightOpSignature(const FlightOp& op);

class FlightRankHistory {
 public:
  FlightRankHistory(size_t capacity, int32_t nranks, uint32_t pid);
  // What one rank's history costs, held for its whole life: the ring and the object around it.
  static int64_t BytesFor(size_t capacity);

  // A completed collective or p2p operation of this rank (the record the aggregator joins).
  void AddRecord(const SentinelWireCollRecord& rec);
  // Where the rank stands now (its latest in-flight frame): the counters, and the oldest
  // incomplete collective with its function, seq, since when and (wire minor 1) its size,
  // datatype and root. Values that contradict each other (completed past enqueued) are clamped,
  // never kept as they came.
  void NoteInFlight(const SentinelWireInFlight& in);

  // The rank's part of a flight record: its operations oldest first, the in-flight one last
  // (unless its record already came).
  FlightRank Snapshot(int32_t rank) const;

  // Its completed collectives with a position before `before` (p2p and the in-flight one left
  // out), oldest first: what the first divergence is looked for in (hang_mismatch.h).
  std::vector<PositionedOp> CompletedBefore(uint64_t before) const;

  int32_t nranks() const { return nranks_; }
  uint32_t pid() const { return pid_; }
  // Its process's pid, from the kernel, when another connection of the same uid took the rank over
  // (a reconnect).
  void set_pid(uint32_t pid) { pid_ = pid; }
  uint64_t ops_seen() const { return seen_; }

 private:
  Ring<FlightOp> ring_;
  int32_t nranks_ = 0;
  uint32_t pid_ = 0;
  uint64_t seen_ = 0;
  uint64_t max_position_ = 0;  // of the records taken: widens the next one, hides a stale frame
  FlightProgress progress_;
  bool has_oldest_ = false;
  FlightOp oldest_;  // the in-flight frame's oldest incomplete collective
};

// Every local rank's history, by (communicator, rank).
class FlightHistory {
 public:
  struct Limits {
    size_t ops_per_rank = 2000;
    // One uid's ranks together: 64 MiB holds 460 ranks (say 8 GPUs x 57 communicators) at 2,000
    // operations each; a rank over it is refused (counted) and keeps no history.
    int64_t bytes_per_uid = int64_t{64} << 20;
  };
  explicit FlightHistory(Limits limits);

  // The rank's history, created on first use with `nranks` and its kernel pid; nullptr when its
  // uid's share is spent (counted in refused()).
  FlightRankHistory* Rank(const RankKey& key, int32_t nranks, uint32_t pid);
  FlightRankHistory* Find(const RankKey& key);
  // Drops a rank's history and gives its bytes back to its uid (an evicted rank, an ended
  // communicator dropped from the state).
  void Forget(const RankKey& key);

  // The flight record of `comms`: each with its local ranks' histories, by rank (a communicator
  // with none here is left out). The header (node, clock, reason) is the caller's to fill.
  FlightRecord Collect(const std::vector<CommKey>& comms) const;

  int64_t bytes_per_rank() const { return FlightRankHistory::BytesFor(limits_.ops_per_rank); }
  int64_t uid_bytes(uint32_t uid) const;
  size_t ranks() const { return ranks_.size(); }
  uint64_t refused() const { return refused_; }
  const Limits& limits() const { return limits_; }

 private:
  Limits limits_;
  absl::flat_hash_map<RankKey, std::unique_ptr<FlightRankHistory>> ranks_;
  absl::flat_hash_map<uint32_t, int64_t> uid_bytes_;
  uint64_t refused_ = 0;
};

}  // namespace sentinel::collector
