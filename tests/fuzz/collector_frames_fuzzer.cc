// libFuzzer target: the plugin's reader of collector -> plugin frames (plugin/transport/
// incoming_frames.h), the code that takes whatever the peer at the socket writes. The input is
// the byte stream, delivered in pieces whose sizes come from its first bytes; the reader must
// never crash, read out of bounds or loop, must stay within its per-call bounds, and every
// verdict's strings must come out of EscapeWireText without a control byte.
//
// Input: byte 0 = flags (bit 0: the peer closes at the end), bytes 1..4 = piece sizes (cycled,
// 0 read as 1), the rest = the stream.
#include <errno.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "common/wire_text.h"
#include "plugin/transport/incoming_frames.h"

namespace {

struct Source {
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t at = 0;
  const uint8_t* pieces = nullptr;
  size_t n_pieces = 0;
  size_t next_piece = 0;
  bool close_at_end = false;
  size_t handed = 0;  // bytes handed to the reader in the current call
};

ssize_t Recv(void* ctx, void* buf, size_t n) {
  auto* s = static_cast<Source*>(ctx);
  if (s->at == s->size) {
    if (s->close_at_end) return 0;
    errno = EAGAIN;
    return -1;
  }
  size_t piece = s->n_pieces > 0 ? s->pieces[s->next_piece++ % s->n_pieces] : 4096;
  if (piece == 0) piece = 1;
  size_t take = n < piece ? n : piece;
  if (take > s->size - s->at) take = s->size - s->at;
  std::memcpy(buf, s->data + s->at, take);
  s->at += take;
  s->handed += take;
  return static_cast<ssize_t>(take);
}

struct Seen {
  size_t frames = 0;  // in the current call
};

void OnFrame(void* ctx, uint16_t type, const uint8_t* payload, size_t len) {
  static_cast<Seen*>(ctx)->frames++;
  if (len + sizeof(SentinelWireFrameHeader) > SENTINEL_WIRE_FRAME_MAX) __builtin_trap();
  SentinelWireRefused refused;
  if (type == kSentinelWireRefused && sentinel::plugin::DecodeRefused(payload, len, &refused) &&
      refused.magic != SENTINEL_WIRE_MAGIC) {
    __builtin_trap();  // only a refusal with our magic is taken
  }
  SentinelWireHangVerdict v;
  if (type != kSentinelWireHangVerdict || !sentinel::plugin::DecodeHangVerdict(payload, len, &v)) {
    return;
  }
  // What a person would see of the strings: never a control byte, always terminated.
  char out[sizeof(v.culprits) * 4 + 1];
  for (const auto& [text, cap] : {std::pair<const char*, size_t>{v.culprits, sizeof(v.culprits)},
                                  {v.exclude, sizeof(v.exclude)},
                                  {v.alert_id, sizeof(v.alert_id)}}) {
    const size_t n = sentinel::rules::EscapeWireText(text, cap, out, sizeof(out));
    if (n >= sizeof(out) || out[n] != '\0') __builtin_trap();
    for (size_t i = 0; i < n; ++i) {
      const auto c = static_cast<unsigned char>(out[i]);
      if (c < 0x20 || c == 0x7f) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  Source src;
  src.close_at_end = (data[0] & 1) != 0;
  src.pieces = data + 1;
  src.n_pieces = 4;
  src.data = data + 5;
  src.size = size - 5;
  static sentinel::plugin::IncomingFrames* reader = [] {
    auto* r = new sentinel::plugin::IncomingFrames();
    if (!r->Allocate()) __builtin_trap();
    return r;
  }();
  reader->Reset();
  sentinel::plugin::IncomingLimits limits;
  limits.max_frames = 1 + (data[0] >> 4);          // 1..16
  limits.max_bytes = 64 * (1 + (data[0] & 0x0e));  // 64..1024
  Seen seen;
  // Each call makes progress or ends the stream: as many calls as bytes (plus one) suffice.
  for (size_t call = 0; call <= src.size + 1; ++call) {
    seen.frames = 0;
    src.handed = 0;
    const auto end = reader->ReadSome(&Recv, &src, limits, &OnFrame, &seen);
    if (seen.frames > limits.max_frames) __builtin_trap();
    // The byte bound may be passed by the one read that was under way, never by more.
    if (src.handed > limits.max_bytes + SENTINEL_WIRE_FRAME_MAX) __builtin_trap();
    if (reader->partial_bytes() >= SENTINEL_WIRE_FRAME_MAX) __builtin_trap();
    if (end != sentinel::plugin::IncomingEnd::kBudgetSpent) return 0;
  }
  __builtin_trap();  // the budget kept ending calls without the stream ending
}
