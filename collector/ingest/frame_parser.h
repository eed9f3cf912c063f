// Validation of plugin -> sentineld frames (schemas/wire/wire_format.md). Everything that
// arrives on the socket is untrusted; this is the only code that interprets its bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

enum class ParseStatus { kFrame, kNeedMore, kMalformed };

enum class FrameError {
  kNone,
  kSizeTooSmall,    // size < 8
  kSizeNotAligned,  // size % 8 != 0
  kSizeTooLarge,    // size > SENTINEL_WIRE_FRAME_MAX
  kBodyTooSmall,    // a known type with a payload shorter than its struct
  kTruncated,       // the peer closed in the middle of a frame
};

const char* FrameErrorName(FrameError error);

struct Frame {
  uint16_t type = 0;
  uint16_t flags = 0;
  const uint8_t* payload = nullptr;  // points into the caller's buffer; may be unaligned
  size_t payload_size = 0;
};

struct ParseResult {
  ParseStatus status = ParseStatus::kNeedMore;
  FrameError error = FrameError::kNone;
  size_t consumed = 0;  // bytes of this frame (valid for kFrame)
  Frame frame;
};

// The least payload a known type may carry: its struct's size, or, for a struct that grew at its
// end, the size it had first (an older plugin's frame; the fields after it read as zeros). 0 for
// unknown types (skipped).
size_t KnownPayloadSize(uint16_t type);

// Looks at the first frame of [data, data + n). kNeedMore when the frame is not complete yet;
// kMalformed as soon as the header (or, for known types, the size) proves it bad.
ParseResult ParseFrame(const uint8_t* data, size_t n);

// Copies the known prefix of a payload into `out` (records larger than we know are accepted); a
// shorter payload (an older sender of a grown struct, which ParseFrame let through) leaves the
// fields after it zero.
template <typename T>
T ReadPayload(const Frame& frame);

enum class HelloVerdict { kAccepted, kBadMagic, kMajorMismatch };
HelloVerdict CheckHello(const SentinelWireHello& hello);

}  // namespace sentinel::collector

#include <cstring>

namespace sentinel::collector {
template <typename T>
T ReadPayload(const Frame& frame) {
  T value;
  if (frame.payload_size >= sizeof(T)) {
    // The usual case, a copy of a known size (a few vector moves, where the variable-length copy
    // and clear cost a string instruction's start-up each: per record, sentineld's hot spot).
    std::memcpy(&value, frame.payload, sizeof(T));
    return value;
  }
  std::memset(&value, 0, sizeof(T));
  std::memcpy(&value, frame.payload, frame.payload_size);
  return value;
}
}  // namespace sentinel::collector
