// The aggregator's fixed-capacity ring (collector/base/ring.h): oldest-first indexing, Newest()
// and evictions, checked against a deque model over every capacity from 1 to 9 and pushes past
// several wraps.
#include "collector/base/ring.h"

#include <deque>

#include "gtest/gtest.h"

namespace sentinel::collector {
namespace {

TEST(Ring, IndexesOldestFirstAcrossWrapsLikeABoundedDeque) {
  for (size_t cap = 1; cap <= 9; ++cap) {
    Ring<int> ring(cap);
    std::deque<int> model;
    for (int v = 0; v < static_cast<int>(5 * cap + 3); ++v) {
      const bool evicted = ring.Push(v);
      model.push_back(v);
      EXPECT_EQ(evicted, model.size() > cap) << "cap " << cap << " push " << v;
      if (model.size() > cap) model.pop_front();
      ASSERT_EQ(ring.size(), model.size());
      for (size_t i = 0; i < model.size(); ++i) {
        ASSERT_EQ(ring[i], model[i]) << "cap " << cap << " after " << v << " index " << i;
      }
      EXPECT_EQ(ring.Newest(), v);
    }
  }
}

TEST(Ring, ResetEmptiesAndAZeroCapacityRingKeepsNothing) {
  Ring<int> ring(3);
  for (int v = 0; v < 7; ++v) ring.Push(v);
  ring.Reset(4);
  EXPECT_EQ(ring.size(), 0u);
  ring.Push(42);
  EXPECT_EQ(ring[0], 42);
  EXPECT_EQ(ring.Newest(), 42);
  Ring<int> none;
  EXPECT_TRUE(none.Push(1));  // nothing kept: the push counts as an eviction
  EXPECT_EQ(none.size(), 0u);
}

}  // namespace
}  // namespace sentinel::collector
