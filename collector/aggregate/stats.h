// Small fixed-memory statistics used by the aggregator: a ring buffer (base/ring.h), a fixed-bucket
// histogram (rendered as a Prometheus histogram), size buckets (powers of 4) and robust
// percentiles.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "collector/base/ring.h"
#include "common/wire_names.h"

namespace sentinel::collector {

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

// Per-function arrays (per rank, per communicator): func ids >= 15 share the last slot ("Unknown").
inline constexpr int kFuncSlots = 16;

// Percentile (0..100) of `values` (reordered in place); 0 when empty.
int64_t Percentile(std::vector<int64_t>* values, double pct);

// The NCCL spellings of the wire enums: the tables the plugin uses (common/wire_names.h).
using rules::AlgoName;
using rules::FuncName;
using rules::ProtoName;

}  // namespace sentinel::collector
