// CollectorSink: the RecordSink that streams the plugin's records to the node's sentineld over a
// UNIX stream socket (wire: schemas/wire/sentinel_wire.h). It never blocks NCCL: it runs on the
// core's drainer thread only, with a non-blocking socket and one bounded buffer; whatever cannot
// be sent is dropped and counted, and the counts reach the collector in the next heartbeat.
//
// Trust (common/fs_trust.h): before each connection attempt the socket's directory must be a real
// directory owned by a trusted uid (this process's, root, or SENTINEL_DAEMON_USER's) and not
// writable by group or others, and so must the directories above it (unless sticky); after
// connecting, the peer's SO_PEERCRED uid must be trusted. Otherwise streaming is off for the life
// of this process, with one "[sentinel]" line on stderr saying why; the job goes on untouched. A
// directory that does not exist yet is only "sentineld absent" (retried with backoff). A directory
// fixed later is used by the next run of the job: a refused one is never retried within a process,
// so that nobody else's socket gets a second chance at the job's records.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/fs_trust.h"
#include "common/socket_path.h"
#include "plugin/base/status.h"
#include "plugin/core/record_sink.h"
#include "plugin/transport/frame_buffer.h"
#include "plugin/transport/incoming_frames.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {

// Frames sentineld sends us on the same connection (today: the hang verdict, wire type 13) are
// read without blocking, at most CollectorSinkOptions::incoming_max_frames / _bytes per call, at
// each heartbeat and in-flight state (drainer thread, or the final drain), and handed to this
// handler there. The handler judges the verdict itself (plugin/entry/hang_abort.cc). The plugin .so
// registers it when it loads (plugin/entry/hang_abort.h); CollectorSinkOptions::on_hang_verdict
// replaces it for one sink (tests).
using HangVerdictHandler = void (*)(const SentinelWireHangVerdict& verdict);
void SetHangVerdictHandler(HangVerdictHandler handler) noexcept;

struct CollectorSinkOptions {
  // Socket to connect to; null resolves SENTINEL_SOCKET / the per-user default (socket_path.h).
  const char* socket_path = nullptr;
  // The one send buffer, allocated at construction: about 14,500 collective records, 73 ms of a
  // rank at 200,000 a second, for a sentineld that a busy node leaves unscheduled that long. Its
  // pages become resident only as deep as sentineld lags (a drain's worth when it keeps up).
  size_t buffer_bytes = size_t{2} << 20;
  // The socket's own send buffer (SO_SNDBUF; the kernel caps it at net.core.wmem_max and doubles
  // it for its bookkeeping), asked for at connect: what sentineld has not read yet waits there
  // before it fills ours and records are dropped. 1 MiB: about 5,000 records more, 25 ms at
  // 200,000 a second, for a collector that a busy node leaves unscheduled that long. Memory only
  // while sentineld lags; 0 keeps the kernel's default (net.core.wmem_default, 208 KiB here).
  int socket_send_buffer_bytes = 1 << 20;
  // Buffered bytes that trigger a send within a drain, and the longest a record waits for one
  // (checked whenever the drainer calls in; heartbeats, comm init/end and control records send
  // at once). The end of each drain (OnDrainEnd) sends what is buffered: one write per drain,
  // whatever it holds, unless the drain carries more than this.
  size_t send_threshold_bytes = size_t{256} * 1024;
  int64_t max_batch_age_ns = 2'000'000;
  // Bounded wait for the collector's HelloAck after connecting (on the drainer thread).
  int64_t hello_timeout_ns = 200'000'000;
  // Reconnect backoff: doubles from min to max, each wait jittered by +-20%.
  int64_t backoff_min_ns = 100'000'000;
  int64_t backoff_max_ns = 5'000'000'000;
  // Flush() returns after at most this long, whatever the collector does.
  int64_t flush_timeout_ns = 100'000'000;
  // Live communicators remembered for replay after a reconnect.
  size_t max_comms = 256;
  // CLOCK_MONOTONIC ns for the backoff and batch age; tests inject a fake clock to step through
  // the backoff. Waits (handshake, flush) are always bounded on the real clock.
  int64_t (*now_ns)() = nullptr;
  // Slow-path log line at info level; null writes to stderr when SENTINEL_LOG_LEVEL is info,
  // debug or trace. MUST NOT call back into the sink.
  void (*log_info)(const char* line) = nullptr;
  // Where hang verdicts go; null: the process-wide SetHangVerdictHandler one.
  HangVerdictHandler on_hang_verdict = nullptr;
  // Collector -> plugin frames read per call, whatever the peer keeps sending.
  size_t incoming_max_frames = 8;
  size_t incoming_max_bytes = size_t{16} * 1024;
  // Lines a person must see whatever SENTINEL_LOG_LEVEL is (the socket path too long, a refused
  // directory or peer, an explicit SENTINEL_SOCKET nobody listens on): null writes them to stderr
  // as "[sentinel <pid>] ...". MUST NOT call back into the sink.
  void (*log_notice)(const char* line) = nullptr;
  // Trusted uids for the directory and peer checks; null: this process's (TrustedUidsFromEnv,
  // resolved once at construction: it may ask NSS for SENTINEL_DAEMON_USER).
  const rules::TrustedUids* trusted = nullptr;
};

// Cumulative counters, readable from any thread (a snapshot of relaxed loads).
struct CollectorSinkStats {
  uint64_t connect_attempts = 0;
  uint64_t connects = 0;            // handshakes accepted
  uint64_t connect_failures = 0;    // socket/connect failed (collector absent, backlog full)
  uint64_t handshake_failures = 0;  // no valid HelloAck in time, or the peer closed
  uint64_t refused = 0;             // HelloAck refused or major mismatch: streaming is off for good
  uint64_t disconnects = 0;         // an established stream broke (peer gone, send error)
  uint64_t records_sent = 0;        // collective/p2p records handed whole to the kernel
  uint64_t records_dropped = 0;     // records the collector will never get from us
  uint64_t control_dropped = 0;     // comm init/end, heartbeat, verdict, GPU window frames lost
  uint64_t send_eagain = 0;         // sends that found the socket full (a slow collector)
  uint64_t bytes_sent = 0;
  uint64_t send_calls = 0;             // send(2) calls: records per call shows the batching
  uint64_t comm_replays = 0;           // CommInit frames re-sent after a reconnect
  uint64_t in_flight_sent = 0;         // InFlight frames appended while streaming (incl. replays)
  uint64_t comm_table_overflow = 0;    // communicators not remembered (table full)
  uint64_t hang_verdicts = 0;          // hang verdicts received from sentineld
  uint64_t untrusted = 0;              // streaming refused: socket directory or peer not trusted
  uint64_t incoming_budget_spent = 0;  // reads that stopped at the per-call bound
  uint64_t refusals = 0;               // connections sentineld refused or closed, saying why
};

// OnRecords() always returns n: every record is sent, buffered, or dropped and counted here
// (records_dropped), so the core's sink-drop counter keeps speaking for its other sinks.
// Heartbeats sent to the collector carry, in records_dropped_sink, this sink's own count of
// records the collector will never get (Stats().records_dropped), replacing the core's figure.
//
// Thread-safety: every RecordSink method MUST be called from one thread at a time (the core's
// drainer thread, or the thread calling Flush() at finalize/exit once the drainer has stopped).
// Stats() and state() may be called from any thread. Never throws; every failure ends in
// "drop and count" or, for a refused handshake, "streaming off for this process".
class CollectorSink final : public RecordSink {
 public:
  enum class State : int { kDisconnected = 0, kStreaming = 1, kOff = 2 };

  explicit CollectorSink(const CollectorSinkOptions& options = CollectorSinkOptions()) noexcept;
  ~CollectorSink() override;
  CollectorSink(const CollectorSink&) = delete;
  CollectorSink& operator=(const CollectorSink&) = delete;

  void OnCommInit(const SentinelWireCommInit& comm) override;
  void OnCommEnd(uint64_t comm_hash, int rank) override;
  size_t OnRecords(const SentinelWireCollRecord* records, size_t n) override;
  void OnHeartbeat(const SentinelWireHeartbeat& hb) override;
  void OnControlRecord(uint16_t type, const void* payload, size_t size) override;
  // Sent at once; the latest state of each remembered communicator is also re-sent after a
  // reconnect (after the CommInit replay). Not counted as dropped while disconnected: a state
  // supersedes the ones before it, and the replay brings the collector up to date.
  void OnInFlight(const SentinelWireInFlight& state) override;
  // Hands what is buffered to the kernel (no wait): the drain's records leave in one write.
  void OnDrainEnd() override;
  void Flush() override;

  // Attempts a connection now if one is due (the RecordSink calls do this themselves).
  void Poll();

  CollectorSinkStats Stats() const;
  State state() const { return state_.load(std::memory_order_relaxed); }
  const char* socket_path() const { return path_; }

 private:
  int64_t Now() const;
  void Log(const char* fmt, ...) const __attribute__((format(printf, 2, 3)));
  // Always shown (see CollectorSinkOptions::log_notice).
  void Notice(const char* fmt, ...) const __attribute__((format(printf, 2, 3)));
  // Streaming off for the life of this process because of who owns the path or the peer.
  void RefuseUntrusted(const char* why);
  // If a retry is due at `now` (backoff clock): connects, says hello and waits at most
  // `wait_budget_ns` of real time for the ack.
  void MaybeConnect(int64_t now, int64_t wait_budget_ns);
  // A connected socket at path_ whose directory and listener are trusted, in *fd. Fails with
  // kPermissionDenied (the message says what is not trusted) or kUnavailable (no socket, nobody
  // listening: the errno is carried).
  Status OpenTrustedSocket(int* fd);
  // Hello, then the HelloAck by `deadline_ns` (real CLOCK_MONOTONIC). kFailedPrecondition: the
  // collector refused us and streaming is now off for good; any other failure is retried.
  Status Handshake(int64_t deadline_ns);
  void ScheduleRetry(int64_t now);
  void Disconnect(const char* why);
  void OnStreamStarted();
  // Frames `payload` into the buffer; false (nothing written) when it does not fit.
  bool Append(uint16_t type, const void* payload, size_t size);
  // Hands buffered bytes to the kernel until it is empty or the socket is full.
  void SendSome();
  // Walks frames that the kernel has taken whole, counting the collective records among them.
  void AccountSent();
  void SendHeartbeatNow();
  // Reads what sentineld sent us, without blocking and within the per-call bound; dispatches
  // whole frames.
  void ReadIncoming();
  static void OnIncomingFrame(void* self, uint16_t type, const uint8_t* payload, size_t len);
  // sentineld said why it will not serve this connection: counted, and told once per process
  // (one sink per process) on stderr. True when the reason ends streaming for good (our uid is
  // not allowed); the others are retried with the backoff.
  bool OnRefused(const SentinelWireRefused& refused);

  static void Bump(std::atomic<uint64_t>& counter, uint64_t by = 1) {
    // Only the drainer writes; readers want a recent value, not an ordering: relaxed is enough.
    counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }

  CollectorSinkOptions options_;
  char path_[rules::kSocketPathMax] = {};
  char host_[64] = {};
  char job_id_[64] = {};
  uint32_t pid_ = 0;  // the process that built us; a forked child never touches the socket
  int fd_ = -1;
  // Written by the drainer, read by anyone: relaxed, it is a status display.
  std::atomic<State> state_{State::kDisconnected};
  int64_t backoff_ns_ = 0;
  int64_t next_attempt_ns_ = 0;
  uint64_t rng_ = 0;

  // The one send buffer (frames, batching, what was sent or lost); the socket side is ours.
  FrameBuffer buffer_;
  int64_t oldest_unsent_ns_ = 0;

  std::unique_ptr<SentinelWireCommInit[]> comms_;
  // The latest in-flight state of comms_[i] (comm_hash 0: none yet), kept in step with comms_.
  std::unique_ptr<SentinelWireInFlight[]> in_flight_;
  size_t n_comms_ = 0;
  bool have_hb_ = false;
  SentinelWireHeartbeat last_hb_ = {};
  bool logged_connect_failure_ = false;
  // SENTINEL_SOCKET (or options.socket_path) named the path: an unreachable one is told once.
  bool explicit_path_ = false;
  // A refusal by sentineld was told (once per process, not per retry).
  bool told_refusal_ = false;
  rules::TrustedUids trusted_;
  // Incoming bytes of a partial frame (sentineld -> plugin), allocated with the send buffer.
  IncomingFrames incoming_;

  std::atomic<uint64_t> connect_attempts_{0}, connects_{0}, connect_failures_{0},
      handshake_failures_{0}, refused_{0}, disconnects_{0}, records_sent_{0}, records_dropped_{0},
      control_dropped_{0}, send_eagain_{0}, bytes_sent_{0}, send_calls_{0}, comm_replays_{0},
      comm_table_overflow_{0}, in_flight_sent_{0}, hang_verdicts_{0}, untrusted_{0},
      incoming_budget_spent_{0}, refusals_{0};
};

}  // namespace sentinel::plugin
