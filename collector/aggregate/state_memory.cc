// Shrinking the aggregator's tables after a burst: see state_memory.h.
#include "collector/aggregate/state_memory.h"

#include "collector/aggregate/aggregator.h"

namespace sentinel::collector {
namespace {

template <typename Table>
void ShrinkIfSparse(Table* table) {
  // rehash(0) rebuilds the table at the capacity its size needs (nothing when it already fits).
  if (table->capacity() > 4 * table->size() + 64) table->rehash(0);
}

}  // namespace

void ShrinkStateTables(State* state) {
  ShrinkIfSparse(&state->ranks);
  ShrinkIfSparse(&state->comms);
  ShrinkIfSparse(&state->processes);
  ShrinkIfSparse(&state->uid_usage);
  for (auto& [hash, comm] : state->comms) ShrinkIfSparse(&comm->index);
}

}  // namespace sentinel::collector
