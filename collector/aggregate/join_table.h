// The join table: per communicator and NCCL function, a ring of join slots, one per in-flight or
// recently joined sequence number, and beside it a cell per local rank (its arrival and duration).
// A slot is empty, pending (some local ranks reported) or joined (the collective completed, its
// earliest arrival kept so a late rank still gets its lateness). The aggregator owns the rings
// under its lock (aggregator.h); these are the data and the arithmetic on them, nothing more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/dcheck.h"

namespace sentinel::collector {

inline constexpr int64_t kUnset = INT64_MIN;

enum class JoinState : uint8_t {
  kEmpty,    // never used, or given up (the window moved on)
  kPending,  // some local ranks reported this seq, not yet every active one
  kJoined,   // completed (every active rank reported, or given up as partial)
};

// One in-flight or recently joined (comm, func, seq). Per-rank data lives in FuncRing::cells.
struct JoinSlot {
  uint64_t seq = 0;
  JoinState state = JoinState::kEmpty;
  int reported = 0;
  int64_t first_seen_mono_ns = 0;
  uint64_t bytes = 0;
  int64_t min_arrival_ns = 0;
  uint8_t algo = 0;
  uint8_t proto = 0;
  uint8_t nchannels = 0;
  // The collective's ordinal (wire ordinal_lo, the same on every rank; 0 unknown, or the ranks
  // disagreed), so that a compute segment is measured only between consecutive collectives.
  uint32_t ordinal = 0;
};

// One rank's part of one join. Arrival and duration sit together so that storing a record
// touches one cache line.
struct JoinCell {
  int64_t arrival = kUnset;
  int64_t duration = -1;
};

struct FuncRing {
  std::vector<JoinSlot> slots;
  int width = 0;                // per-slot capacity for local ranks
  std::vector<JoinCell> cells;  // slots x width, slot-major

  size_t SlotOf(uint64_t seq) const {
    SENTINEL_DCHECK(!slots.empty());  // a ring is made with --pending-slots (>= 1) slots
    return seq % slots.size();
  }
  // A slot's `width` cells: inside `cells`, which EnsureRingWidth keeps at slots x width.
  JoinCell* CellsOf(size_t slot) {
    SENTINEL_DCHECK(slot < slots.size() &&
                    cells.size() == slots.size() * static_cast<size_t>(width));
    return &cells[slot * static_cast<size_t>(width)];
  }
  const JoinCell* CellsOf(size_t slot) const {
    SENTINEL_DCHECK(slot < slots.size() &&
                    cells.size() == slots.size() * static_cast<size_t>(width));
    return &cells[slot * static_cast<size_t>(width)];
  }
};

// Widens every slot to hold at least `need` local ranks (doubling, at least 4), keeping the cells.
void EnsureRingWidth(FuncRing* ring, int need);

// The bytes the ring's slots and cells take (charged to the communicator's uid).
int64_t RingBytes(const FuncRing& ring);

// Makes `slot` the pending join of `seq`, first seen at `now_mono_ns`, with its cells cleared.
void StartJoin(JoinSlot* slot, JoinCell* cells, size_t width, uint64_t seq, int64_t now_mono_ns,
               uint64_t bytes, uint8_t algo, uint8_t proto, uint8_t nchannels);

// The extent of one join over its first `members` cells: earliest and latest arrival, longest and
// shortest duration, latest end. `reported` gets the local indices that reported, in order.
struct JoinExtent {
  int64_t min_arrival = INT64_MAX;
  int64_t max_arrival = INT64_MIN;
  int64_t max_duration = -1;
  int64_t min_duration = INT64_MAX;
  int64_t max_end = INT64_MIN;  // INT64_MIN: no rank has a duration
};
JoinExtent MeasureJoin(const JoinCell* cells, size_t members, std::vector<int>* reported);

}  // namespace sentinel::collector
