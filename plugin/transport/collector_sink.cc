// CollectorSink: framing, batching, the hello/ack handshake, reconnect with backoff, and the
// drop accounting of the plugin -> sentineld stream (see collector_sink.h).
#include "plugin/transport/collector_sink.h"

#include <errno.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/base/attributes.h"

#include "common/choice_words.h"
#include "common/errno_text.h"
#include "common/fs_trust.h"
#include "common/host_name.h"
#include "common/mono_clock.h"
#include "common/raw_log.h"
#include "common/sentinel_env.h"
#include "plugin/base/clock.h"
#include "plugin/base/status.h"

namespace sentinel::plugin {
namespace {

constexpr size_t kHeaderBytes = FrameBuffer::kHeaderBytes;
constexpr size_t kCollFrameBytes = FrameBuffer::kCollFrameBytes;

constexpr size_t FrameBytes(size_t payload) { return FrameBuffer::FrameBytes(payload); }

bool VerboseFromEnv() {
  const rules::LogLevelWord level =
      rules::LogLevelFromEnv(rules::ProcessSentinelEnv(), rules::LogLevelWord::kWarn);
  return level == rules::LogLevelWord::kInfo || level == rules::LogLevelWord::kDebug ||
         level == rules::LogLevelWord::kTrace;
}

void CopyString(char* dst, size_t cap, const char* src) {
  if (src == nullptr) src = "";
  std::snprintf(dst, cap, "%s", src);
}

// Poll timeout in whole milliseconds, rounded up so that a short remainder still waits.
int PollMs(int64_t remaining_ns) {
  if (remaining_ns <= 0) return 0;
  int64_t ms = (remaining_ns + 999'999) / 1'000'000;
  return ms > 60'000 ? 60'000 : static_cast<int>(ms);
}

ABSL_CONST_INIT std::atomic<HangVerdictHandler> g_hang_verdict_handler{nullptr};

}  // namespace

void SetHangVerdictHandler(HangVerdictHandler handler) noexcept {
  g_hang_verdict_handler.store(handler, std::memory_order_release);
}

CollectorSink::CollectorSink(const CollectorSinkOptions& options) noexcept : options_(options) {
  pid_ = static_cast<uint32_t>(getpid());
  rng_ =
      (static_cast<uint64_t>(pid_) << 32) ^ static_cast<uint64_t>(MonoNs()) ^ 0x9E3779B97F4A7C15ull;
  if (options_.backoff_min_ns <= 0) options_.backoff_min_ns = 1;
  if (options_.backoff_max_ns < options_.backoff_min_ns) {
    options_.backoff_max_ns = options_.backoff_min_ns;
  }
  if (options_.max_comms == 0) options_.max_comms = 1;

  rules::SocketPathKind kind = rules::SocketPathKind::kPath;
  if (options_.socket_path != nullptr) {
    explicit_path_ = true;
    kind = rules::ResolveSocketPath(options_.socket_path, nullptr, getuid(), path_, sizeof(path_));
  } else {
    const char* env_socket = rules::ProcessSentinelEnv().Text(rules::Var::kSocket);
    explicit_path_ = env_socket != nullptr && env_socket[0] != '\0';
    kind = rules::ResolveSocketPathFromEnv(path_, sizeof(path_));
  }
  options_.socket_path = nullptr;  // the caller's string need not outlive us; path_ holds it
  if (kind == rules::SocketPathKind::kDisabled) {
    state_.store(State::kOff, std::memory_order_relaxed);
    return;
  }
  if (kind == rules::SocketPathKind::kTooLong) {
    state_.store(State::kOff, std::memory_order_relaxed);
    Notice(
        "sentineld's socket path (SENTINEL_SOCKET) is longer than the %zu bytes a UNIX socket "
        "path holds; streaming to sentineld is off for this process, the job goes on",
        rules::kSocketPathMax - 1);
    return;
  }
  // Once, here (NSS may be asked for SENTINEL_DAEMON_USER): never on a hot path.
  trusted_ = options_.trusted != nullptr ? *options_.trusted : rules::TrustedUidsFromEnv();
  options_.trusted = nullptr;

  rules::ShortHostName(host_, sizeof(host_));
  // SENTINEL_JOB_ID (from the one reading of SENTINEL_*), else the launcher's own job id.
  static constexpr const char* kLauncherJobIdVars[] = {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"};
  const char* job_id = rules::ProcessSentinelEnv().Text(rules::Var::kJobId);
  for (const char* var : kLauncherJobIdVars) {
    if (job_id != nullptr && job_id[0] != '\0') break;
    job_id = std::getenv(var);  // NOLINT(concurrency-mt-unsafe): read once, at sink creation
  }
  if (job_id != nullptr && job_id[0] != '\0') CopyString(job_id_, sizeof(job_id_), job_id);

  // The frame must fit whole with room for the largest control record (FrameBuffer's minimum).
  Status buffered = buffer_.Allocate(options_.buffer_bytes);
  comms_.reset(new (std::nothrow) SentinelWireCommInit[options_.max_comms]);
  in_flight_.reset(new (std::nothrow) SentinelWireInFlight[options_.max_comms]());
  const bool incoming = incoming_.Allocate();
  if (!buffered.ok() || comms_ == nullptr || in_flight_ == nullptr || !incoming) {
    state_.store(State::kOff, std::memory_order_relaxed);
    Log("sentinel: no memory for the collector stream buffer; streaming off");
    return;
  }
  backoff_ns_ = options_.backoff_min_ns;
}

CollectorSink::~CollectorSink() {
  // Only the process that opened the socket closes it; a forked child's copy just goes away.
  if (fd_ >= 0) close(fd_);
}

int64_t CollectorSink::Now() const {
  return options_.now_ns != nullptr ? options_.now_ns() : MonoNs();
}

void CollectorSink::Log(const char* fmt, ...) const {
  if (options_.log_info == nullptr && !VerboseFromEnv()) return;
  char line[320];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (options_.log_info != nullptr) {
    options_.log_info(line);
    return;
  }
  rules::RawLog("%s", line);
}

void CollectorSink::Notice(const char* fmt, ...) const {
  char line[480];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (options_.log_notice != nullptr) {
    options_.log_notice(line);
    return;
  }
  rules::RawLog("%s", line);
}

void CollectorSink::RefuseUntrusted(const char* why) {
  Bump(untrusted_);
  state_.store(State::kOff, std::memory_order_relaxed);
  Notice(
      "not streaming to sentineld at %s: %s. Streaming is off for this process and the job "
      "goes on; once the path is fixed (see README.md \"Trust\"), the next run streams",
      path_, why);
}

CollectorSinkStats CollectorSink::Stats() const {
  CollectorSinkStats s;
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  s.connect_attempts = get(connect_attempts_);
  s.connects = get(connects_);
  s.connect_failures = get(connect_failures_);
  s.handshake_failures = get(handshake_failures_);
  s.refused = get(refused_);
  s.disconnects = get(disconnects_);
  s.records_sent = get(records_sent_);
  s.records_dropped = get(records_dropped_);
  s.control_dropped = get(control_dropped_);
  s.send_eagain = get(send_eagain_);
  s.bytes_sent = get(bytes_sent_);
  s.send_calls = get(send_calls_);
  s.comm_replays = get(comm_replays_);
  s.comm_table_overflow = get(comm_table_overflow_);
  s.in_flight_sent = get(in_flight_sent_);
  s.hang_verdicts = get(hang_verdicts_);
  s.untrusted = get(untrusted_);
  s.incoming_budget_spent = get(incoming_budget_spent_);
  s.refusals = get(refusals_);
  return s;
}

// ---- connection management ------------------------------------------------------------------

void CollectorSink::Poll() {
  int64_t now = Now();
  MaybeConnect(now, options_.hello_timeout_ns);
}

void CollectorSink::ScheduleRetry(int64_t now) {
  // xorshift64: a cheap jitter so that the ranks of a node do not reconnect in lockstep.
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  int64_t jitter_range = backoff_ns_ / 5;  // +-20%
  int64_t jitter =
      jitter_range > 0
          ? static_cast<int64_t>(rng_ % static_cast<uint64_t>(2 * jitter_range + 1)) - jitter_range
          : 0;
  next_attempt_ns_ = now + backoff_ns_ + jitter;
  backoff_ns_ =
      backoff_ns_ * 2 > options_.backoff_max_ns ? options_.backoff_max_ns : backoff_ns_ * 2;
}

void CollectorSink::MaybeConnect(int64_t now, int64_t wait_budget_ns) {
  if (state_.load(std::memory_order_relaxed) != State::kDisconnected) return;
  if (now < next_attempt_ns_) return;
  if (static_cast<uint32_t>(getpid()) != pid_) return;  // forked child: never our socket
  Bump(connect_attempts_);

  int fd = -1;
  const Status opened = OpenTrustedSocket(&fd);
  if (opened.code() == StatusCode::kPermissionDenied) {
    RefuseUntrusted(opened.message());
    return;
  }
  if (!opened.ok()) {
    Bump(connect_failures_);
    const int err = opened.error_number();
    if (err != 0 && !logged_connect_failure_) {  // socket(2) failing is counted, not told
      logged_connect_failure_ = true;
      if (explicit_path_) {
        // The job asked for this socket: say once, whatever the log level, that nobody listens.
        Notice(
            "sentineld is not reachable at %s (SENTINEL_SOCKET): %s; records are dropped and "
            "counted, and the plugin retries with backoff",
            path_, rules::ErrnoText(err));
      } else {
        Log("sentinel: sentineld not reachable at %s (errno %d); records are dropped and "
            "counted until it is",
            path_, err);
      }
    }
    ScheduleRetry(now);
    return;
  }
  fd_ = fd;
  // Real time bounds the wait, whatever clock the backoff runs on.
  Status handshake = Handshake(MonoNs() + wait_budget_ns);
  if (!handshake.ok()) {
    if (handshake.code() == StatusCode::kFailedPrecondition) return;  // refused: streaming off
    close(fd_);
    fd_ = -1;
    Bump(handshake_failures_);
    ScheduleRetry(Now());
    return;
  }
  OnStreamStarted();
}

Status CollectorSink::OpenTrustedSocket(int* fd_out) {
  // Who may have put a socket at this path: the directory (and those above) must be trusted.
  // A few lstat(2)s per attempt, on the drainer thread, at most once per backoff step.
  const rules::TrustFinding dir = rules::CheckTrustedParent(path_, trusted_);
  if (!dir.ok() && dir.verdict != rules::TrustVerdict::kMissing) {
    char why[400];
    rules::DescribeTrustFinding(dir, trusted_, why, sizeof(why));
    return Status::Copy(StatusCode::kPermissionDenied, why);
  }

  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status(StatusCode::kUnavailable, "no socket");  // counted, not told
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path_, std::strlen(path_) + 1);
  if (options_.socket_send_buffer_bytes > 0) {
    // Best effort: a smaller buffer only means drops come sooner when sentineld lags.
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &options_.socket_send_buffer_bytes,
                     sizeof(options_.socket_send_buffer_bytes));
  }
  // A UNIX-socket connect completes or fails at once; EAGAIN (backlog full) is a failure too.
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    close(fd);
    return Status(StatusCode::kUnavailable, "sentineld is not reachable").WithErrno(err);
  }
  // The kernel's word on who listens there (the directory check leaves a race to a trusted
  // owner only; this closes it and covers a socket handed over by one).
  uid_t peer_uid = rules::kNoUid;
  pid_t peer_pid = 0;
  if (!rules::PeerCredentials(fd, &peer_uid, &peer_pid) || !trusted_.Contains(peer_uid)) {
    close(fd);
    return Status::Format(StatusCode::kPermissionDenied,
                          "the process listening there (pid %d) runs as uid %u, not as you (uid "
                          "%u), root or the sentinel daemon's user",
                          static_cast<int>(peer_pid), static_cast<unsigned>(peer_uid),
                          static_cast<unsigned>(trusted_.self));
  }
  *fd_out = fd;
  return Status::Ok();
}

Status CollectorSink::Handshake(int64_t deadline_ns) {
  struct {
    SentinelWireFrameHeader h;
    SentinelWireHello hello;
  } frame{};
  static_assert(sizeof(frame) == FrameBytes(sizeof(SentinelWireHello)), "hello frame packing");
  frame.h.size = sizeof(frame);
  frame.h.type = kSentinelWireHello;
  frame.hello.magic = SENTINEL_WIRE_MAGIC;
  frame.hello.major = SENTINEL_WIRE_MAJOR;
  frame.hello.minor = SENTINEL_WIRE_MINOR;
  frame.hello.features = kSentinelFeatureNone;
  frame.hello.pid = pid_;
  frame.hello.mono_ns = MonoNs();
  frame.hello.realtime_ns = rules::RealNowNs();
  CopyString(frame.hello.host, sizeof(frame.hello.host), host_);
  CopyString(frame.hello.job_id, sizeof(frame.hello.job_id), job_id_);
  ssize_t n = send(fd_, &frame, sizeof(frame), MSG_NOSIGNAL | MSG_DONTWAIT);
  // A peer that already closed may have said why first (a Refused frame): read what it left.
  if (n != static_cast<ssize_t>(sizeof(frame)) &&
      !(n < 0 && (errno == EPIPE || errno == ECONNRESET))) {
    return Status(StatusCode::kUnavailable, "could not send the hello");
  }

  // Read frames until the HelloAck; skip any other type (compatibility rule), bounded in time.
  alignas(8) uint8_t in[SENTINEL_WIRE_FRAME_MAX];
  size_t have = 0;
  size_t need = kHeaderBytes;
  while (true) {
    if (have < need) {
      pollfd pfd{fd_, POLLIN, 0};
      int64_t remaining = deadline_ns - MonoNs();
      if (remaining <= 0) return Status(StatusCode::kUnavailable, "no HelloAck in time");
      int pr = poll(&pfd, 1, PollMs(remaining));
      if (pr < 0 && errno != EINTR) return Status(StatusCode::kUnavailable, "poll failed");
      if (pr <= 0) continue;
      ssize_t got = recv(fd_, in + have, need - have, MSG_DONTWAIT);
      if (got == 0) return Status(StatusCode::kUnavailable, "sentineld closed the connection");
      if (got < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
        return Status(StatusCode::kUnavailable, "receive failed");
      }
      have += static_cast<size_t>(got);
      continue;
    }
    SentinelWireFrameHeader h;
    std::memcpy(&h, in, sizeof(h));
    if (h.size < kHeaderBytes || h.size % 8 != 0 || h.size > SENTINEL_WIRE_FRAME_MAX) {
      return Status(StatusCode::kInvalidArgument, "malformed frame from sentineld");
    }
    if (need < h.size) {
      need = h.size;
      continue;
    }
    if (h.type == kSentinelWireRefused) {
      SentinelWireRefused refused;
      if (DecodeRefused(in + kHeaderBytes, h.size - kHeaderBytes, &refused) && OnRefused(refused)) {
        state_.store(State::kOff, std::memory_order_relaxed);
        close(fd_);
        fd_ = -1;
        return Status(StatusCode::kFailedPrecondition, "sentineld does not allow our uid");
      }
      return Status(StatusCode::kUnavailable, "sentineld refused the connection");
    }
    if (h.type != kSentinelWireHelloAck) {  // not for us: skip it
      have = 0;
      need = kHeaderBytes;
      continue;
    }
    if (h.size < kHeaderBytes + sizeof(SentinelWireHelloAck)) {
      return Status(StatusCode::kInvalidArgument, "short HelloAck");
    }
    SentinelWireHelloAck ack;
    std::memcpy(&ack, in + kHeaderBytes, sizeof(ack));
    if (ack.magic != SENTINEL_WIRE_MAGIC) {
      return Status(StatusCode::kInvalidArgument, "HelloAck with a bad magic");
    }
    if (ack.status != kSentinelHelloAccepted || ack.major != SENTINEL_WIRE_MAJOR) {
      // The collector will not take our records: stop for the life of this process, quietly.
      Bump(refused_);
      state_.store(State::kOff, std::memory_order_relaxed);
      close(fd_);
      fd_ = -1;
      Log("sentinel: sentineld at %s refused the stream (status %u, wire major %u, ours %u); "
          "streaming off for this process",
          path_, ack.status, static_cast<unsigned>(ack.major), SENTINEL_WIRE_MAJOR);
      return Status(StatusCode::kFailedPrecondition, "sentineld refused the stream");
    }
    return Status::Ok();
  }
}

void CollectorSink::OnStreamStarted() {
  state_.store(State::kStreaming, std::memory_order_relaxed);
  Bump(connects_);
  backoff_ns_ = options_.backoff_min_ns;
  logged_connect_failure_ = false;
  buffer_.Reset();
  incoming_.Reset();
  // Everything the collector must know to make sense of what follows: the live communicators,
  // then the cumulative counters (so it learns what was lost while it was away).
  for (size_t i = 0; i < n_comms_; ++i) {
    if (Append(kSentinelWireCommInit, &comms_[i], sizeof(comms_[i]))) {
      Bump(comm_replays_);
    } else {
      Bump(control_dropped_);
    }
  }
  // Then where each of them is: a hang in progress must not wait for the next periodic state.
  for (size_t i = 0; i < n_comms_; ++i) {
    if (in_flight_[i].comm_hash == 0) continue;
    if (Append(kSentinelWireInFlight, &in_flight_[i], sizeof(in_flight_[i]))) {
      Bump(in_flight_sent_);
    } else {
      Bump(control_dropped_);
    }
  }
  if (have_hb_) {
    SendHeartbeatNow();
  } else {
    SendSome();
  }
}

void CollectorSink::Disconnect(const char* why) {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  Bump(disconnects_);
  // Frames the kernel did not take whole are lost with the connection: count them.
  FrameBuffer::Lost lost = buffer_.DiscardUnsent();
  if (lost.records > 0) Bump(records_dropped_, lost.records);
  if (lost.control > 0) Bump(control_dropped_, lost.control);
  state_.store(State::kDisconnected, std::memory_order_relaxed);
  Log("sentinel: lost the sentineld stream (%s); reconnecting with backoff", why);
  ScheduleRetry(Now());
}

// ---- buffering and sending ------------------------------------------------------------------

bool CollectorSink::Append(uint16_t type, const void* payload, size_t size) {
  const bool was_empty = buffer_.empty();
  if (!buffer_.Append(type, payload, size)) return false;
  if (was_empty) oldest_unsent_ns_ = Now();
  return true;
}

void CollectorSink::AccountSent() {
  uint64_t sent = buffer_.CollectSent();
  if (sent > 0) Bump(records_sent_, sent);
}

void CollectorSink::SendSome() {
  while (!buffer_.empty() && fd_ >= 0) {
    ssize_t n = send(fd_, buffer_.unsent(), buffer_.unsent_bytes(), MSG_NOSIGNAL | MSG_DONTWAIT);
    Bump(send_calls_);
    if (n > 0) {
      buffer_.MarkSent(static_cast<size_t>(n));
      Bump(bytes_sent_, static_cast<uint64_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      Bump(send_eagain_);
      break;
    }
    AccountSent();
    Disconnect(n == 0 ? "send returned 0" : "send failed");
    return;
  }
  AccountSent();
  // Bytes the socket would not take keep their age: the next drainer call tries again.
}

void CollectorSink::SendHeartbeatNow() {
  SentinelWireHeartbeat hb = last_hb_;
  // What the collector lost from this stream is this sink's own count (refused while it was
  // away, or buffered and lost with a broken connection); the core's figure may mix other sinks.
  hb.records_dropped_sink = records_dropped_.load(std::memory_order_relaxed);
  if (!Append(kSentinelWireHeartbeat, &hb, sizeof(hb))) Bump(control_dropped_);
  SendSome();
}

void CollectorSink::ReadIncoming() {
  if (fd_ < 0) return;
  IncomingLimits limits;
  limits.max_frames = options_.incoming_max_frames;
  limits.max_bytes = options_.incoming_max_bytes;
  auto recv_fd = [](void* ctx, void* buf, size_t n) -> ssize_t {
    return recv(*static_cast<const int*>(ctx), buf, n, MSG_DONTWAIT);
  };
  const int fd = fd_;
  switch (incoming_.ReadSome(recv_fd, const_cast<int*>(&fd), limits, &OnIncomingFrame, this)) {
    case IncomingEnd::kDrained:
      return;
    case IncomingEnd::kBudgetSpent:
      Bump(incoming_budget_spent_);  // the rest waits in the kernel for the next call
      return;
    case IncomingEnd::kClosed:
      Disconnect("sentineld closed the connection");
      return;
    case IncomingEnd::kError:
      Disconnect("receive failed");
      return;
    case IncomingEnd::kMalformed:
      Disconnect("malformed frame from sentineld");
      return;
  }
}

bool CollectorSink::OnRefused(const SentinelWireRefused& refused) {
  Bump(refusals_);
  const bool for_good = refused.reason == kSentinelRefusedNotAllowed;
  if (told_refusal_) return for_good;
  told_refusal_ = true;
  // Our own words for the code, with the figures as numbers: nothing of the peer's is printed
  // as text.
  char why[200];
  const unsigned limit = refused.limit;
  const unsigned held = refused.held;
  switch (refused.reason) {
    case kSentinelRefusedTooMany:
      std::snprintf(why, sizeof(why), "every plugin connection slot is taken (--max-clients %u)",
                    limit);
      break;
    case kSentinelRefusedUidShare:
      std::snprintf(why, sizeof(why),
                    "your uid holds its share of the plugin connections (%u of %u)", held, limit);
      break;
    case kSentinelRefusedNotAllowed:
      std::snprintf(why, sizeof(why),
                    "your uid is neither sentineld's user nor in its --allow-group");
      break;
    case kSentinelRefusedFdLimit:
      std::snprintf(why, sizeof(why), "sentineld is out of file descriptors");
      break;
    case kSentinelRefusedEvicted:
      std::snprintf(why, sizeof(why),
                    "its slot went to another user below their fair share (your uid held %u, "
                    "fair share %u)",
                    held, limit);
      break;
    default:
      std::snprintf(why, sizeof(why), "reason %u", static_cast<unsigned>(refused.reason));
      break;
  }
  Notice(
      "sentineld at %s refused this process's connection: %s. Until it accepts one, this "
      "process's records, hang detection and SENTINEL_ON_HANG are off; %s (said once)",
      path_, why,
      for_good ? "streaming is off for this process" : "the plugin retries with backoff");
  return for_good;
}

void CollectorSink::OnIncomingFrame(void* self, uint16_t type, const uint8_t* payload, size_t len) {
  auto* sink = static_cast<CollectorSink*>(self);
  if (type == kSentinelWireRefused) {
    SentinelWireRefused refused;
    if (DecodeRefused(payload, len, &refused)) (void)sink->OnRefused(refused);
    return;  // the close that follows ends the stream (Disconnect, then the backoff)
  }
  SentinelWireHangVerdict v;
  // Another type, or a short payload: skipped by the wire contract (a newer collector's frame).
  if (type != kSentinelWireHangVerdict || !DecodeHangVerdict(payload, len, &v)) return;
  Bump(sink->hang_verdicts_);
  HangVerdictHandler handler = sink->options_.on_hang_verdict != nullptr
                                   ? sink->options_.on_hang_verdict
                                   : g_hang_verdict_handler.load(std::memory_order_acquire);
  if (handler != nullptr) handler(v);
}

// ---- RecordSink -----------------------------------------------------------------------------

void CollectorSink::OnCommInit(const SentinelWireCommInit& comm) {
  if (state_.load(std::memory_order_relaxed) == State::kOff) return;
  // Connect first, so that a replay triggered by this very connection does not send it twice.
  int64_t now = Now();
  MaybeConnect(now, options_.hello_timeout_ns);
  // Remember it for replay after a reconnect (replace a re-init of the same comm and rank).
  size_t i = 0;
  while (i < n_comms_ && !(comms_[i].comm_hash == comm.comm_hash && comms_[i].rank == comm.rank)) {
    ++i;
  }
  if (i < n_comms_) {
    comms_[i] = comm;
    in_flight_[i] = SentinelWireInFlight{};
  } else if (n_comms_ < options_.max_comms) {
    in_flight_[n_comms_] = SentinelWireInFlight{};
    comms_[n_comms_++] = comm;
  } else {
    Bump(comm_table_overflow_);
  }
  if (state_.load(std::memory_order_relaxed) != State::kStreaming) return;  // replayed later
  if (!Append(kSentinelWireCommInit, &comm, sizeof(comm))) Bump(control_dropped_);
  SendSome();
}

void CollectorSink::OnCommEnd(uint64_t comm_hash, int rank) {
  if (state_.load(std::memory_order_relaxed) == State::kOff) return;
  for (size_t i = 0; i < n_comms_; ++i) {
    if (comms_[i].comm_hash == comm_hash && comms_[i].rank == rank) {
      --n_comms_;
      comms_[i] = comms_[n_comms_];
      in_flight_[i] = in_flight_[n_comms_];
      break;
    }
  }
  int64_t now = Now();
  MaybeConnect(now, options_.hello_timeout_ns);
  if (state_.load(std::memory_order_relaxed) != State::kStreaming) {
    Bump(control_dropped_);
    return;
  }
  SentinelWireCommEnd end{};
  end.comm_hash = comm_hash;
  end.now_ns = now;
  end.rank = rank;
  if (!Append(kSentinelWireCommEnd, &end, sizeof(end))) Bump(control_dropped_);
  SendSome();
}

size_t CollectorSink::OnRecords(const SentinelWireCollRecord* records, size_t n) {
  // Every record is handled here: sent, buffered, or counted in records_dropped_ (which reaches
  // the collector in the heartbeat). So we always return n: the core's own sink-drop counter
  // then speaks only for the other sinks (the JSONL dump), not for an absent collector.
  if (n == 0 || records == nullptr) return n;
  State st = state_.load(std::memory_order_relaxed);
  if (st == State::kOff) return n;  // streaming is off on purpose (disabled or refused)
  if (st != State::kStreaming) {
    int64_t now = Now();
    MaybeConnect(now, options_.hello_timeout_ns);
    if (state_.load(std::memory_order_relaxed) != State::kStreaming) {
      Bump(records_dropped_, n);
      return n;
    }
  }
  const bool was_empty = buffer_.empty();
  size_t accepted = 0;
  while (accepted < n) {
    // Fill what fits, then give the kernel a chance to take it before dropping the rest.
    if (!buffer_.HasRoomAtTail(kCollFrameBytes)) {
      SendSome();
      if (fd_ < 0 || !buffer_.MakeRoom(kCollFrameBytes)) break;
    }
    accepted += buffer_.AppendCollRecords(records + accepted, n - accepted);
  }
  if (accepted < n) Bump(records_dropped_, n - accepted);
  if (fd_ >= 0 && !buffer_.empty()) {
    // At most one clock read per call, none once the batch is big enough to send anyway.
    if (buffer_.unsent_bytes() >= options_.send_threshold_bytes) {
      SendSome();
    } else {
      int64_t now = Now();
      if (was_empty) {
        oldest_unsent_ns_ = now;
      } else if (now - oldest_unsent_ns_ >= options_.max_batch_age_ns) {
        SendSome();
      }
    }
  }
  return n;
}

void CollectorSink::OnHeartbeat(const SentinelWireHeartbeat& hb) {
  if (state_.load(std::memory_order_relaxed) == State::kOff) return;
  last_hb_ = hb;
  have_hb_ = true;
  int64_t now = Now();
  State before = state_.load(std::memory_order_relaxed);
  MaybeConnect(now, options_.hello_timeout_ns);
  State after = state_.load(std::memory_order_relaxed);
  if (after != State::kStreaming) return;  // cumulative: the next one after reconnecting says it
  if (before == State::kStreaming) SendHeartbeatNow();  // else OnStreamStarted just sent it
  ReadIncoming();
}

void CollectorSink::OnControlRecord(uint16_t type, const void* payload, size_t size) {
  if (state_.load(std::memory_order_relaxed) == State::kOff) return;
  if (payload == nullptr || FrameBytes(size) > SENTINEL_WIRE_FRAME_MAX) {
    Bump(control_dropped_);
    return;
  }
  int64_t now = Now();
  MaybeConnect(now, options_.hello_timeout_ns);
  if (state_.load(std::memory_order_relaxed) != State::kStreaming) {
    Bump(control_dropped_);
    return;
  }
  if (!Append(type, payload, size)) Bump(control_dropped_);
  SendSome();
}

void CollectorSink::OnInFlight(const SentinelWireInFlight& state) {
  if (state_.load(std::memory_order_relaxed) == State::kOff) return;
  // Remember it first, so that a connection made just below replays this very state.
  bool remembered = false;
  for (size_t i = 0; i < n_comms_ && !remembered; ++i) {
    if (comms_[i].comm_hash == state.comm_hash && comms_[i].rank == state.rank) {
      in_flight_[i] = state;
      remembered = true;
    }
  }
  State before = state_.load(std::memory_order_relaxed);
  MaybeConnect(Now(), options_.hello_timeout_ns);
  if (state_.load(std::memory_order_relaxed) != State::kStreaming) return;  // replayed later
  if (before != State::kStreaming && remembered) return;  // OnStreamStarted just replayed it
  if (Append(kSentinelWireInFlight, &state, sizeof(state))) {
    Bump(in_flight_sent_);
  } else {
    Bump(control_dropped_);
  }
  SendSome();
  ReadIncoming();
}

void CollectorSink::OnDrainEnd() {
  if (state_.load(std::memory_order_relaxed) != State::kStreaming || buffer_.empty()) return;
  SendSome();
}

void CollectorSink::Flush() {
  if (state_.load(std::memory_order_relaxed) == State::kOff) return;
  if (static_cast<uint32_t>(getpid()) != pid_) return;  // forked child: not our stream
  int64_t deadline = MonoNs() + options_.flush_timeout_ns;
  // A last connection attempt if one is due, within the flush budget.
  MaybeConnect(Now(), options_.hello_timeout_ns < options_.flush_timeout_ns
                          ? options_.hello_timeout_ns
                          : options_.flush_timeout_ns);
  while (fd_ >= 0) {
    SendSome();
    if (fd_ < 0 || buffer_.empty()) break;
    int64_t remaining = deadline - MonoNs();
    if (remaining <= 0) break;
    pollfd pfd{fd_, POLLOUT, 0};
    if (poll(&pfd, 1, PollMs(remaining)) < 0 && errno != EINTR) break;
  }
}

}  // namespace sentinel::plugin
