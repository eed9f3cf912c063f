// Bounded reading of collector -> plugin frames (see incoming_frames.h).
#include "plugin/transport/incoming_frames.h"

#include <errno.h>

#include <cstring>
#include <new>

namespace sentinel::plugin {
namespace {

constexpr size_t kHeaderBytes = sizeof(SentinelWireFrameHeader);

}  // namespace

bool IncomingFrames::Allocate() noexcept {
  if (buf_ == nullptr) buf_.reset(new (std::nothrow) uint8_t[SENTINEL_WIRE_FRAME_MAX]);
  have_ = 0;
  return buf_ != nullptr;
}

IncomingEnd IncomingFrames::ReadSome(IncomingRecvFn recv_fn, void* recv_ctx,
                                     const IncomingLimits& limits, IncomingFrameFn on_frame,
                                     void* frame_ctx) noexcept {
  if (buf_ == nullptr) return IncomingEnd::kError;
  size_t frames = 0;
  size_t bytes = 0;
  // EINTR is retried a few times only: a signal storm must not keep us here either.
  int interrupted = 0;
  while (true) {
    // Only the header first, then exactly the rest of the frame: never a byte of the next one.
    size_t need = kHeaderBytes;
    if (have_ >= kHeaderBytes) {
      SentinelWireFrameHeader h;
      std::memcpy(&h, buf_.get(), sizeof(h));
      if (h.size < kHeaderBytes || h.size % 8 != 0 || h.size > SENTINEL_WIRE_FRAME_MAX) {
        have_ = 0;
        return IncomingEnd::kMalformed;
      }
      need = h.size;
    }
    if (have_ < need) {
      if (frames >= limits.max_frames || bytes >= limits.max_bytes)
        return IncomingEnd::kBudgetSpent;
      ssize_t got = recv_fn(recv_ctx, buf_.get() + have_, need - have_);
      if (got == 0) return IncomingEnd::kClosed;
      if (got < 0) {
        if (errno == EINTR && ++interrupted < 8) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return IncomingEnd::kDrained;
        return IncomingEnd::kError;
      }
      const size_t n =
          static_cast<size_t>(got) < need - have_ ? static_cast<size_t>(got) : need - have_;
      have_ += n;
      bytes += n;
      continue;
    }
    SentinelWireFrameHeader h;
    std::memcpy(&h, buf_.get(), sizeof(h));
    have_ = 0;
    ++frames;
    if (on_frame != nullptr)
      on_frame(frame_ctx, h.type, buf_.get() + kHeaderBytes, h.size - kHeaderBytes);
  }
}

bool DecodeHangVerdict(const uint8_t* payload, size_t len, SentinelWireHangVerdict* out) noexcept {
  if (payload == nullptr || out == nullptr || len < sizeof(SentinelWireHangVerdict)) return false;
  std::memcpy(out, payload, sizeof(*out));
  out->culprits[sizeof(out->culprits) - 1] = '\0';
  out->exclude[sizeof(out->exclude) - 1] = '\0';
  out->alert_id[sizeof(out->alert_id) - 1] = '\0';
  return true;
}

bool DecodeRefused(const uint8_t* payload, size_t len, SentinelWireRefused* out) noexcept {
  if (payload == nullptr || out == nullptr || len < sizeof(SentinelWireRefused)) return false;
  std::memcpy(out, payload, sizeof(*out));
  return out->magic == SENTINEL_WIRE_MAGIC;
}

}  // namespace sentinel::plugin
