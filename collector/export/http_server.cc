// HTTP handlers: see http_server.h.
#include "collector/export/http_server.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "spdlog/spdlog.h"

#include "collector/base/fd_budget.h"
#include "collector/base/thread.h"
#include "collector/base/user_groups.h"
#include "collector/config/config.h"
#include "collector/export/api_json.h"
#include "collector/export/http_peer.h"
#include "collector/export/prometheus_text.h"
#include "collector/export/record_route.h"
#include "collector/export/trace_json.h"
#include "common/wire_text.h"

namespace sentinel::collector {
namespace {

constexpr const char* kJson = "application/json";
constexpr int64_t kReapPeriodNs = 100000000;
constexpr int64_t kEvictLogPeriodNs = 10LL * 1000000000;
// Set in a request's context when its target carried more than kMaxQueryParams parameters; the
// rest of the context is the target's length + 1.
constexpr uintptr_t kTooManyParams = uintptr_t{1} << (sizeof(uintptr_t) * 8 - 1);

void SendJson(HttpResponse& res, int status, const nlohmann::json& body) {
  res.status = status;
  // Strings from plugins are untrusted and may not be UTF-8: replace bad bytes, never fail.
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), kJson);
}

// Reads a duration query parameter; on error fills a 400 response and returns false.
bool DurationParam(const HttpRequest& req, HttpResponse& res, const char* name, int64_t fallback,
                   int64_t* out) {
  *out = fallback;
  if (!req.has_param(name)) return true;
  absl::StatusOr<int64_t> parsed = ParseDurationParam(req.get_param_value(name));
  if (!parsed.ok()) {
    SendJson(res, 400, ErrorJson(400, absl::StrCat("bad ", name, ": ", parsed.status().message())));
    return false;
  }
  *out = *parsed;
  return true;
}

}  // namespace

absl::Status SplitHostPort(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError("--listen: expected HOST:PORT");
  *host = listen.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
  if (host->empty()) *host = "127.0.0.1";
  if (!absl::SimpleAtoi(listen.substr(colon + 1), port) || *port < 0 || *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--listen: bad port in '", listen, "'"));
  }
  return absl::OkStatus();
}

// libmicrohttpd's callbacks, all on its polling thread except Notify/Reap's shared map.
struct HttpServer::Glue {
  // printf-style (libmicrohttpd's logger type): the attribute lets the compiler check the call.
  __attribute__((format(printf, 2, 0))) static void Log(void* cls, const char* format, va_list ap) {
    // libmicrohttpd's messages can quote what a client sent, and a client can make many: each
    // is escaped (common/wire_text.h), and at most kLogBurst are written per second, the rest
    // counted and reported with the next one written.
    constexpr int kLogBurst = 20;
    struct Window {
      std::mutex mu;
      int64_t start_ns = 0;
      int written = 0;
      uint64_t suppressed = 0;
    };
    // Constant-initialised and never torn down (the polling thread may log during exit): this
    // holds because std::mutex needs no destructor here, which the assertion keeps true.
    static_assert(std::is_trivially_destructible<Window>::value,
                  "the log window must outlive static destruction");
    ABSL_CONST_INIT static Window window;
    uint64_t suppressed = 0;
    {
      std::lock_guard<std::mutex> lock(window.mu);
      const int64_t now = static_cast<HttpServer*>(cls)->clock_->MonoNs();
      if (now - window.start_ns >= 1000000000) {
        window.start_ns = now;
        window.written = 0;
      }
      if (window.written >= kLogBurst) {
        ++window.suppressed;
        return;
      }
      ++window.written;
      suppressed = window.suppressed;
      window.suppressed = 0;
    }
    char line[512];
    const int n = vsnprintf(line, sizeof(line), format, ap);
    if (n <= 0) return;
    size_t len = std::min(static_cast<size_t>(n), sizeof(line) - 1);
    while (len > 0 && line[len - 1] == '\n') --len;  // spdlog ends the line itself
    char shown[4 * sizeof(line) + 1];
    const size_t shown_len = rules::EscapeWireText(line, len, shown, sizeof(shown));
    if (suppressed > 0) {
      spdlog::debug("http: {} (and {} more messages suppressed)",
                    std::string_view(shown, shown_len), suppressed);
    } else {
      spdlog::debug("http: {}", std::string_view(shown, shown_len));
    }
  }

  // The raw request target's length rides in the request's context pointer (no allocation, so
  // nothing to free when a client vanishes mid-request); +1 keeps it non-null. libmicrohttpd
  // calls this before it splits the query, in its own (writable) read buffer: a query of too many
  // parameters is cut to nothing here, so that it cannot overflow the connection's memory pool
  // (which left the request unanswered), and the flag has it refused with a 400.
  static void* UriLog(void* /*cls*/, const char* uri, MHD_Connection* /*conn*/) {
    const size_t len = strlen(uri);
    uintptr_t context = static_cast<uintptr_t>(len) + 1;
    if (CountQueryParams(std::string_view(uri, len)) > kMaxQueryParams) {
      char* query = const_cast<char*>(strchr(uri, '?'));  // NOLINT: the buffer is libmicrohttpd's
      query[1] = '\0';
      context |= kTooManyParams;
    }
    return reinterpret_cast<void*>(context);
  }

  static void Notify(void* cls, MHD_Connection* conn, void** /*socket_context*/,
                     MHD_ConnectionNotificationCode code) {
    auto* self = static_cast<HttpServer*>(cls);
    const MHD_ConnectionInfo* info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info == nullptr) return;
    const int fd = info->connect_fd;
    {
      absl::MutexLock lock(&self->work_mu_);
      self->answers_.erase(conn);
    }
    absl::MutexLock lock(&self->mu_);
    self->Forget(fd);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      const int64_t now = self->clock_->MonoNs();
      // The deadline counts from the front end's accept (http_front.h).
      auto handed = self->handed_.find(fd);
      const int64_t deadline = handed != self->handed_.end()
                                   ? handed->second
                                   : now + self->source_->config().http_timeout_ns;
      if (handed != self->handed_.end()) self->handed_.erase(handed);
      self->deadlines_[fd] = deadline;
      self->by_deadline_.emplace(deadline, fd);
      self->MakeRoom(now);
    }
  }

  // `allow`: the method the route takes, for a 405's Allow header (null otherwise).
  static MHD_Result Send(MHD_Connection* conn, const HttpResponse& res, const char* allow) {
    MHD_Response* r = MHD_create_response_from_buffer(
        res.body.size(), const_cast<char*>(res.body.data()), MHD_RESPMEM_MUST_COPY);
    if (r == nullptr) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, res.content_type.c_str());
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (allow != nullptr) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    const MHD_Result ok = MHD_queue_response(conn, static_cast<unsigned>(res.status), r);
    MHD_destroy_response(r);
    return ok;
  }

  static MHD_Result AddParam(void* cls, MHD_ValueKind /*kind*/, const char* key,
                             const char* value) {
    static_cast<HttpRequest*>(cls)->params.emplace_back(key, value == nullptr ? "" : value);
    return MHD_YES;
  }

  static MHD_Result AddHeadSize(void* cls, MHD_ValueKind /*kind*/, const char* key,
                                const char* value) {
    *static_cast<size_t*>(cls) += strlen(key) + (value == nullptr ? 0 : strlen(value)) + 4;
    return MHD_YES;
  }

  // Hands a job-detail request to the worker and suspends its connection; false when the queue is
  // full or the server stops (the caller answers 503).
  static bool Defer(HttpServer* self, MHD_Connection* conn, const Route* route, HttpRequest req) {
    Job job;
    job.conn = conn;
    job.route = route;
    job.req = std::move(req);
    const MHD_ConnectionInfo* addr =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const MHD_ConnectionInfo* fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (addr != nullptr && addr->client_addr != nullptr) {
      const size_t len =
          addr->client_addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
      memcpy(&job.peer, addr->client_addr, len);
    }
    socklen_t local_len = sizeof(job.local);
    if (fd == nullptr ||
        getsockname(fd->connect_fd, reinterpret_cast<sockaddr*>(&job.local), &local_len) != 0) {
      job.local.ss_family = AF_UNSPEC;  // identifies no one: the viewer sees nothing
    }
    absl::MutexLock lock(&self->work_mu_);
    if (self->work_stop_ || self->jobs_.size() >= kMaxQueuedJobs) return false;
    MHD_suspend_connection(conn);
    self->jobs_.push_back(std::move(job));
    return true;
  }

  // Called once per request (a response is queued on the first call, before any body), and once
  // more after the worker resumed a suspended one, to queue the worker's answer.
  static MHD_Result Access(void* cls, MHD_Connection* conn, const char* url, const char* method,
                           const char* /*version*/, const char* /*upload_data*/,
                           size_t* /*upload_data_size*/, void** con_cls) {
    auto* self = static_cast<HttpServer*>(cls);
    HttpResponse res;
    bool answered = false;
    {
      absl::MutexLock lock(&self->work_mu_);
      auto answer = self->answers_.find(conn);
      if (answer != self->answers_.end()) {
        res = std::move(answer->second);
        self->answers_.erase(answer);
        answered = true;
      }
    }
    if (answered) return Send(conn, res, nullptr);
    const uintptr_t context = reinterpret_cast<uintptr_t>(*con_cls);
    const size_t target = (context & ~kTooManyParams) - 1;
    const size_t line = strlen(method) + 1 + target + 9;  // METHOD SP TARGET SP HTTP/1.x
    if (line > kMaxRequestLine) {
      SendJson(
          res, 414,
          ErrorJson(414, absl::StrCat("request line longer than ", kMaxRequestLine, " bytes")));
      return Send(conn, res, nullptr);
    }
    size_t head = line + 2 + 2;  // both CRLFs around the headers
    MHD_get_connection_values(conn, MHD_HEADER_KIND, &AddHeadSize, &head);
    if (head > kMaxRequestHead) {
      SendJson(
          res, 431,
          ErrorJson(431, absl::StrCat("request head larger than ", kMaxRequestHead, " bytes")));
      return Send(conn, res, nullptr);
    }
    if ((context & kTooManyParams) != 0) {
      SendJson(res, 400,
               ErrorJson(400, absl::StrCat("more than ", kMaxQueryParams, " query parameters")));
      return Send(conn, res, nullptr);
    }
    HttpRequest req;
    req.method = method;
    req.path = url;
    auto route = self->routes_.find(req.path);
    if (route == self->routes_.end()) {
      SendJson(res, 404, ErrorJson(404, absl::StrCat("no such endpoint: ", req.path)));
      return Send(conn, res, nullptr);
    }
    const char* method_allowed = route->second.method;
    if (req.method != method_allowed) {
      SendJson(res, 405,
               ErrorJson(405, absl::StrCat("method ", req.method, " not allowed on ", req.path,
                                           ": use ", method_allowed)));
      return Send(conn, res, method_allowed);
    }
    if (route->second.action) {
      // The one route that acts takes its arguments in the query: a body is refused before it
      // is read (libmicrohttpd would otherwise hold it in the connection's memory).
      const char* length =
          MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
      const char* coding =
          MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
      if (coding != nullptr || (length != nullptr && std::strcmp(length, "0") != 0)) {
        SendJson(res, 413,
                 ErrorJson(413, absl::StrCat(req.method, " ", req.path,
                                             " takes no body (its arguments are in the query)")));
        return Send(conn, res, nullptr);
      }
    }
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, &AddParam, &req);
    if (route->second.details || route->second.action) {
      if (Defer(self, conn, &route->second, std::move(req))) return MHD_YES;
      SendJson(res, 503, ErrorJson(503, "busy: too many job-detail requests waiting"));
      return Send(conn, res, nullptr);
    }
    route->second.handler(req, res);
    return Send(conn, res, nullptr);
  }
};

HttpServer::HttpServer(SnapshotSource* source, Clock* clock) : source_(source), clock_(clock) {}

HttpServer::~HttpServer() { Stop(); }

absl::StatusOr<int> HttpServer::Start(const std::string& listen) {
  std::string host;
  int port = 0;
  absl::Status s = SplitHostPort(listen, &host, &port);
  if (!s.ok()) return s;
  policy_.daemon_uid = geteuid();
  policy_.remote_details = source_->config().api_remote_details;
  if (!source_->config().api_read_group.empty()) {
    absl::StatusOr<gid_t> gid = GroupId(source_->config().api_read_group);
    if (!gid.ok())
      return absl::InvalidArgumentError(absl::StrCat("--api-read-group: ", gid.status().message()));
    policy_.reader_gid = *gid;
  }
  SnapshotSource* agg = source_;
  // The kinds were validated when the config was parsed.
  ExcludePolicy exclude{ParseExcludeKinds(source_->config().exclude_kinds).value_or(0),
                        source_->config().exclude_hold_ns};
  const MetricsOptions metrics = MetricsOptionsFrom(source_->config());
  Get("/metrics", [agg, exclude, metrics](const HttpRequest&, HttpResponse& res) {
    // Copied under the lock, rendered (with the series budget) after: ingest waits for the copy
    // only (metrics_snapshot.h). Likewise every handler below (snapshot_source.h).
    std::vector<ExcludedHost> excluded;
    const MetricsSnapshot snap = agg->SnapshotMetrics(exclude, agg->clock()->RealNs(), &excluded);
    std::string text = RenderPrometheus(snap, metrics);
    text += ExcludePrometheus(excluded);
    res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
  });
  Get("/healthz", [agg](const HttpRequest&, HttpResponse& res) {
    const int64_t real = agg->clock()->RealNs();
    const int64_t mono = agg->clock()->MonoNs();
    SendJson(res, 200, HealthzJson(agg->SnapshotHealth(), real, mono));
  });
  // The job-detail routes run on the worker, each for the viewer the kernel names.
  GetDetails("/v1/ranks", [agg](const HttpRequest&, const ApiViewer& viewer, HttpResponse& res) {
    // Copied under the lock, sorted and rendered after (api_snapshot.h).
    SendJson(res, 200, RanksJson(agg->SnapshotRanks(viewer)));
  });
  GetDetails("/v1/telemetry",
             [agg](const HttpRequest& req, const ApiViewer& viewer, HttpResponse& res) {
               int64_t window = 0;
               if (!DurationParam(req, res, "window", agg->config().window_ns, &window)) return;
               const int64_t mono = agg->clock()->MonoNs();
               SendJson(res, 200, TelemetryJson(agg->SnapshotTelemetry(window, mono, viewer)));
             });
  GetDetails("/v1/alerts", [agg](const HttpRequest&, const ApiViewer& viewer, HttpResponse& res) {
    SendJson(res, 200, AlertsJson(agg->SnapshotAlerts(viewer)));
  });
  Get("/v1/exclude", [agg, exclude](const HttpRequest&, HttpResponse& res) {
    const int64_t real = agg->clock()->RealNs();
    SendJson(res, 200, ExcludeJson(agg->SnapshotExclusions(exclude, real), exclude));
  });
  GetDetails(
      "/v1/trace", [agg](const HttpRequest& req, const ApiViewer& viewer, HttpResponse& res) {
        int64_t window = 0;
        if (!DurationParam(req, res, "last", 60LL * 1000000000, &window)) return;
        const int64_t mono = agg->clock()->MonoNs();
        // Copy under the lock, render after it (snapshot.h): the ingest thread waits for the copy
        // only.
        SendJson(res, 200, TraceJson(agg->SnapshotTrace(mono - window, viewer), window, mono));
      });
  // Writes a flight record now: the peer's own jobs, any for root and sentineld's user
  // (record_route.h). On the worker: it copies histories under the lock and writes a file.
  const ApiReadPolicy policy = policy_;
  Post("/v1/record",
       [agg, policy](const HttpRequest& req, const PeerIdentity& peer, HttpResponse& res) {
         const RecordAnswer answer = AnswerRecordRequest(agg, policy, req, peer);
         SendJson(res, answer.status, answer.body);
       });
  Get("/v1/expect", [agg](const HttpRequest&, HttpResponse& res) {
    const Config& config = agg->config();
    if (config.expect.empty()) {
      SendJson(res, 404, ErrorJson(404, "no node default expectation (sentineld --expect)"));
      return;
    }
    nlohmann::json body;
    body["expect"] = config.expect;
    body["on_mismatch"] = config.expect_on_mismatch.empty()
                              ? nlohmann::json(nullptr)
                              : nlohmann::json(config.expect_on_mismatch);
    body["source"] = "node-default";
    SendJson(res, 200, body);
  });
  // Bind ourselves: no SO_REUSEPORT, so a second daemon on a busy port fails instead of sharing
  // it (the kernel would split the requests between the two), and the error names our address.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* result = nullptr;
  const std::string port_text = std::to_string(port);
  const int gai = getaddrinfo(host.c_str(), port_text.c_str(), &hints, &result);
  if (gai != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", listen, ": ", gai_strerror(gai)));
  }
  int listen_fd = -1;
  int err = 0;
  for (addrinfo* ai = result; ai != nullptr && listen_fd < 0; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      err = errno;
      continue;
    }
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));  // TIME_WAIT only
    // A full backlog would make new clients (a liveness probe) wait out SYN retries: the
    // kernel's largest.
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      err = errno;
      close(fd);
      continue;
    }
    listen_fd = fd;
  }
  freeaddrinfo(result);
  if (listen_fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen, ": ", ErrnoText(err)));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port = bound.ss_family == AF_INET6
                             ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                             : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  // Its idle timeout, in whole seconds (at least 1): the reaper enforces the exact deadline.
  const int64_t timeout_ns = source_->config().http_timeout_ns;
  const auto idle_s =
      static_cast<unsigned>(std::max<int64_t>(1, (timeout_ns + 999999999) / 1000000000));
  limit_ = static_cast<unsigned>(HttpConnectionsForFds(RaisedFileLimit()));
  // Most connections wait in the front end (a slow client costs an fd there); libmicrohttpd gets
  // a quarter (at least 16), enough for the complete requests it answers at once or hands to the
  // worker.
  const unsigned mhd_limit = std::max(limit_ / 4, 16U);
  // The headroom above keep_ absorbs connections handed over before libmicrohttpd has closed the
  // ones MakeRoom shut down; it never reaches its own limit, where it refuses new ones.
  keep_ = mhd_limit - mhd_limit / 8;
  handover_cap_ = mhd_limit - mhd_limit / 16;
  const size_t memory = kMaxRequestHead + 8192;
  daemon_ = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME |
          MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET,
      0, nullptr, nullptr, &Glue::Access, this, MHD_OPTION_CONNECTION_LIMIT, mhd_limit,
      MHD_OPTION_CONNECTION_TIMEOUT, idle_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory,
      MHD_OPTION_URI_LOG_CALLBACK, &Glue::UriLog, this, MHD_OPTION_NOTIFY_CONNECTION, &Glue::Notify,
      this, MHD_OPTION_EXTERNAL_LOGGER, &Glue::Log, this, MHD_OPTION_END);
  if (daemon_ == nullptr) {
    close(listen_fd);
    return absl::InternalError(
        absl::StrCat("cannot serve HTTP on ", listen, ": libmicrohttpd failed to start"));
  }
  // libmicrohttpd 0.9.75 writes the head twice when it refuses a Content-Length: the front end
  // accepts, refuses those itself and hands every other connection over (http_front.h).
  front_ = std::make_unique<HttpFront>(
      clock_, limit_ - mhd_limit, timeout_ns, memory,
      [this](int fd, const sockaddr* addr, socklen_t addr_len, int64_t deadline_ns) {
        // libmicrohttpd must never reach its own limit: past it, 0.9.75 was seen to hang.
        // Counted: its open connections and those handed to it but not yet started.
        const MHD_DaemonInfo* open =
            MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        {
          absl::MutexLock lock(&mu_);
          const size_t held = (open != nullptr ? open->num_connections : 0) + handed_.size();
          if (held >= handover_cap_) return HttpFront::Handed::kBusy;
          handed_[fd] = deadline_ns;
        }
        if (MHD_add_connection(daemon_, fd, addr, addr_len) == MHD_YES) {
          return HttpFront::Handed::kTaken;
        }
        absl::MutexLock lock(&mu_);
        handed_.erase(fd);  // libmicrohttpd closed it
        return HttpFront::Handed::kFailed;
      });
  if (!front_->Start(listen_fd)) {
    const int err_front = errno;
    front_.reset();  // closes the listening socket
    MHD_stop_daemon(daemon_);
    daemon_ = nullptr;
    return absl::InternalError(
        absl::StrCat("cannot serve HTTP on ", listen, ": ", ErrnoText(err_front)));
  }
  reaper_ = StartThread("sentineld-http", [this] { Reap(); });
  worker_ = StartThread("sentineld-api", [this] { Work(); });
  return bound_port;
}

void HttpServer::Forget(int fd) {
  auto it = deadlines_.find(fd);
  if (it == deadlines_.end()) return;
  by_deadline_.erase({it->second, fd});
  deadlines_.erase(it);
}

void HttpServer::MakeRoom(int64_t now_ns) {
  while (by_deadline_.size() > keep_) {
    const int fd = by_deadline_.begin()->second;
    // Not close(): the fd stays libmicrohttpd's; it sees the end of the stream and closes it.
    shutdown(fd, SHUT_RDWR);
    Forget(fd);
    ++evicted_;
  }
  if (evicted_ != evict_logged_ && now_ns - evict_logged_ns_ >= kEvictLogPeriodNs) {
    spdlog::warn(
        "http: {} open connections reached {} of {}: closed the oldest {} (in all {}) to serve "
        "new requests; a client holds requests open (slowloris?)",
        by_deadline_.size() + 1, keep_, limit_, evicted_ - evict_logged_, evicted_);
    evict_logged_ = evicted_;
    evict_logged_ns_ = now_ns;
  }
}

void HttpServer::Reap() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    // With no connection open there is nothing to reap: no periodic wake-up (10 a second cost an
    // idle daemon 0.4 ms of CPU a second).
    if (by_deadline_.empty()) mu_.Await(absl::Condition(this, &HttpServer::ReapDue));
    mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Nanoseconds(kReapPeriodNs));
    const int64_t now = clock_->MonoNs();
    // Oldest first; every connection gets the same timeout, so stop at the first one still due.
    while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
      const int fd = by_deadline_.begin()->second;
      shutdown(fd, SHUT_RDWR);  // libmicrohttpd closes it, as above
      Forget(fd);
    }
  }
}

void HttpServer::Work() {
  for (;;) {
    Job job;
    bool stopping = false;
    {
      absl::MutexLock lock(&work_mu_);
      work_mu_.Await(absl::Condition(this, &HttpServer::WorkDue));
      if (jobs_.empty()) return;  // stopping, and every suspended connection resumed
      job = std::move(jobs_.front());
      jobs_.pop_front();
      stopping = work_stop_;
    }
    HttpResponse res;
    if (stopping) {
      SendJson(res, 503, ErrorJson(503, "sentineld is stopping"));
    } else if (job.route->action) {
      job.route->action(job.req, IdentifyPeer(job.peer, job.local), res);
    } else {
      job.route->details(job.req, ViewerFor(policy_, IdentifyPeer(job.peer, job.local)), res);
    }
    {
      absl::MutexLock lock(&work_mu_);
      answers_[job.conn] = std::move(res);
    }
    MHD_resume_connection(job.conn);
  }
}

void HttpServer::Stop() {
  // No new connection reaches libmicrohttpd after this.
  if (front_ != nullptr) front_->Stop();
  {
    absl::MutexLock lock(&work_mu_);
    work_stop_ = true;  // no connection is suspended after the worker ends
  }
  if (worker_.joinable()) worker_.join();
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (reaper_.joinable()) reaper_.join();
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

}  // namespace sentinel::collector
