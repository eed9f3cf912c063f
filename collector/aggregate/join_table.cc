// The join table's arithmetic; see join_table.h.
#include "collector/aggregate/join_table.h"

#include <algorithm>

namespace sentinel::collector {

void EnsureRingWidth(FuncRing* ring, int need) {
  if (ring->width >= need) return;
  int width = std::max(ring->width, 4);
  while (width < need) width *= 2;
  const size_t slots = ring->slots.size();
  std::vector<JoinCell> cells(slots * static_cast<size_t>(width));
  for (size_t s = 0; s < slots && ring->width > 0; ++s) {
    std::copy_n(&ring->cells[s * static_cast<size_t>(ring->width)], ring->width,
                &cells[s * static_cast<size_t>(width)]);
  }
  ring->cells.swap(cells);
  ring->width = width;
}

int64_t RingBytes(const FuncRing& ring) {
  return static_cast<int64_t>(ring.slots.capacity() * sizeof(JoinSlot) +
                              ring.cells.capacity() * sizeof(JoinCell));
}

void StartJoin(JoinSlot* slot, JoinCell* cells, size_t width, uint64_t seq, int64_t now_mono_ns,
               uint64_t bytes, uint8_t algo, uint8_t proto, uint8_t nchannels) {
  slot->seq = seq;
  slot->state = JoinState::kPending;
  slot->reported = 0;
  slot->first_seen_mono_ns = now_mono_ns;
  slot->bytes = bytes;
  slot->algo = algo;
  slot->proto = proto;
  slot->nchannels = nchannels;
  std::fill_n(cells, width, JoinCell{});
}

JoinExtent MeasureJoin(const JoinCell* cells, size_t members, std::vector<int>* reported) {
  SENTINEL_DCHECK(members == 0 || cells != nullptr);
  JoinExtent e;
  for (size_t li = 0; li < members; ++li) {
    const JoinCell& c = cells[li];
    if (c.arrival == kUnset) continue;
    reported->push_back(static_cast<int>(li));
    e.min_arrival = std::min(e.min_arrival, c.arrival);
    e.max_arrival = std::max(e.max_arrival, c.arrival);
    if (c.duration >= 0) {
      e.max_duration = std::max(e.max_duration, c.duration);
      e.min_duration = std::min(e.min_duration, c.duration);
      e.max_end = std::max(e.max_end, c.arrival + c.duration);
    }
  }
  return e;
}

}  // namespace sentinel::collector
