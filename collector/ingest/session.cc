// Per-connection protocol handling: see session.h.
#include "collector/ingest/session.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace sentinel::collector {

const char* CloseReasonName(CloseReason reason) {
  switch (reason) {
    case CloseReason::kNone:
      return "none";
    case CloseReason::kMalformed:
      return "malformed";
    case CloseReason::kBadHello:
      return "bad_hello";
    case CloseReason::kMajorMismatch:
      return "major_mismatch";
    case CloseReason::kUnexpectedAck:
      return "unexpected_ack";
  }
  return "unknown";
}

namespace {

// Appends one whole collector -> plugin frame: header, then the payload struct.
template <typename T>
void AppendFrame(std::string* out, uint16_t type, const T& payload) {
  const SentinelWireFrameHeader header{sizeof(SentinelWireFrameHeader) + sizeof(T), type, 0};
  out->append(reinterpret_cast<const char*>(&header), sizeof(header));
  out->append(reinterpret_cast<const char*>(&payload), sizeof(payload));
}

}  // namespace

std::string RefusedFrame(uint16_t reason, uint32_t limit, uint32_t held) {
  SentinelWireRefused refused{};
  refused.magic = SENTINEL_WIRE_MAGIC;
  refused.reason = reason;
  refused.status = kSentinelHelloRefusedOther;
  refused.limit = limit;
  refused.held = held;
  std::string out;
  AppendFrame(&out, kSentinelWireRefused, refused);
  return out;
}

std::string Session::CloseDetail() const {
  if (frame_error_ != FrameError::kNone) return FrameErrorName(frame_error_);
  switch (hello_problem_) {
    case HelloProblem::kNotHello:
      return absl::StrCat("the first frame is of type ", first_type_, ", not a hello");
    case HelloProblem::kBadMagic:
      return absl::StrCat("the hello's magic is 0x", absl::Hex(bad_magic_), ", not 0x",
                          absl::Hex(SENTINEL_WIRE_MAGIC));
    case HelloProblem::kSecondHello:
      return "a second hello";
    case HelloProblem::kCutShort:
      return "the peer closed in the middle of its hello";
    case HelloProblem::kNone:
      break;
  }
  return has_partial() ? "truncated" : "none";
}

void Session::NoteEof() {
  if (has_partial() && !hello_done_ && hello_problem_ == HelloProblem::kNone) {
    hello_problem_ = HelloProblem::kCutShort;
  }
}

Session::Session(int client, IngestSink* sink)
    : client_(client), sink_(sink), buffer_(kBufferSize) {
  batch_.reserve(kBufferSize / sizeof(SentinelWireCollRecord) + 1);
}

void Session::QueueAck(uint32_t status) {
  SentinelWireHelloAck ack{};
  ack.magic = SENTINEL_WIRE_MAGIC;
  ack.major = SENTINEL_WIRE_MAJOR;
  ack.minor = SENTINEL_WIRE_MINOR;
  ack.status = status;
  AppendFrame(&output_, kSentinelWireHelloAck, ack);
}

void Session::FlushBatch() {
  if (batch_.empty()) return;
  sink_->OnRecords(client_, batch_.data(), batch_.size());
  batch_.clear();
}

absl::Status Session::HandleFrame(const Frame& frame) {
  ++frames_;
  if (!hello_done_) {
    if (frame.type != kSentinelWireHello) {
      hello_problem_ = HelloProblem::kNotHello;
      first_type_ = frame.type;
      return Close(CloseReason::kBadHello);
    }
    hello_ = ReadPayload<SentinelWireHello>(frame);
    hello_.host[sizeof(hello_.host) - 1] = '\0';
    hello_.job_id[sizeof(hello_.job_id) - 1] = '\0';
    switch (CheckHello(hello_)) {
      case HelloVerdict::kBadMagic:
        hello_problem_ = HelloProblem::kBadMagic;
        bad_magic_ = hello_.magic;
        return Close(CloseReason::kBadHello);
      case HelloVerdict::kMajorMismatch:
        refused_major_ = hello_.major;
        QueueAck(kSentinelHelloRefusedMajor);
        return Close(CloseReason::kMajorMismatch);
      case HelloVerdict::kAccepted:
        break;
    }
    hello_done_ = true;
    QueueAck(kSentinelHelloAccepted);
    sink_->OnHello(client_, hello_);
    return absl::OkStatus();
  }
  switch (frame.type) {
    case kSentinelWireColl:
      batch_.push_back(ReadPayload<SentinelWireCollRecord>(frame));
      ++records_;
      return absl::OkStatus();
    case kSentinelWireHello:
      hello_problem_ = HelloProblem::kSecondHello;
      return Close(CloseReason::kBadHello);  // a second hello is a protocol error
    case kSentinelWireHelloAck:
      return Close(CloseReason::kUnexpectedAck);
    case kSentinelWireCommInit:
    case kSentinelWireCommEnd:
    case kSentinelWireHeartbeat:
    case kSentinelWireGpuWindow:
    case kSentinelWireKernelAttribution:
    case kSentinelWireVerdict:
    case kSentinelWireBaselineResult:
    case kSentinelWireNetDevice:  // libnccl-net-sentinel.so
    case kSentinelWireNetConnStats:
    case kSentinelWireInFlight:
    case kSentinelWireHangVerdict:  // ours to the plugin: the aggregator ignores one sent back
      FlushBatch();                 // keep the client's order across record kinds
      sink_->OnControlFrame(client_, frame);
      return absl::OkStatus();
    default:
      ++skipped_unknown_;  // newer plugin: unknown types are skipped by contract
      return absl::OkStatus();
  }
}

absl::Status Session::Close(CloseReason reason) {
  reason_ = reason;
  return CloseStatus();
}

absl::Status Session::CloseStatus() const {
  if (reason_ == CloseReason::kMalformed || frame_error_ != FrameError::kNone) {
    return absl::InvalidArgumentError(absl::StrCat("connection closed: ", CloseReasonName(reason_),
                                                   " (", FrameErrorName(frame_error_), ")"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("connection closed: ", CloseReasonName(reason_)));
}

absl::Status Session::Commit(size_t n) {
  filled_ += n;
  size_t offset = 0;
  absl::Status status;
  while (status.ok()) {
    const ParseResult r = ParseFrame(buffer_.data() + offset, filled_ - offset);
    if (r.status == ParseStatus::kNeedMore) break;
    if (r.status == ParseStatus::kMalformed) {
      frame_error_ = r.error;
      status = Close(hello_done_ ? CloseReason::kMalformed : CloseReason::kBadHello);
      break;
    }
    status = HandleFrame(r.frame);
    offset += r.consumed;
  }
  // Records already validated before a bad frame are kept: they came from the same peer and
  // were individually valid; only the connection is dropped.
  FlushBatch();
  if (offset > 0) {
    std::memmove(buffer_.data(), buffer_.data() + offset, filled_ - offset);
    filled_ -= offset;
  }
  return status;
}

absl::Status Session::Feed(const uint8_t* data, size_t n) {
  while (n > 0) {
    const size_t chunk = std::min(n, WritableSize());
    std::memcpy(WritableTail(), data, chunk);
    if (absl::Status committed = Commit(chunk); !committed.ok()) return committed;
    data += chunk;
    n -= chunk;
  }
  return absl::OkStatus();
}

}  // namespace sentinel::collector
