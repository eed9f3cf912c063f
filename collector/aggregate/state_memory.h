// Giving the aggregator's memory back after a burst: hash tables keep the capacity of their
// largest size (10,240 fake ranks leave a table sized for them), so before each malloc_trim the
// ones that now hold far less are rebuilt at the size they need. The caller holds the lock.
#pragma once

namespace sentinel::collector {

struct State;  // aggregator.h

// Rehashes (shrinks) the state's tables whose capacity is over four times what they hold.
void ShrinkStateTables(State* state);

}  // namespace sentinel::collector
