// FrameBuffer: the plugin -> sentineld send buffer, without the socket. It assembles wire frames
// (header, payload, zero padding to 8 bytes; schemas/wire/sentinel_wire.h), batches collective
// records as whole frames into one fixed allocation, tracks which bytes the kernel has taken, and
// accounts for what is lost: frames wholly sent (collective records among them) and, when a
// connection breaks, the frames that never left whole. CollectorSink owns one and does the I/O.
//
// Layout: [walk, head) holds frames partly handed to the kernel (walk is the first frame not yet
// wholly sent), [head, tail) the bytes not handed over yet. Single-threaded (the drainer's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "plugin/base/status.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {

// The frame size of a payload: header + payload, rounded up to a multiple of 8.
constexpr size_t WireFrameBytes(size_t payload) {
  return (sizeof(SentinelWireFrameHeader) + payload + 7) & ~size_t{7};
}

class FrameBuffer {
 public:
  static constexpr size_t kHeaderBytes = sizeof(SentinelWireFrameHeader);
  static constexpr size_t kCollFrameBytes = kHeaderBytes + sizeof(SentinelWireCollRecord);
  static_assert(kCollFrameBytes % 8 == 0, "coll frames stay 8-byte multiples");
  static constexpr size_t FrameBytes(size_t payload) { return WireFrameBytes(payload); }
  // The smallest buffer accepted: room for two of the largest control frames.
  static constexpr size_t kMinCapacity = 2 * WireFrameBytes(sizeof(SentinelWireVerdict));

  // What a discarded buffer held.
  struct Lost {
    uint64_t records = 0;  // collective records (kSentinelWireColl frames)
    uint64_t control = 0;  // every other frame
  };

  FrameBuffer() = default;
  FrameBuffer(const FrameBuffer&) = delete;
  FrameBuffer& operator=(const FrameBuffer&) = delete;

  // Allocates `capacity` bytes (at least kMinCapacity), once; not ok when there is no memory.
  Status Allocate(size_t capacity) noexcept;
  size_t capacity() const { return cap_; }

  // Frames `payload` (`size` bytes) at the end; false, nothing written, when the frame exceeds
  // SENTINEL_WIRE_FRAME_MAX or does not fit even after moving the unsent bytes to the front.
  bool Append(uint16_t type, const void* payload, size_t size);
  // Writes as many whole collective-record frames as fit after the tail, without moving anything
  // (the caller may send first to make room); returns how many were written.
  size_t AppendCollRecords(const SentinelWireCollRecord* records, size_t n);
  // Room for `bytes` after the tail, moving the unsent bytes (and the partly sent frame) to the
  // front if that helps; false when even that is not enough.
  bool MakeRoom(size_t bytes);
  bool HasRoomAtTail(size_t bytes) const { return cap_ - tail_ >= bytes; }

  // The bytes not handed to the kernel yet.
  const uint8_t* unsent() const { return buf_.get() + head_; }
  size_t unsent_bytes() const { return tail_ - head_; }
  bool empty() const { return head_ == tail_; }

  // The kernel took the next `n` unsent bytes (n <= unsent_bytes()).
  void MarkSent(size_t n) { head_ += n; }
  // Walks the frames the kernel has now taken whole; returns the collective records among them.
  // When everything is sent, the buffer starts again at offset 0.
  uint64_t CollectSent();
  // Drops every frame not wholly sent (a broken connection) and says what they were.
  Lost DiscardUnsent();
  // Forgets everything without counting (a fresh connection starts on an empty buffer).
  void Reset() { walk_ = head_ = tail_ = 0; }

 private:
  std::unique_ptr<uint8_t[]> buf_;
  size_t cap_ = 0;
  size_t walk_ = 0;
  size_t head_ = 0;
  size_t tail_ = 0;
};

}  // namespace sentinel::plugin
