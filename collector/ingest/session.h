// One plugin connection's protocol state: hello -> ack -> stream of frames. Owns the partial-frame
// buffer and turns bytes into calls on an IngestSink. No I/O here, so tests and the fuzzer drive
// it directly; IngestServer does the socket work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

#include "collector/ingest/frame_parser.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

// Receives validated frames. Called on the ingest thread only.
class IngestSink {
 public:
  virtual ~IngestSink() = default;
  virtual void OnHello(int client, const SentinelWireHello& hello) = 0;
  // Consecutive collective records of one client, in arrival order.
  virtual void OnRecords(int client, const SentinelWireCollRecord* records, size_t n) = 0;
  // Any other known, validated frame (comm init/end, heartbeat, gpu window, verdict).
  virtual void OnControlFrame(int client, const Frame& frame) = 0;
  virtual void OnDisconnect(int client) = 0;
};

enum class CloseReason { kNone, kMalformed, kBadHello, kMajorMismatch, kUnexpectedAck };

const char* CloseReasonName(CloseReason reason);

// What a bad hello was, for the log (the reason alone says only "bad_hello").
enum class HelloProblem { kNone, kNotHello, kBadMagic, kSecondHello, kCutShort };

// A whole SentinelWireRefused frame (header included): sentineld will not serve the connection.
std::string RefusedFrame(uint16_t reason, uint32_t limit, uint32_t held);

class Session {
 public:
  static constexpr size_t kBufferSize = size_t{64} * 1024;

  Session(int client, IngestSink* sink);

  // Where the next read() may write, and how much room there is (never 0 while open).
  uint8_t* WritableTail() { return buffer_.data() + filled_; }
  size_t WritableSize() const { return buffer_.size() - filled_; }
  // Parses the bytes just written. Not ok when the connection must be closed: the status names
  // the reason (CloseReasonName, and the frame error of a malformed frame), and reason() gives it
  // as the enum the counters use. Any reply (the hello ack) is in PendingOutput() either way.
  absl::Status Commit(size_t n);
  // Convenience for tests, the fuzzer, the benchmarks and the detection evaluation: copies and
  // commits in chunks; the first Commit that is not ok ends it and is returned (its status names
  // the reason, as Commit's does; reason() gives the enum).
  absl::Status Feed(const uint8_t* data, size_t n);

  CloseReason reason() const { return reason_; }
  // Why the connection was closed, in words for the log: the frame error of a malformed frame,
  // "truncated", or what was wrong with the hello (the first frame's type, the magic it carried).
  std::string CloseDetail() const;
  // The peer closed: a partial frame then is a truncated one (a hello cut short before hello).
  void NoteEof();
  FrameError frame_error() const { return frame_error_; }
  bool hello_done() const { return hello_done_; }
  // Bytes of an incomplete frame are buffered (at EOF this is a truncated frame).
  bool has_partial() const { return filled_ > 0; }
  const SentinelWireHello& hello() const { return hello_; }
  uint16_t refused_major() const { return refused_major_; }
  std::string& PendingOutput() { return output_; }
  uint64_t frames() const { return frames_; }
  uint64_t records() const { return records_; }
  uint64_t skipped_unknown() const { return skipped_unknown_; }

 private:
  // Not ok when the frame closes the connection (reason_ is then set).
  absl::Status HandleFrame(const Frame& frame);
  // Sets reason_ and returns CloseStatus().
  absl::Status Close(CloseReason reason);
  // The status of a closed session (reason_ set).
  absl::Status CloseStatus() const;
  void FlushBatch();
  void QueueAck(uint32_t status);

  int client_;
  IngestSink* sink_;
  std::vector<uint8_t> buffer_;
  size_t filled_ = 0;
  std::vector<SentinelWireCollRecord> batch_;
  std::string output_;
  bool hello_done_ = false;
  SentinelWireHello hello_{};
  CloseReason reason_ = CloseReason::kNone;
  FrameError frame_error_ = FrameError::kNone;
  uint16_t refused_major_ = 0;
  HelloProblem hello_problem_ = HelloProblem::kNone;
  uint16_t first_type_ = 0;  // the first frame's type, when it was not a hello
  uint32_t bad_magic_ = 0;
  uint64_t frames_ = 0;
  uint64_t records_ = 0;
  uint64_t skipped_unknown_ = 0;
};

}  // namespace sentinel::collector
