// StepMarkerSink: which records are step boundaries, and that a batch's boundaries reach the
// tracer in one call per chunk (its locks once per batch), in order, none lost past a chunk.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "plugin/cupti/step_marker.h"

namespace sentinel::plugin::cupti {
namespace {

std::vector<std::vector<int64_t>>& Calls() {
  static std::vector<std::vector<int64_t>> calls;
  return calls;
}

void Record(const int64_t* times, size_t n) { Calls().emplace_back(times, times + n); }

SentinelWireCollRecord Coll(uint64_t comm, uint8_t func, uint64_t bytes, int64_t gpu_start,
                            int64_t enqueue = 0) {
  SentinelWireCollRecord r{};
  r.comm_hash = comm;
  r.func = func;
  r.bytes = bytes;
  r.gpu_start_ns = gpu_start;
  r.enqueue_ns = enqueue;
  return r;
}

TEST(StepMarkerSinkTest, FirstCollectiveFixesTheSignatureAndOneCallCarriesTheBatch) {
  Calls().clear();
  StepMarkerSink sink(&Record);
  const std::vector<SentinelWireCollRecord> batch = {
      Coll(7, kSentinelFuncAllReduce, 1024, 100),
      Coll(7, kSentinelFuncAllReduce, 2048, 150),     // other size: not a marker
      Coll(8, kSentinelFuncAllReduce, 1024, 160),     // other communicator
      Coll(7, kSentinelFuncSend, 1024, 170),          // point-to-point: never a marker
      Coll(7, kSentinelFuncAllReduce, 1024, 0, 190),  // no GPU time: its enqueue time
      Coll(7, kSentinelFuncAllReduce, 1024, 300),
  };
  EXPECT_EQ(sink.OnRecords(batch.data(), batch.size()), batch.size());
  ASSERT_EQ(Calls().size(), 1u);
  EXPECT_EQ(Calls()[0], (std::vector<int64_t>{100, 190, 300}));
  EXPECT_EQ(sink.boundaries(), 3u);
}

TEST(StepMarkerSinkTest, ABatchOfBoundariesLongerThanAChunkIsHandedOverWhole) {
  Calls().clear();
  StepMarkerSink sink(&Record);
  std::vector<SentinelWireCollRecord> batch;
  const size_t n = StepMarkerSink::kChunk * 2 + 5;
  for (size_t i = 0; i < n; ++i) {
    batch.push_back(Coll(1, kSentinelFuncAllGather, 64, static_cast<int64_t>(1000 + i)));
  }
  sink.OnRecords(batch.data(), batch.size());
  ASSERT_EQ(Calls().size(), 3u);
  std::vector<int64_t> all;
  for (const auto& c : Calls()) all.insert(all.end(), c.begin(), c.end());
  ASSERT_EQ(all.size(), n);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(all[i], static_cast<int64_t>(1000 + i));
  Calls().clear();
  sink.OnRecords(batch.data(), 0);  // nothing: no call
  EXPECT_TRUE(Calls().empty());
}

}  // namespace
}  // namespace sentinel::plugin::cupti
