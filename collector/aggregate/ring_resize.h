// Resizing a bounded window (collector/base/ring.h) to a new capacity, keeping its newest
// elements: ended or gone state keeps what it holds in exactly the room it needs.
#pragma once

#include <cstddef>
#include <utility>

#include "collector/base/ring.h"

namespace sentinel::collector {

template <typename T>
void ResizeRing(Ring<T>* ring, size_t capacity) {
  if (ring->capacity() == capacity) return;
  Ring<T> out(capacity);
  const size_t n = ring->size();
  for (size_t i = n > capacity ? n - capacity : 0; i < n; ++i) out.Push((*ring)[i]);
  *ring = std::move(out);
}

}  // namespace sentinel::collector
