// FrameBuffer: frame assembly, batching and loss accounting of the sentineld stream (see
// frame_buffer.h). No sockets here.
#include "plugin/transport/frame_buffer.h"

#include <cstring>
#include <new>

#include "common/dcheck.h"
#include "plugin/base/invariant.h"

namespace sentinel::plugin {

Status FrameBuffer::Allocate(size_t capacity) noexcept {
  if (buf_ != nullptr) return Status::Ok();
  size_t want = capacity < kMinCapacity ? kMinCapacity : capacity;
  buf_.reset(new (std::nothrow) uint8_t[want]);
  if (buf_ == nullptr) {
    return Status(StatusCode::kResourceExhausted, "no memory for the collector stream buffer");
  }
  cap_ = want;
  Reset();
  return Status::Ok();
}

bool FrameBuffer::MakeRoom(size_t bytes) {
  // Checked in every build: out of order, the sizes below wrap and the append writes past the
  // buffer, in the host's process. The step is refused and the plugin turned off.
  const bool ordered = walk_ <= head_ && head_ <= tail_ && tail_ <= cap_;
  SENTINEL_DCHECK(ordered);
  if (!ordered) {
    InvariantBroken("walk_ <= head_ <= tail_ <= cap_", __FILE__, __LINE__);
    return false;
  }
  if (cap_ - tail_ >= bytes) return true;
  if (cap_ - (tail_ - walk_) < bytes) return false;
  // Slide the unsent bytes (and the partly sent frame) to the front.
  std::memmove(buf_.get(), buf_.get() + walk_, tail_ - walk_);
  head_ -= walk_;
  tail_ -= walk_;
  walk_ = 0;
  return true;
}

bool FrameBuffer::Append(uint16_t type, const void* payload, size_t size) {
  size_t frame = FrameBytes(size);
  if (buf_ == nullptr || frame > SENTINEL_WIRE_FRAME_MAX || !MakeRoom(frame)) return false;
  uint8_t* p = buf_.get() + tail_;
  SentinelWireFrameHeader h{static_cast<uint32_t>(frame), type, 0};
  std::memcpy(p, &h, sizeof(h));
  if (size > 0) std::memcpy(p + kHeaderBytes, payload, size);
  if (frame > kHeaderBytes + size) {
    std::memset(p + kHeaderBytes + size, 0, frame - kHeaderBytes - size);
  }
  tail_ += frame;
  return true;
}

size_t FrameBuffer::AppendCollRecords(const SentinelWireCollRecord* records, size_t n) {
  if (buf_ == nullptr) return 0;
  size_t fit = (cap_ - tail_) / kCollFrameBytes;
  if (fit > n) fit = n;
  uint8_t* p = buf_.get() + tail_;
  const SentinelWireFrameHeader h{static_cast<uint32_t>(kCollFrameBytes), kSentinelWireColl, 0};
  for (size_t i = 0; i < fit; ++i, p += kCollFrameBytes) {
    std::memcpy(p, &h, sizeof(h));
    std::memcpy(p + kHeaderBytes, &records[i], sizeof(SentinelWireCollRecord));
  }
  tail_ += fit * kCollFrameBytes;
  return fit;
}

uint64_t FrameBuffer::CollectSent() {
  uint64_t sent = 0;
  while (walk_ + kHeaderBytes <= head_) {
    SentinelWireFrameHeader h;
    std::memcpy(&h, buf_.get() + walk_, sizeof(h));
    // Only Append wrote these headers: a size under a header would never advance (release
    // builds stop at it below, leaving the rest unsent).
    SENTINEL_DCHECK(h.size >= kHeaderBytes);
    if (h.size < kHeaderBytes || walk_ + h.size > head_) break;
    if (h.type == kSentinelWireColl) ++sent;
    walk_ += h.size;
  }
  if (walk_ == tail_) Reset();
  return sent;
}

FrameBuffer::Lost FrameBuffer::DiscardUnsent() {
  Lost lost;
  size_t off = walk_;
  while (off + kHeaderBytes <= tail_) {
    SentinelWireFrameHeader h;
    std::memcpy(&h, buf_.get() + off, sizeof(h));
    SENTINEL_DCHECK(h.size >= kHeaderBytes);
    if (h.size < kHeaderBytes) break;
    if (h.type == kSentinelWireColl) {
      ++lost.records;
    } else {
      ++lost.control;
    }
    off += h.size;
  }
  Reset();
  return lost;
}

}  // namespace sentinel::plugin
