// Small fixed-memory statistics used by the aggregator: a ring buffer, a fixed-bucket histogram
// (rendered as a Prometheus histogram), size buckets (powers of 4) and robust percentiles.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/wire_names.h"

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
  // Where the next Push() writes (for a prefetch).
  const T* NextSlot() const { return items_.empty() ? nullptr : &items_[next_]; }
  size_t size() const { return size_; }
  size_t capacity() const { return items_.size(); }
  // i = 0 is the oldest kept element.
  const T& operator[](size_t i) const {
    const size_t start = (next_ + items_.size() - size_) % items_.size();
    return items_[(start + i) % items_.size()];
  }
  const T& Newest() const { return (*this)[size_ - 1]; }

 private:
  std::vector<T> items_;
  size_t next_ = 0;
  size_t size_ = 0;
};

// Upper bounds in seconds shared by every lateness/duration/skew histogram (fixed: bounded
// cardinality, and Prometheus can aggregate across ranks and nodes).
inline constexpr std::array<double, 14> kLatencyBucketsS = {
    1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 1e-1, 5e-1, 1.0, 5.0};

struct Histogram {
  std::array<uint64_t, kLatencyBucketsS.size() + 1> counts{};  // last = +Inf
  double sum = 0;
  uint64_t count = 0;
  void AddNs(int64_t ns) {
    const double s = static_cast<double>(ns) * 1e-9;
    size_t i = 0;
    while (i < kLatencyBucketsS.size() && s > kLatencyBucketsS[i]) ++i;
    ++counts[i];
    sum += s;
    ++count;
  }
};

// Message-size buckets, powers of 4 from <=1KiB to >1GiB.
inline constexpr int kSizeBuckets = 12;
int SizeBucket(uint64_t bytes);
const char* SizeBucketLabel(int bucket);

// Percentile (0..100) of `values` (reordered in place); 0 when empty.
int64_t Percentile(std::vector<int64_t>* values, double pct);

// The NCCL spellings of the wire enums: the tables the plugin uses (common/wire_names.h).
using rules::AlgoName;
using rules::FuncName;
using rules::ProtoName;

}  // namespace sentinel::collector
