// JSON Lines dump of everything the plugin produces (SENTINEL_DUMP).
#include "plugin/transport/jsonl_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <utility>

#include "common/errno_text.h"
#include "plugin/base/log.h"
#include "plugin/core/names.h"

namespace sentinel::plugin {
namespace {

void AppendF(std::string* out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void AppendF(std::string* out, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n > 0)
    out->append(buf,
                static_cast<size_t>(n) < sizeof(buf) ? static_cast<size_t>(n) : sizeof(buf) - 1);
}

void AppendJsonString(std::string* out, const char* s, size_t max) {
  out->push_back('"');
  for (size_t i = 0; i < max && s[i] != '\0'; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      AppendF(out, "\\u%04x", c);
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

// The names of the record's flag bits, in the order the dump lists them.
struct FlagName {
  uint16_t bit;
  const char* name;
};
constexpr FlagName kFlagNames[] = {
    {kSentinelCollIsP2p, "p2p"},
    {kSentinelCollGraphCaptured, "graph_captured"},
    {kSentinelCollFuncRecovered, "func_recovered"},
    {kSentinelCollGpuTimeValid, "gpu_time_valid"},
    {kSentinelCollProxyValid, "proxy_valid"},
    {kSentinelCollApiTimeValid, "api_time_valid"},
    {kSentinelCollTruncated, "truncated"},
    {kSentinelCollGpuSkipped, "gpu_skipped"},
    {kSentinelCollSampled, "sampled"},
};

}  // namespace

JsonlSink::JsonlSink(const std::string& path) {
  fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    Log(LogLevel::kWarn, "SENTINEL_DUMP: cannot open '%s' (errno %d); no dump", path.c_str(),
        errno);
  }
  buf_.reserve(size_t{64} * 1024);
}

JsonlSink::~JsonlSink() {
  if (fd_ >= 0) close(fd_);
}

namespace {

// One record's line, written field by field into a stack buffer: std::to_chars and copies of the
// fixed texts instead of two vsnprintf calls (the printf family parsed the format string for every
// record and was most of the drainer's CPU per record). Every append stops at the buffer's end; a
// record's line is far shorter (under 700 bytes with every number at its widest).
class LineWriter {
 public:
  template <size_t N>
  void Text(const char (&text)[N]) noexcept {
    Bytes(text, N - 1);
  }
  // A NUL-terminated name from the wire-name tables (short, never attacker-controlled).
  void Name(const char* name) noexcept { Bytes(name, strlen(name)); }
  template <typename Int>
  void Number(Int v) noexcept {
    std::to_chars_result res = std::to_chars(p_, end_, v);
    if (res.ec == std::errc()) p_ = res.ptr;
  }
  // "0x" and 16 lowercase hex digits, as "0x%016" PRIx64.
  void Hex16(uint64_t v) noexcept {
    char digits[18] = {'0', 'x'};
    for (int i = 17; i >= 2; --i, v >>= 4) digits[i] = "0123456789abcdef"[v & 0xF];
    Bytes(digits, sizeof(digits));
  }
  void Char(char c) noexcept {
    if (p_ < end_) *p_++ = c;
  }
  const char* data() const noexcept { return buf_; }
  size_t size() const noexcept { return static_cast<size_t>(p_ - buf_); }

 private:
  void Bytes(const char* s, size_t n) noexcept {
    const size_t room = static_cast<size_t>(end_ - p_);
    if (n > room) n = room;
    memcpy(p_, s, n);
    p_ += n;
  }
  char buf_[1024];
  char* p_ = buf_;
  char* const end_ = buf_ + sizeof(buf_);
};

}  // namespace

void JsonlSink::AppendRecordJson(const SentinelWireCollRecord& r, std::string* out) {
  LineWriter w;
  w.Text("{\"type\":\"coll\",\"comm\":\"");
  w.Hex16(r.comm_hash);
  w.Text("\",\"rank\":");
  w.Number(r.rank);
  w.Text(",\"nranks\":");
  w.Number(r.nranks);
  w.Text(",\"func\":\"");
  w.Name(FuncName(r.func));
  w.Text("\",\"seq\":");
  w.Number(r.seq);
  w.Text(",\"bytes\":");
  w.Number(r.bytes);
  w.Text(",\"datatype\":\"");
  w.Name(DatatypeName(r.datatype));
  w.Text("\",\"algo\":\"");
  w.Name(AlgoName(r.algo));
  w.Text("\",\"proto\":\"");
  w.Name(ProtoName(r.proto));
  w.Text("\",\"nchannels\":");
  w.Number(static_cast<unsigned>(r.nchannels));
  w.Text(",\"peer\":");
  w.Number(r.peer);
  w.Text(",\"root\":");
  w.Number(r.root);
  w.Text(",\"api_ns\":");
  w.Number(r.api_ns);
  w.Text(",\"enqueue_ns\":");
  w.Number(r.enqueue_ns);
  w.Text(",\"gpu_start_ns\":");
  w.Number(r.gpu_start_ns);
  w.Text(",\"gpu_end_ns\":");
  w.Number(r.gpu_end_ns);
  w.Text(",\"proxy_send_wait_ns\":");
  w.Number(r.proxy_send_wait_ns);
  w.Text(",\"proxy_send_xfer_ns\":");
  w.Number(r.proxy_send_xfer_ns);
  w.Text(",\"proxy_send_bytes\":");
  w.Number(r.proxy_send_bytes);
  w.Text(",\"proxy_recv_wait_ns\":");
  w.Number(r.proxy_recv_wait_ns);
  w.Text(",\"proxy_recv_xfer_ns\":");
  w.Number(r.proxy_recv_xfer_ns);
  w.Text(",\"proxy_recv_bytes\":");
  w.Number(r.proxy_recv_bytes);
  w.Text(",\"pid\":");
  w.Number(r.pid);
  w.Text(",\"ordinal\":");
  w.Number(r.ordinal_lo);
  w.Text(",\"flags\":[");
  bool first = true;
  for (const FlagName& f : kFlagNames) {
    if ((r.flags & f.bit) == 0) continue;
    if (!first) w.Char(',');
    first = false;
    w.Char('"');
    w.Name(f.name);
    w.Char('"');
  }
  w.Text("]}");
  out->append(w.data(), w.size());
}

std::string JsonlSink::RecordToJson(const SentinelWireCollRecord& r) {
  std::string out;
  AppendRecordJson(r, &out);
  return out;
}

void JsonlSink::OnCommInit(const SentinelWireCommInit& c) {
  AppendF(&buf_,
          "{\"type\":\"comm_init\",\"comm\":\"0x%016" PRIx64
          "\",\"rank\":%d,\"nranks\":%d,"
          "\"nnodes\":%d,\"pid\":%u,\"abi_version\":%u,\"event_mask\":%u,\"init_ns\":%" PRId64
          ",\"comm_name\":",
          c.comm_hash, c.rank, c.nranks, c.nnodes, c.pid, c.abi_version, c.event_mask, c.init_ns);
  AppendJsonString(&buf_, c.comm_name, sizeof(c.comm_name));
  buf_ += "}\n";
  (void)WriteOut();  // a failure is logged once inside
}

void JsonlSink::OnCommEnd(uint64_t comm_hash, int rank) {
  AppendF(&buf_, "{\"type\":\"comm_end\",\"comm\":\"0x%016" PRIx64 "\",\"rank\":%d}\n", comm_hash,
          rank);
  (void)WriteOut();  // a failure is logged once inside
}

size_t JsonlSink::OnRecords(const SentinelWireCollRecord* records, size_t n) {
  if (fd_ < 0) return 0;
  for (size_t i = 0; i < n; ++i) {
    AppendRecordJson(records[i], &buf_);  // into the reused buffer: no allocation per record
    buf_.push_back('\n');
  }
  return WriteOut().ok() ? n : 0;
}

void JsonlSink::OnHeartbeat(const SentinelWireHeartbeat& hb) {
  AppendF(&buf_,
          "{\"type\":\"heartbeat\",\"pid\":%u,\"now_ns\":%" PRId64 ",\"records_completed\":%" PRIu64
          ",\"records_dropped_ring\":%" PRIu64 ",\"events_dropped_pool\":%" PRIu64
          ",\"events_dropped_threads\":%" PRIu64 ",\"stale_handles\":%" PRIu64
          ",\"pxn_foreign\":%" PRIu64 ",\"records_truncated\":%" PRIu64
          ",\"callback_ns_total\":%" PRIu64 ",\"callbacks_total\":%" PRIu64
          ",\"records_dropped_sink\":%" PRIu64 ",\"budget_level\":%u}\n",
          hb.pid, hb.now_ns, hb.records_completed, hb.records_dropped_ring, hb.events_dropped_pool,
          hb.events_dropped_threads, hb.stale_handles, hb.pxn_foreign, hb.records_truncated,
          hb.callback_ns_total, hb.callbacks_total, hb.records_dropped_sink, hb.budget_level);
  (void)WriteOut();  // a failure is logged once inside
}

void JsonlSink::OnControlRecord(uint16_t type, const void* payload, size_t size) {
  if (type == kSentinelWireGpuWindow && size >= sizeof(SentinelWireGpuWindow)) {
    SentinelWireGpuWindow w;
    memcpy(&w, payload, sizeof(w));
    AppendF(&buf_,
            "{\"type\":\"gpu_window\",\"start_ns\":%lld,\"end_ns\":%lld,\"compute_ns\":%lld,"
            "\"nccl_ns\":%lld,\"overlap_ns\":%lld,\"memcpy_ns\":%lld,\"idle_ns\":%lld,"
            "\"kernels\":%llu,\"nccl_kernels\":%llu,\"records_dropped\":%llu,"
            "\"records_late\":%llu,\"clock_offset_ns\":%lld,\"status\":%u,\"steps\":%u,"
            "\"step_compute_ns\":%lld,\"step_exposed_comm_ns\":%lld,\"step_idle_ns\":%lld}\n",
            static_cast<long long>(w.start_ns), static_cast<long long>(w.end_ns),
            static_cast<long long>(w.compute_ns), static_cast<long long>(w.nccl_ns),
            static_cast<long long>(w.overlap_ns), static_cast<long long>(w.memcpy_ns),
            static_cast<long long>(w.idle_ns), static_cast<unsigned long long>(w.kernels),
            static_cast<unsigned long long>(w.nccl_kernels),
            static_cast<unsigned long long>(w.records_dropped),
            static_cast<unsigned long long>(w.records_late),
            static_cast<long long>(w.clock_offset_ns), w.status, w.steps,
            static_cast<long long>(w.step_compute_ns),
            static_cast<long long>(w.step_exposed_comm_ns), static_cast<long long>(w.step_idle_ns));
  } else if (type == kSentinelWireKernelAttribution &&
             size >= sizeof(SentinelWireKernelAttribution)) {
    SentinelWireKernelAttribution a;
    memcpy(&a, payload, sizeof(a));
    AppendF(&buf_,
            "{\"type\":\"kernel_attribution\",\"start_ns\":%lld,\"end_ns\":%lld,"
            "\"overlap_ns\":%lld,\"stream\":%u,\"correlation\":%u}\n",
            static_cast<long long>(a.start_ns), static_cast<long long>(a.end_ns),
            static_cast<long long>(a.overlap_ns), a.stream_id, a.correlation_id);
  } else {
    AppendF(&buf_, "{\"type\":\"control\",\"record_type\":%u,\"size\":%zu}\n",
            static_cast<unsigned>(type), size);
  }
  (void)WriteOut();  // a failure is logged once inside
}

std::string JsonlSink::InFlightToJson(const SentinelWireInFlight& r) {
  std::string out;
  AppendF(&out,
          "{\"type\":\"in_flight\",\"comm\":\"0x%016" PRIx64
          "\",\"rank\":%d,\"nranks\":%d,\"pid\":%u,\"now_ns\":%" PRId64 ",\"enqueued\":%" PRIu64
          ",\"gpu_started\":%" PRIu64 ",\"completed\":%" PRIu64 ",\"oldest_since_ns\":%" PRId64
          ",\"oldest_seq\":%" PRIu64 ",\"oldest_func\":\"%s\",\"oldest_bytes\":%" PRIu64
          ",\"oldest_datatype\":\"%s\",\"oldest_root\":%d,\"flags\":[",
          r.comm_hash, r.rank, r.nranks, r.pid, r.now_ns, r.enqueued, r.gpu_started, r.completed,
          r.oldest_since_ns, r.oldest_seq, FuncName(r.oldest_func), r.oldest_bytes,
          DatatypeName(r.oldest_datatype), r.oldest_root);
  bool first = true;
  for (const auto& f : {std::make_pair(kSentinelInFlightStuck, "stuck"),
                        std::make_pair(kSentinelInFlightNoKernelCh, "no_kernel_ch"),
                        std::make_pair(kSentinelInFlightSignature, "signature")}) {
    if ((r.flags & f.first) == 0) continue;
    AppendF(&out, "%s\"%s\"", first ? "" : ",", f.second);
    first = false;
  }
  out += "]}";
  return out;
}

void JsonlSink::OnInFlight(const SentinelWireInFlight& state) {
  buf_ += InFlightToJson(state);
  buf_.push_back('\n');
  (void)WriteOut();  // a failure is logged once inside
}

void JsonlSink::Flush() { (void)WriteOut(); }

Status JsonlSink::WriteOut() {
  if (fd_ < 0) {
    buf_.clear();
    return Status(StatusCode::kFailedPrecondition, "no dump file");
  }
  size_t off = 0;
  Status result;
  while (off < buf_.size()) {
    ssize_t w = write(fd_, buf_.data() + off, buf_.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      result =
          Status::Format(StatusCode::kUnavailable, "SENTINEL_DUMP: %zu of %zu bytes not written",
                         buf_.size() - off, buf_.size())
              .WithErrno(w < 0 ? errno : 0);
      break;
    }
    off += static_cast<size_t>(w);
  }
  buf_.clear();
  // A full disk or a closed pipe: said once (the lines are lost, the job goes on).
  if (!result.ok() && !told_write_failure_) {
    told_write_failure_ = true;
    Log(LogLevel::kWarn, "%s (%s); later dump lines may be lost too", result.message(),
        result.error_number() != 0 ? rules::ErrnoText(result.error_number()) : "nothing written");
  }
  return result;
}

}  // namespace sentinel::plugin
