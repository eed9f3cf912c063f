// The collector's side of wire type 12: the frame parser's size rule, the baseline store's
// validation and run replacement (collector/aggregate/baseline_store.h).
#include "collector/aggregate/baseline_store.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"

#include "collector/ingest/frame_parser.h"

namespace sentinel::collector {
namespace {

SentinelWireBaseline Record(uint64_t run, uint16_t index, uint16_t count) {
  SentinelWireBaseline r{};
  r.run_id = run;
  r.bytes = 64u << 20;
  r.time_ns = 1000000;
  r.busbw_bps = 100000000000ULL;
  r.nranks = 8;
  r.iters = 20;
  r.func = kSentinelFuncAllReduce;
  r.index = index;
  r.count = count;
  r.flags = index + 1 == count ? kSentinelBaselineLast : 0;
  return r;
}

TEST(BaselineFrame, KnownSizeAndTruncation) {
  EXPECT_EQ(KnownPayloadSize(kSentinelWireBaselineResult), sizeof(SentinelWireBaseline));
  std::vector<uint8_t> buf(8 + sizeof(SentinelWireBaseline));
  SentinelWireFrameHeader h{static_cast<uint32_t>(buf.size()), kSentinelWireBaselineResult, 0};
  std::memcpy(buf.data(), &h, sizeof h);
  SentinelWireBaseline r = Record(1, 0, 1);
  std::memcpy(buf.data() + 8, &r, sizeof r);
  ParseResult ok = ParseFrame(buf.data(), buf.size());
  ASSERT_EQ(ok.status, ParseStatus::kFrame);
  EXPECT_EQ(ok.frame.type, kSentinelWireBaselineResult);
  // A frame announcing less than the struct is malformed, not half-read.
  h.size = 8 + 64;
  std::memcpy(buf.data(), &h, sizeof h);
  ParseResult bad = ParseFrame(buf.data(), buf.size());
  EXPECT_EQ(bad.status, ParseStatus::kMalformed);
  EXPECT_EQ(bad.error, FrameError::kBodyTooSmall);
}

TEST(BaselineStore, KeepsTheLatestRunWhole) {
  BaselineStore store;
  EXPECT_EQ(store.latest(), nullptr);
  ASSERT_TRUE(store.Add(Record(7, 0, 2), "h", "job", 100));
  ASSERT_NE(store.latest(), nullptr);
  EXPECT_FALSE(store.latest()->complete);
  ASSERT_TRUE(store.Add(Record(7, 1, 2), "h", "job", 200));
  EXPECT_TRUE(store.latest()->complete);
  EXPECT_EQ(store.latest()->records.size(), 2u);
  EXPECT_EQ(store.latest()->received_real_ns, 200);
  // A new sweep replaces the old one.
  ASSERT_TRUE(store.Add(Record(8, 0, 3), "h2", "job2", 300));
  EXPECT_EQ(store.latest()->run_id, 8u);
  EXPECT_EQ(store.latest()->host, "h2");
  EXPECT_EQ(store.latest()->records.size(), 1u);
  EXPECT_FALSE(store.latest()->complete);
}

TEST(BaselineStore, RefusesInvalidRecords) {
  BaselineStore store;
  SentinelWireBaseline r = Record(1, 0, 1);
  r.func = kSentinelFuncBroadcast;
  EXPECT_FALSE(store.Add(r, "h", "", 1));
  r = Record(1, 0, 1);
  r.time_ns = 0;
  EXPECT_FALSE(store.Add(r, "h", "", 1));
  r = Record(1, 0, 1);
  r.nranks = 0;
  EXPECT_FALSE(store.Add(r, "h", "", 1));
  r = Record(1, 2, 2);  // index beyond the sweep
  EXPECT_FALSE(store.Add(r, "h", "", 1));
  EXPECT_EQ(store.latest(), nullptr);
  // Bounded: a run never holds more than kMaxRecords.
  for (size_t i = 0; i < BaselineStore::kMaxRecords; ++i) {
    ASSERT_TRUE(store.Add(Record(2, 0, 1000), "h", "", 1));
  }
  EXPECT_FALSE(store.Add(Record(2, 0, 1000), "h", "", 1));
  EXPECT_EQ(store.latest()->records.size(), BaselineStore::kMaxRecords);
}

}  // namespace
}  // namespace sentinel::collector
