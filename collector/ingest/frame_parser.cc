// Frame validation: size rules, known-type minimum sizes, the hello check.
#include "collector/ingest/frame_parser.h"

#include <cstring>

namespace sentinel::collector {

const char* FrameErrorName(FrameError error) {
  switch (error) {
    case FrameError::kNone:
      return "none";
    case FrameError::kSizeTooSmall:
      return "size_too_small";
    case FrameError::kSizeNotAligned:
      return "size_not_multiple_of_8";
    case FrameError::kSizeTooLarge:
      return "size_too_large";
    case FrameError::kBodyTooSmall:
      return "body_too_small";
    case FrameError::kTruncated:
      return "truncated";
  }
  return "unknown";
}

size_t KnownPayloadSize(uint16_t type) {
  switch (type) {
    case kSentinelWireHello:
      return sizeof(SentinelWireHello);
    case kSentinelWireCommInit:
      return sizeof(SentinelWireCommInit);
    case kSentinelWireColl:
      return sizeof(SentinelWireCollRecord);
    case kSentinelWireGpuWindow:
      return sizeof(SentinelWireGpuWindow);
    case kSentinelWireKernelAttribution:
      return sizeof(SentinelWireKernelAttribution);
    case kSentinelWireHeartbeat:
      return sizeof(SentinelWireHeartbeat);
    case kSentinelWireVerdict:
      return sizeof(SentinelWireVerdict);
    case kSentinelWireCommEnd:
      return sizeof(SentinelWireCommEnd);
    case kSentinelWireInFlight:  // grew at minor 1 (the oldest collective's signature)
      return SENTINEL_WIRE_INFLIGHT_V0_SIZE;
    case kSentinelWireHelloAck:
      return sizeof(SentinelWireHelloAck);
    case kSentinelWireBaselineResult:
      return sizeof(SentinelWireBaseline);
    case kSentinelWireNetDevice:  // libnccl-net-sentinel.so
      return sizeof(SentinelWireNetDevice);
    case kSentinelWireNetConnStats:
      return sizeof(SentinelWireNetConnStats);
    case kSentinelWireHangVerdict:  // collector -> plugin; validated if it ever comes back
      return sizeof(SentinelWireHangVerdict);
    default:
      return 0;
  }
}

ParseResult ParseFrame(const uint8_t* data, size_t n) {
  ParseResult result;
  if (n < sizeof(SentinelWireFrameHeader)) return result;  // kNeedMore
  SentinelWireFrameHeader header;
  std::memcpy(&header, data, sizeof(header));
  // The size check comes before waiting for the body, so a garbage or oversized header is
  // refused at once instead of making us buffer up to 4 GiB.
  if (header.size < sizeof(header)) {
    result.status = ParseStatus::kMalformed;
    result.error = FrameError::kSizeTooSmall;
    return result;
  }
  if (header.size > SENTINEL_WIRE_FRAME_MAX) {
    result.status = ParseStatus::kMalformed;
    result.error = FrameError::kSizeTooLarge;
    return result;
  }
  if (header.size % 8 != 0) {
    result.status = ParseStatus::kMalformed;
    result.error = FrameError::kSizeNotAligned;
    return result;
  }
  const size_t payload_size = header.size - sizeof(header);
  if (payload_size < KnownPayloadSize(header.type)) {
    result.status = ParseStatus::kMalformed;
    result.error = FrameError::kBodyTooSmall;
    return result;
  }
  if (n < header.size) return result;  // kNeedMore
  result.status = ParseStatus::kFrame;
  result.consumed = header.size;
  result.frame.type = header.type;
  result.frame.flags = header.flags;
  result.frame.payload = data + sizeof(header);
  result.frame.payload_size = payload_size;
  return result;
}

HelloVerdict CheckHello(const SentinelWireHello& hello) {
  if (hello.magic != SENTINEL_WIRE_MAGIC) return HelloVerdict::kBadMagic;
  if (hello.major != SENTINEL_WIRE_MAJOR) return HelloVerdict::kMajorMismatch;
  return HelloVerdict::kAccepted;
}

}  // namespace sentinel::collector
