// The reader of the frames sentineld sends the plugin on its own connection (collector -> plugin:
// schemas/wire/wire_format.md "Collector -> plugin frames"). Every byte comes from a peer: the
// reader checks each header before it waits for a payload, never reads a byte of the next frame,
// and stops after a bounded number of frames and bytes per call, so that a peer that keeps
// writing can cost the caller (the drainer thread, or the application's thread in
// ncclCommDestroy's final drain) only a bounded amount of work, never a wait.
//
// Kept apart from the socket so that a fuzzer (tests/fuzz/collector_frames_fuzzer.cc) drives the
// very code the plugin runs. No allocation after Allocate(), never throws.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {

struct IncomingLimits {
  size_t max_frames = 8;                 // whole frames handed to the callback per call
  size_t max_bytes = size_t{16} * 1024;  // bytes received per call (about 13 hang verdicts)
};

enum class IncomingEnd : uint8_t {
  kDrained,      // the source had nothing more (EAGAIN): read again at the next call
  kBudgetSpent,  // max_frames or max_bytes reached; the rest waits for the next call
  kClosed,       // the peer closed the connection (recv returned 0)
  kError,        // recv failed for another reason
  kMalformed,    // a header with an impossible size: the stream cannot be followed any further
};

// recv(2)-like source: bytes read, 0 at end of stream, -1 with errno (EAGAIN: nothing now).
using IncomingRecvFn = ssize_t (*)(void* ctx, void* buf, size_t n);
// A whole frame: its type and payload (header excluded, `len` = size - 8 bytes).
using IncomingFrameFn = void (*)(void* ctx, uint16_t type, const uint8_t* payload, size_t len);

class IncomingFrames {
 public:
  // The one frame buffer (SENTINEL_WIRE_FRAME_MAX bytes). False when out of memory.
  bool Allocate() noexcept;
  // Forgets a partial frame (a new connection).
  void Reset() noexcept { have_ = 0; }
  // Reads without waiting (the source must not block) and hands over whole frames, at most
  // `limits` worth. Frames of unknown types, and shorter or longer payloads than a known struct,
  // are the callback's to judge (the compatibility rules in wire_format.md).
  IncomingEnd ReadSome(IncomingRecvFn recv_fn, void* recv_ctx, const IncomingLimits& limits,
                       IncomingFrameFn on_frame, void* frame_ctx) noexcept;
  size_t partial_bytes() const { return have_; }

 private:
  std::unique_ptr<uint8_t[]> buf_;
  size_t have_ = 0;
};

// A hang verdict out of a type-13 payload: false when it is shorter than the struct (a longer one
// is a newer sentineld: its known prefix is read). The strings are NUL-terminated here, whatever
// the peer sent, so that later code may treat them as C strings (they still need escaping).
bool DecodeHangVerdict(const uint8_t* payload, size_t len, SentinelWireHangVerdict* out) noexcept;

// A refusal out of a type-16 payload: false when it is shorter than the struct or its magic is
// wrong. Its reason is a code; the caller words it (an unknown code as its number).
bool DecodeRefused(const uint8_t* payload, size_t len, SentinelWireRefused* out) noexcept;

}  // namespace sentinel::plugin
