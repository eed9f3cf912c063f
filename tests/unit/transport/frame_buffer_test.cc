// Tests of FrameBuffer (plugin/transport/frame_buffer.h) without sockets: the exact bytes of the
// frames it assembles, batching of collective records, compaction at the capacity boundary, what
// counts as sent, and what is counted as lost when a connection breaks.
#include "plugin/transport/frame_buffer.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace sentinel::plugin {
namespace {

constexpr size_t kHdr = FrameBuffer::kHeaderBytes;
constexpr size_t kColl = FrameBuffer::kCollFrameBytes;

SentinelWireFrameHeader HeaderAt(const uint8_t* p) {
  SentinelWireFrameHeader h;
  std::memcpy(&h, p, sizeof(h));
  return h;
}

std::vector<SentinelWireCollRecord> Records(size_t n) {
  std::vector<SentinelWireCollRecord> v(n);
  for (size_t i = 0; i < n; ++i) {
    std::memset(&v[i], static_cast<int>(0x10 + i), sizeof(v[i]));  // distinct byte patterns
  }
  return v;
}

TEST(FrameBuffer, FrameSizesAreHeaderPlusPayloadRoundedToEight) {
  EXPECT_EQ(kHdr, 8u);
  EXPECT_EQ(WireFrameBytes(0), 8u);
  EXPECT_EQ(WireFrameBytes(1), 16u);
  EXPECT_EQ(WireFrameBytes(8), 16u);
  EXPECT_EQ(WireFrameBytes(9), 24u);
  EXPECT_EQ(kColl, kHdr + sizeof(SentinelWireCollRecord));
  EXPECT_EQ(kColl % 8, 0u);
}

TEST(FrameBuffer, AppendWritesHeaderPayloadAndZeroPadding) {
  FrameBuffer b;
  ASSERT_TRUE(b.Allocate(4096).ok());
  const uint8_t payload[5] = {1, 2, 3, 4, 5};
  ASSERT_TRUE(b.Append(42, payload, sizeof(payload)));
  ASSERT_EQ(b.unsent_bytes(), 16u);
  // u32 size | u16 type | u16 flags, little-endian, then the payload and 3 zero bytes.
  const uint8_t want[16] = {16, 0, 0, 0, 42, 0, 0, 0, 1, 2, 3, 4, 5, 0, 0, 0};
  EXPECT_EQ(std::memcmp(b.unsent(), want, sizeof(want)), 0);
}

TEST(FrameBuffer, EmptyPayloadIsAHeaderOnlyFrame) {
  FrameBuffer b;
  ASSERT_TRUE(b.Allocate(4096).ok());
  ASSERT_TRUE(b.Append(7, nullptr, 0));
  const uint8_t want[8] = {8, 0, 0, 0, 7, 0, 0, 0};
  ASSERT_EQ(b.unsent_bytes(), 8u);
  EXPECT_EQ(std::memcmp(b.unsent(), want, sizeof(want)), 0);
}

TEST(FrameBuffer, RefusesFramesAboveTheWireMaximum) {
  FrameBuffer b;
  ASSERT_TRUE(b.Allocate(64 * 1024).ok());
  std::vector<uint8_t> big(SENTINEL_WIRE_FRAME_MAX);
  EXPECT_FALSE(b.Append(1, big.data(), SENTINEL_WIRE_FRAME_MAX - kHdr + 1));
  EXPECT_TRUE(b.empty());
  EXPECT_TRUE(b.Append(1, big.data(), SENTINEL_WIRE_FRAME_MAX - kHdr));  // exactly the maximum
  EXPECT_EQ(b.unsent_bytes(), SENTINEL_WIRE_FRAME_MAX);
}

TEST(FrameBuffer, UnallocatedAcceptsNothing) {
  FrameBuffer b;
  auto recs = Records(1);
  EXPECT_FALSE(b.Append(1, "x", 1));
  EXPECT_EQ(b.AppendCollRecords(recs.data(), 1), 0u);
  EXPECT_TRUE(b.empty());
}

TEST(FrameBuffer, CapacityHasAFloorOfTwoLargestControlFrames) {
  FrameBuffer b;
  ASSERT_TRUE(b.Allocate(1).ok());
  EXPECT_EQ(b.capacity(), FrameBuffer::kMinCapacity);
  EXPECT_EQ(FrameBuffer::kMinCapacity, 2 * WireFrameBytes(sizeof(SentinelWireVerdict)));
}

// Whole collective frames in a buffer just above the minimum capacity.
constexpr size_t kWhole = FrameBuffer::kMinCapacity / kColl + 1;

TEST(FrameBuffer, CollRecordsAreWholeFramesInOrderUpToTheCapacity) {
  FrameBuffer b;
  const size_t cap = kWhole * kColl + kColl / 2;  // room for kWhole whole frames, not one more
  ASSERT_TRUE(b.Allocate(cap).ok());
  ASSERT_EQ(b.capacity(), cap);
  auto recs = Records(kWhole + 2);
  EXPECT_EQ(b.AppendCollRecords(recs.data(), recs.size()), kWhole);
  ASSERT_EQ(b.unsent_bytes(), kWhole * kColl);
  for (size_t i = 0; i < kWhole; ++i) {
    const uint8_t* f = b.unsent() + i * kColl;
    SentinelWireFrameHeader h = HeaderAt(f);
    EXPECT_EQ(h.size, kColl);
    EXPECT_EQ(h.type, kSentinelWireColl);
    EXPECT_EQ(h.flags, 0);
    EXPECT_EQ(std::memcmp(f + kHdr, &recs[i], sizeof(recs[i])), 0) << i;
  }
  EXPECT_FALSE(b.HasRoomAtTail(kColl));
  EXPECT_TRUE(b.HasRoomAtTail(kColl / 2));
  // Full: nothing more fits, and MakeRoom cannot help while nothing was sent.
  EXPECT_EQ(b.AppendCollRecords(recs.data() + kWhole, 2), 0u);
  EXPECT_FALSE(b.MakeRoom(kColl));
}

TEST(FrameBuffer, SentFramesCountOnlyWhenWhollyTaken) {
  FrameBuffer b;
  ASSERT_TRUE(b.Allocate(64 * 1024).ok());
  auto recs = Records(2);
  const uint8_t ctl[16] = {};
  ASSERT_TRUE(b.Append(kSentinelWireHeartbeat, ctl, sizeof(ctl)));  // 24 bytes
  ASSERT_EQ(b.AppendCollRecords(recs.data(), 2), 2u);
  const size_t total = 24 + 2 * kColl;
  ASSERT_EQ(b.unsent_bytes(), total);
  b.MarkSent(24 + kColl - 1);  // the first record's frame lacks one byte
  EXPECT_EQ(b.CollectSent(), 0u);
  b.MarkSent(1);
  EXPECT_EQ(b.CollectSent(), 1u);
  EXPECT_EQ(b.CollectSent(), 0u);  // not counted twice
  b.MarkSent(kColl);
  EXPECT_EQ(b.CollectSent(), 1u);
  EXPECT_TRUE(b.empty());
  // Everything sent: the buffer starts again at the front.
  EXPECT_TRUE(b.HasRoomAtTail(b.capacity()));
}

TEST(FrameBuffer, MakeRoomSlidesUnsentBytesAndThePartlySentFrameToTheFront) {
  FrameBuffer b;
  const size_t cap = kWhole * kColl;
  ASSERT_TRUE(b.Allocate(cap).ok());
  auto recs = Records(kWhole + 2);
  ASSERT_EQ(b.AppendCollRecords(recs.data(), kWhole), kWhole);
  b.MarkSent(kColl + 10);  // frame 0 whole, frame 1 partly
  EXPECT_EQ(b.CollectSent(), 1u);
  ASSERT_FALSE(b.HasRoomAtTail(kColl));
  ASSERT_TRUE(b.MakeRoom(kColl));  // frame 0's bytes are free again
  // The unsent bytes are the rest of frame 1, then frames 2.. unchanged.
  ASSERT_EQ(b.unsent_bytes(), (kWhole - 1) * kColl - 10);
  EXPECT_EQ(HeaderAt(b.unsent() + (kColl - 10)).size, kColl);
  EXPECT_EQ(std::memcmp(b.unsent() + (kColl - 10) + kHdr, &recs[2], sizeof(recs[2])), 0);
  EXPECT_EQ(b.AppendCollRecords(recs.data() + kWhole, 2), 1u);  // exactly one frame of room
  // The partly sent frame 1 still counts once it is wholly sent, after the move.
  b.MarkSent(kColl - 10);
  EXPECT_EQ(b.CollectSent(), 1u);
  // Only bytes of wholly sent frames are reused: one frame of room, not two.
  EXPECT_FALSE(b.MakeRoom(2 * kColl));
  EXPECT_TRUE(b.MakeRoom(kColl));
}

TEST(FrameBuffer, DiscardCountsRecordsAndControlFramesNotWhollySent) {
  FrameBuffer b;
  ASSERT_TRUE(b.Allocate(64 * 1024).ok());
  auto recs = Records(3);
  const uint8_t ctl[8] = {};
  ASSERT_EQ(b.AppendCollRecords(recs.data(), 1), 1u);
  ASSERT_TRUE(b.Append(kSentinelWireCommEnd, ctl, sizeof(ctl)));
  ASSERT_EQ(b.AppendCollRecords(recs.data() + 1, 2), 2u);
  ASSERT_TRUE(b.Append(kSentinelWireHeartbeat, ctl, sizeof(ctl)));
  b.MarkSent(kColl + 3);  // record 0 wholly sent; the CommEnd frame only partly
  EXPECT_EQ(b.CollectSent(), 1u);
  FrameBuffer::Lost lost = b.DiscardUnsent();
  EXPECT_EQ(lost.records, 2u);
  EXPECT_EQ(lost.control, 2u);  // the partly sent CommEnd counts as lost too
  EXPECT_TRUE(b.empty());
  lost = b.DiscardUnsent();
  EXPECT_EQ(lost.records, 0u);
  EXPECT_EQ(lost.control, 0u);
}

TEST(FrameBuffer, ResetForgetsWithoutCounting) {
  FrameBuffer b;
  ASSERT_TRUE(b.Allocate(4096).ok());
  auto recs = Records(1);
  ASSERT_EQ(b.AppendCollRecords(recs.data(), 1), 1u);
  b.Reset();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.DiscardUnsent().records, 0u);
}

}  // namespace
}  // namespace sentinel::plugin
