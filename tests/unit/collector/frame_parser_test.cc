// Frame parser and Session: the wire's validation and compatibility rules
// (schemas/wire/wire_format.md): good, truncated, oversized, garbage, unknown types skipped,
// larger records accepted, major mismatch refused.
#include "collector/ingest/frame_parser.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "collector/ingest/session.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

using testing::AppendFrame;
using testing::Bytes;
using testing::MakeColl;
using testing::MakeHello;

class RecordingSink : public IngestSink {
 public:
  void OnHello(int, const SentinelWireHello& h) override { hellos.push_back(h); }
  void OnRecords(int, const SentinelWireCollRecord* r, size_t n) override {
    records.insert(records.end(), r, r + n);
  }
  void OnControlFrame(int, const Frame& f) override { control_types.push_back(f.type); }
  void OnDisconnect(int) override {}
  std::vector<SentinelWireHello> hellos;
  std::vector<SentinelWireCollRecord> records;
  std::vector<uint16_t> control_types;
};

Bytes HelloBytes() { return testing::Frame(kSentinelWireHello, MakeHello(77)); }

TEST(ParseFrameTest, GoodFrame) {
  const Bytes b = testing::Frame(kSentinelWireColl, MakeColl(1, 0, 2, 5, 100, 10));
  const ParseResult r = ParseFrame(b.data(), b.size());
  ASSERT_EQ(r.status, ParseStatus::kFrame);
  EXPECT_EQ(r.consumed, 8 + sizeof(SentinelWireCollRecord));
  EXPECT_EQ(r.frame.type, kSentinelWireColl);
  EXPECT_EQ(ReadPayload<SentinelWireCollRecord>(r.frame).seq, 5u);
}

TEST(ParseFrameTest, TruncatedNeedsMore) {
  const Bytes b = testing::Frame(kSentinelWireColl, MakeColl(1, 0, 2, 5, 100, 10));
  for (size_t n = 0; n < b.size(); ++n) {
    EXPECT_EQ(ParseFrame(b.data(), n).status, ParseStatus::kNeedMore) << n;
  }
}

TEST(ParseFrameTest, SizeRules) {
  struct Case {
    uint32_t size;
    uint16_t type;
    FrameError error;
  };
  const Case cases[] = {
      {0, 99, FrameError::kSizeTooSmall},
      {4, 99, FrameError::kSizeTooSmall},
      {SENTINEL_WIRE_FRAME_MAX + 8, 99, FrameError::kSizeTooLarge},
      {0xFFFFFFF8u, kSentinelWireColl, FrameError::kSizeTooLarge},
      {20, 99, FrameError::kSizeNotAligned},
      {16, kSentinelWireColl, FrameError::kBodyTooSmall},  // known type, short body
  };
  for (const Case& c : cases) {
    Bytes b(8, 0);
    const SentinelWireFrameHeader h{c.size, c.type, 0};
    std::memcpy(b.data(), &h, 8);
    const ParseResult r = ParseFrame(b.data(), b.size());  // judged from the header alone
    EXPECT_EQ(r.status, ParseStatus::kMalformed) << c.size;
    EXPECT_EQ(r.error, c.error) << c.size;
  }
}

TEST(SessionTest, HelloAckThenRecords) {
  RecordingSink sink;
  Session s(1, &sink);
  Bytes b = HelloBytes();
  for (uint64_t seq = 0; seq < 3; ++seq) {
    const auto rec = MakeColl(9, 1, 2, seq, 1000, 10);
    AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
  }
  ASSERT_EQ(s.Feed(b.data(), b.size()), absl::OkStatus());
  ASSERT_EQ(sink.hellos.size(), 1u);
  EXPECT_STREQ(sink.hellos[0].host, "testhost");
  ASSERT_EQ(sink.records.size(), 3u);
  EXPECT_EQ(sink.records[2].seq, 2u);
  // One ack, accepted.
  ASSERT_EQ(s.PendingOutput().size(), 24u);
  SentinelWireHelloAck ack{};
  std::memcpy(&ack, s.PendingOutput().data() + 8, sizeof(ack));
  EXPECT_EQ(ack.status, static_cast<uint32_t>(kSentinelHelloAccepted));
  EXPECT_EQ(ack.major, SENTINEL_WIRE_MAJOR);
}

TEST(SessionTest, ByteByByteDelivery) {
  RecordingSink sink;
  Session s(1, &sink);
  Bytes b = HelloBytes();
  const auto rec = MakeColl(9, 1, 2, 7, 1000, 10);
  AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
  for (uint8_t byte : b) ASSERT_EQ(s.Feed(&byte, 1), absl::OkStatus());
  ASSERT_EQ(sink.records.size(), 1u);
  EXPECT_EQ(sink.records[0].seq, 7u);
}

TEST(SessionTest, UnknownTypeSkipped) {
  RecordingSink sink;
  Session s(1, &sink);
  Bytes b = HelloBytes();
  const uint8_t blob[40] = {1, 2, 3};
  AppendFrame(&b, 200, blob, sizeof(blob));
  const auto rec = MakeColl(9, 1, 2, 1, 1000, 10);
  AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
  ASSERT_EQ(s.Feed(b.data(), b.size()), absl::OkStatus());
  EXPECT_EQ(s.skipped_unknown(), 1u);
  EXPECT_EQ(sink.records.size(), 1u);
}

// The in-flight frame grew at minor 1 (the oldest collective's signature): a minor-0 plugin's
// 72-byte frame is still a frame, read with the new fields zero; shorter is malformed.
TEST(ParseFrameTest, MinorZeroInFlightFrameIsReadWithTheSignatureZero) {
  SentinelWireInFlight full{};
  full.comm_hash = 0xABC;
  full.enqueued = 5;
  full.completed = 4;
  full.oldest_func = kSentinelFuncAllReduce;
  full.flags = kSentinelInFlightSignature;
  full.oldest_bytes = 1 << 20;
  full.oldest_root = 2;
  full.oldest_datatype = 7;
  Bytes old;
  AppendFrame(&old, kSentinelWireInFlight, &full, SENTINEL_WIRE_INFLIGHT_V0_SIZE);
  ParseResult r = ParseFrame(old.data(), old.size());
  ASSERT_EQ(r.status, ParseStatus::kFrame);
  const auto read = ReadPayload<SentinelWireInFlight>(r.frame);
  EXPECT_EQ(read.comm_hash, 0xABCu);
  EXPECT_EQ(read.oldest_func, kSentinelFuncAllReduce);
  EXPECT_EQ(read.oldest_bytes, 0u);  // not sent: zero, never the bytes after the frame
  EXPECT_EQ(read.oldest_root, 0);
  Bytes now;
  AppendFrame(&now, kSentinelWireInFlight, &full, sizeof(full));
  r = ParseFrame(now.data(), now.size());
  ASSERT_EQ(r.status, ParseStatus::kFrame);
  EXPECT_EQ(ReadPayload<SentinelWireInFlight>(r.frame).oldest_bytes, 1u << 20);
  EXPECT_EQ(ReadPayload<SentinelWireInFlight>(r.frame).oldest_datatype, 7);
  Bytes shorter;
  AppendFrame(&shorter, kSentinelWireInFlight, &full, SENTINEL_WIRE_INFLIGHT_V0_SIZE - 8);
  r = ParseFrame(shorter.data(), shorter.size());
  EXPECT_EQ(r.status, ParseStatus::kMalformed);
  EXPECT_EQ(r.error, FrameError::kBodyTooSmall);
}

TEST(SessionTest, LargerRecordAcceptedPrefixRead) {
  RecordingSink sink;
  Session s(1, &sink);
  Bytes b = HelloBytes();
  // A newer plugin's record: our struct plus 24 bytes of fields we do not know.
  std::vector<uint8_t> body(sizeof(SentinelWireCollRecord) + 24, 0xAB);
  const auto rec = MakeColl(9, 1, 2, 11, 1000, 10);
  std::memcpy(body.data(), &rec, sizeof(rec));
  AppendFrame(&b, kSentinelWireColl, body.data(), body.size());
  const auto next = MakeColl(9, 1, 2, 12, 1000, 10);
  AppendFrame(&b, kSentinelWireColl, &next, sizeof(next));
  ASSERT_EQ(s.Feed(b.data(), b.size()), absl::OkStatus());
  ASSERT_EQ(sink.records.size(), 2u);
  EXPECT_EQ(sink.records[0].seq, 11u);
  EXPECT_EQ(sink.records[0].comm_hash, 9u);
  EXPECT_EQ(sink.records[1].seq, 12u);
}

TEST(SessionTest, MajorMismatchRefusedWithAck) {
  RecordingSink sink;
  Session s(1, &sink);
  const Bytes b = testing::Frame(kSentinelWireHello, MakeHello(77, SENTINEL_WIRE_MAJOR + 1));
  EXPECT_EQ(s.Feed(b.data(), b.size()),
            absl::FailedPreconditionError("connection closed: major_mismatch"));
  EXPECT_EQ(s.reason(), CloseReason::kMajorMismatch);
  EXPECT_EQ(s.refused_major(), SENTINEL_WIRE_MAJOR + 1);
  EXPECT_TRUE(sink.hellos.empty());
  ASSERT_EQ(s.PendingOutput().size(), 24u);
  SentinelWireHelloAck ack{};
  std::memcpy(&ack, s.PendingOutput().data() + 8, sizeof(ack));
  EXPECT_EQ(ack.status, static_cast<uint32_t>(kSentinelHelloRefusedMajor));
}

TEST(SessionTest, BadHelloRefused) {
  {
    RecordingSink sink;
    Session s(1, &sink);
    auto h = MakeHello(1);
    h.magic = 0xDEADBEEF;
    const Bytes b = testing::Frame(kSentinelWireHello, h);
    EXPECT_EQ(s.Feed(b.data(), b.size()),
              absl::FailedPreconditionError("connection closed: bad_hello"));
    EXPECT_EQ(s.reason(), CloseReason::kBadHello);
  }
  {
    RecordingSink sink;
    Session s(1, &sink);  // records before any hello
    const Bytes b = testing::Frame(kSentinelWireColl, MakeColl(1, 0, 1, 0, 0, 0));
    EXPECT_EQ(s.Feed(b.data(), b.size()),
              absl::FailedPreconditionError("connection closed: bad_hello"));
    EXPECT_EQ(s.reason(), CloseReason::kBadHello);
    EXPECT_TRUE(sink.records.empty());
  }
}

TEST(SessionTest, GarbageAfterHelloClosesButKeepsEarlierRecords) {
  RecordingSink sink;
  Session s(1, &sink);
  Bytes b = HelloBytes();
  const auto rec = MakeColl(9, 1, 2, 3, 1000, 10);
  AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
  for (int i = 0; i < 64; ++i) b.push_back(static_cast<uint8_t>(0x5A ^ (i * 31)));
  const absl::Status st = s.Feed(b.data(), b.size());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(absl::StartsWith(st.message(), "connection closed: malformed (")) << st;
  EXPECT_EQ(s.reason(), CloseReason::kMalformed);
  EXPECT_EQ(sink.records.size(), 1u);
}

TEST(SessionTest, OversizedAndShortKnownFramesAreMalformed) {
  const std::pair<uint32_t, const char*> cases[] = {{SENTINEL_WIRE_FRAME_MAX + 8, "size_too_large"},
                                                    {8u + 64u, "body_too_small"},
                                                    {12u, "size_not_multiple_of_8"}};
  for (const auto& [declared, error] : cases) {
    RecordingSink sink;
    Session s(1, &sink);
    Bytes b = HelloBytes();
    const uint8_t zeros[64] = {};
    AppendFrame(&b, kSentinelWireColl, zeros, sizeof(zeros), declared);
    EXPECT_EQ(s.Feed(b.data(), b.size()), absl::InvalidArgumentError(absl::StrCat(
                                              "connection closed: malformed (", error, ")")))
        << declared;
    EXPECT_EQ(s.reason(), CloseReason::kMalformed) << declared;
  }
}

TEST(SessionTest, ControlFramesKeepOrder) {
  RecordingSink sink;
  Session s(1, &sink);
  Bytes b = HelloBytes();
  const auto init = testing::MakeCommInit(9, 0, 2);
  AppendFrame(&b, kSentinelWireCommInit, &init, sizeof(init));
  SentinelWireHeartbeat hb{};
  AppendFrame(&b, kSentinelWireHeartbeat, &hb, sizeof(hb));
  ASSERT_EQ(s.Feed(b.data(), b.size()), absl::OkStatus());
  ASSERT_EQ(sink.control_types.size(), 2u);
  EXPECT_EQ(sink.control_types[0], kSentinelWireCommInit);
  EXPECT_EQ(sink.control_types[1], kSentinelWireHeartbeat);
}

// Commit's status names why the connection closes: a malformed frame with its frame error, a
// protocol error with its reason; ok while the stream is good.
TEST(SessionTest, CommitStatusSaysWhyItCloses) {
  {
    RecordingSink sink;
    Session s(1, &sink);
    const Bytes hello = HelloBytes();
    std::memcpy(s.WritableTail(), hello.data(), hello.size());
    EXPECT_TRUE(s.Commit(hello.size()).ok());
    const SentinelWireFrameHeader bad{20, 99, 0};  // not a multiple of 8
    std::memcpy(s.WritableTail(), &bad, sizeof(bad));
    const absl::Status st = s.Commit(sizeof(bad));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(st.message(), "connection closed: malformed (size_not_multiple_of_8)");
    EXPECT_EQ(s.reason(), CloseReason::kMalformed);
  }
  {
    RecordingSink sink;
    Session s(1, &sink);
    Bytes b = HelloBytes();
    const Bytes again = HelloBytes();
    b.insert(b.end(), again.begin(), again.end());
    std::memcpy(s.WritableTail(), b.data(), b.size());
    const absl::Status st = s.Commit(b.size());
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(st.message(), "connection closed: bad_hello");
  }
}

TEST(SessionTest, SecondHelloIsAProtocolError) {
  RecordingSink sink;
  Session s(1, &sink);
  Bytes b = HelloBytes();
  const Bytes again = HelloBytes();
  b.insert(b.end(), again.begin(), again.end());
  EXPECT_EQ(s.Feed(b.data(), b.size()),
            absl::FailedPreconditionError("connection closed: bad_hello"));
  EXPECT_EQ(s.reason(), CloseReason::kBadHello);
}

// Feed returns the status of the Commit that closed the connection, also when that is not its
// first Commit (a stream larger than the buffer is committed in chunks); every record before the
// bad frame has reached the sink, none after it.
TEST(SessionTest, FeedReturnsTheClosingCommitsStatus) {
  RecordingSink sink;
  Session s(1, &sink);
  Bytes b = HelloBytes();
  const auto rec = MakeColl(9, 1, 2, 0, 1000, 10);
  size_t good_records = 0;
  for (; b.size() < Session::kBufferSize + 64; ++good_records) {
    AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
  }
  ASSERT_GT(b.size(), Session::kBufferSize);  // the bad frame is not in the first chunk
  AppendFrame(&b, 99, nullptr, 0, 20);        // declares 20 bytes: not a multiple of 8
  for (int i = 0; i < 1024; ++i) AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
  EXPECT_EQ(s.Feed(b.data(), b.size()),
            absl::InvalidArgumentError("connection closed: malformed (size_not_multiple_of_8)"));
  EXPECT_EQ(s.reason(), CloseReason::kMalformed);
  EXPECT_EQ(sink.records.size(), good_records);
}

}  // namespace
}  // namespace sentinel::collector
