// A fixed-capacity ring buffer: the bounded windows of the aggregator and the NIC poller's history.
#pragma once

#include <cstddef>
#include <vector>

#include "common/dcheck.h"

namespace sentinel::collector {

// Overwrites its oldest element when full; Push() returns true when it did (an eviction).
template <typename T>
class Ring {
 public:
  explicit Ring(size_t capacity = 0) : items_(capacity) {}
  void Reset(size_t capacity) {
    items_.assign(capacity, T{});
    next_ = 0;
    size_ = 0;
  }
  bool Push(const T& item) {
    if (items_.empty()) return true;
    items_[next_] = item;
    if (++next_ == items_.size()) next_ = 0;
    if (size_ < items_.size()) {
      ++size_;
      return false;
    }
    return true;
  }
  // The kept elements in storage order, not oldest first (for an order-free statistic such as a
  // median, without the index arithmetic of operator[]): they are the first size() slots, since
  // the ring only wraps once full.
  const T* StorageData() const { return items_.data(); }
  // Where the next Push() writes (for a prefetch).
  const T* NextSlot() const { return items_.empty() ? nullptr : &items_[next_]; }
  size_t size() const { return size_; }
  size_t capacity() const { return items_.size(); }
  // i = 0 is the oldest kept element. Compare and subtract, not two 64-bit divisions: the
  // aggregator reads rings per record.
  const T& operator[](size_t i) const {
    SENTINEL_DCHECK(i < size_);  // also rules out an empty ring
    const size_t cap = items_.size();
    const size_t start = next_ >= size_ ? next_ - size_ : next_ + cap - size_;
    size_t at = start + i;  // < 2 x cap: start < cap and i < size_ <= cap
    if (at >= cap) at -= cap;
    return items_[at];
  }
  const T& Newest() const {
    SENTINEL_DCHECK(size_ > 0);
    return items_[next_ == 0 ? items_.size() - 1 : next_ - 1];
  }

 private:
  std::vector<T> items_;
  size_t next_ = 0;
  size_t size_ = 0;
};

}  // namespace sentinel::collector
