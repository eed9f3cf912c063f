// HTTP handlers: see http_server.h.
#include "collector/export/http_server.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include "collector/aggregate/exclusion.h"
#include "collector/base/epoll_wakeup.h"
#include "collector/config/config.h"
#include "collector/export/exporters.h"

namespace sentinel::collector {
namespace {

constexpr const char* kJson = "application/json";
constexpr size_t kMaxConnections = 512;    // past this, new connections get a 503
constexpr int64_t kLingerNs = 1000000000;  // reading what a refused client still sends

int64_t MonoNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

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
  absl::StatusOr<int64_t> d = ParseDurationNs(req.get_param_value(name));
  if (!d.ok() || *d <= 0) {
    SendJson(res, 400,
             ErrorJson(400, absl::StrCat("bad ", name, ": ",
                                         d.ok() ? "must be > 0" : d.status().message())));
    return false;
  }
  *out = *d;
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

HttpServer::HttpServer(Aggregator* aggregator) : aggregator_(aggregator) {}

HttpServer::~HttpServer() { Stop(); }

absl::StatusOr<int> HttpServer::Start(const std::string& listen) {
  std::string host;
  int port = 0;
  absl::Status s = SplitHostPort(listen, &host, &port);
  if (!s.ok()) return s;
  Aggregator* agg = aggregator_;
  // The kinds were validated when the config was parsed.
  ExcludePolicy exclude{ParseExcludeKinds(aggregator_->config().exclude_kinds).value_or(0),
                        aggregator_->config().exclude_hold_ns};
  const MetricsOptions metrics = MetricsOptionsFrom(aggregator_->config());
  Get("/metrics", [agg, exclude, metrics](const HttpRequest&, HttpResponse& res) {
    std::string text;
    const int64_t real = agg->clock()->RealNs();
    agg->Read([&](const State& state) {
      text = RenderPrometheus(state, metrics);
      text += ExcludePrometheus(DeriveExclusions(state.alerts, exclude, real));
    });
    res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
  });
  Get("/healthz", [agg](const HttpRequest&, HttpResponse& res) {
    nlohmann::json body;
    const int64_t real = agg->clock()->RealNs();
    const int64_t mono = agg->clock()->MonoNs();
    agg->Read([&](const State& state) { body = HealthzJson(state, real, mono); });
    SendJson(res, 200, body);
  });
  Get("/v1/ranks", [agg](const HttpRequest&, HttpResponse& res) {
    nlohmann::json body;
    const int64_t mono = agg->clock()->MonoNs();
    agg->Read([&](const State& state) { body = RanksJson(state, mono); });
    SendJson(res, 200, body);
  });
  Get("/v1/telemetry", [agg](const HttpRequest& req, HttpResponse& res) {
    int64_t window = 0;
    if (!DurationParam(req, res, "window", agg->config().window_ns, &window)) return;
    nlohmann::json body;
    const int64_t mono = agg->clock()->MonoNs();
    agg->Read([&](const State& state) { body = TelemetryJson(state, window, mono); });
    SendJson(res, 200, body);
  });
  Get("/v1/alerts", [agg](const HttpRequest&, HttpResponse& res) {
    nlohmann::json body;
    agg->Read([&](const State& state) { body = AlertsJson(state); });
    SendJson(res, 200, body);
  });
  Get("/v1/exclude", [agg, exclude](const HttpRequest&, HttpResponse& res) {
    nlohmann::json body;
    const int64_t real = agg->clock()->RealNs();
    agg->Read([&](const State& state) {
      body = ExcludeJson(DeriveExclusions(state.alerts, exclude, real), exclude);
    });
    SendJson(res, 200, body);
  });
  Get("/v1/trace", [agg](const HttpRequest& req, HttpResponse& res) {
    int64_t window = 0;
    if (!DurationParam(req, res, "last", 60LL * 1000000000, &window)) return;
    nlohmann::json body;
    const int64_t mono = agg->clock()->MonoNs();
    agg->Read([&](const State& state) { body = TraceJson(state, window, mono); });
    SendJson(res, 200, body);
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
  // it (the kernel would split the requests between the two).
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
  int err = 0;
  for (addrinfo* ai = result; ai != nullptr && listen_fd_ < 0; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      err = errno;
      continue;
    }
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));  // TIME_WAIT only
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      err = errno;
      close(fd);
      continue;
    }
    listen_fd_ = fd;
  }
  freeaddrinfo(result);
  if (listen_fd_ < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen, ": ", ErrnoText(err)));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port = bound.ss_family == AF_INET6
                             ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                             : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  absl::Status loop = OpenEpollWithWakeup(listen_fd_, &epoll_fd_, &wake_fd_, "http");
  if (!loop.ok()) return loop;
  thread_ = std::thread([this] { Loop(); });
  return bound_port;
}

// One connection: the request read so far, then the reply being written, then a short linger
// that drains what the client still sends (closing with unread input would reset the reply).
struct HttpServer::Conn {
  int fd = -1;
  int64_t deadline_ns = 0;
  std::string in;
  std::string out;
  size_t out_off = 0;
  bool writing = false;
  bool lingering = false;
};

void HttpServer::Stop() {
  stop_.store(true, std::memory_order_relaxed);
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  for (auto& [fd, c] : conns_) close(fd);
  conns_.clear();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  listen_fd_ = epoll_fd_ = wake_fd_ = -1;
}

void HttpServer::CloseConn(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  conns_.erase(fd);
}

void HttpServer::AcceptAll() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (conns_.size() >= kMaxConnections) {
      static constexpr char kBusy[] =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      (void)!send(fd, kBusy, sizeof(kBusy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      close(fd);
      continue;
    }
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->deadline_ns = MonoNs() + aggregator_->config().http_timeout_ns;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      close(fd);
      continue;
    }
    conns_.emplace(fd, std::move(c));
  }
}

void HttpServer::Respond(Conn* c, HttpResponse res, bool allow_get) {
  c->out =
      absl::StrCat("HTTP/1.1 ", res.status, " ", HttpReason(res.status),
                   "\r\nContent-Type: ", res.content_type, "\r\nContent-Length: ", res.body.size(),
                   "\r\nConnection: close\r\n", allow_get ? "Allow: GET\r\n" : "", "\r\n");
  c->out += res.body;
  c->out_off = 0;
  c->writing = true;
  c->in.clear();
  c->in.shrink_to_fit();
  epoll_event ev{};
  ev.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
  ev.data.fd = c->fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
  OnWritable(c);
}

void HttpServer::OnWritable(Conn* c) {
  while (c->out_off < c->out.size()) {
    const ssize_t n = send(c->fd, c->out.data() + c->out_off, c->out.size() - c->out_off,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      CloseConn(c->fd);
      return;
    }
    c->out_off += static_cast<size_t>(n);
  }
  // All written: half-close and drain briefly, so the client reads the reply before any reset.
  shutdown(c->fd, SHUT_WR);
  c->writing = false;
  c->lingering = true;
  c->out.clear();
  c->out.shrink_to_fit();
  c->deadline_ns = std::min(c->deadline_ns, MonoNs() + kLingerNs);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = c->fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
}

void HttpServer::OnReadable(Conn* c) {
  char buf[8192];
  for (;;) {
    const ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      if (!c->writing) {
        CloseConn(c->fd);
        return;
      }
      // EOF while the reply is still going out: finish it, waiting for writability only.
      epoll_event ev{};
      ev.events = EPOLLOUT;
      ev.data.fd = c->fd;
      epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
      return;
    }
    if (c->writing || c->lingering) continue;  // the request is answered: discard the rest
    c->in.append(buf, static_cast<size_t>(n));
    HttpRequest req;
    size_t head_size = 0;
    HttpResponse res;
    switch (ParseRequestHead(c->in, &req, &head_size)) {
      case HeadStatus::kIncomplete:
        continue;
      case HeadStatus::kUriTooLong:
        SendJson(
            res, 414,
            ErrorJson(414, absl::StrCat("request line longer than ", kMaxRequestLine, " bytes")));
        return Respond(c, std::move(res), false);
      case HeadStatus::kHeadTooLarge:
        SendJson(
            res, 431,
            ErrorJson(431, absl::StrCat("request head larger than ", kMaxRequestHead, " bytes")));
        return Respond(c, std::move(res), false);
      case HeadStatus::kBadVersion:
        SendJson(res, 505, ErrorJson(505, "only HTTP/1.0 and HTTP/1.1 are served"));
        return Respond(c, std::move(res), false);
      case HeadStatus::kBadRequest:
        SendJson(res, 400, ErrorJson(400, "malformed request line or query string"));
        return Respond(c, std::move(res), false);
      case HeadStatus::kComplete:
        break;
    }
    auto route = routes_.find(req.path);
    if (route == routes_.end()) {
      SendJson(res, 404, ErrorJson(404, absl::StrCat("no such endpoint: ", req.path)));
      return Respond(c, std::move(res), false);
    }
    if (req.method != "GET") {
      SendJson(res, 405,
               ErrorJson(405, absl::StrCat("method ", req.method, " not allowed on ", req.path,
                                           ": use GET")));
      return Respond(c, std::move(res), true);
    }
    route->second(req, res);
    return Respond(c, std::move(res), false);
  }
}

void HttpServer::Loop() {
  std::vector<epoll_event> events(64);
  while (!stop_.load(std::memory_order_relaxed)) {
    const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), 100);
    for (int i = 0; i < n; ++i) {
      const epoll_event& e = events[static_cast<size_t>(i)];
      if (e.data.fd == listen_fd_) {
        AcceptAll();
        continue;
      }
      if (e.data.fd == wake_fd_) continue;
      auto it = conns_.find(e.data.fd);
      if (it == conns_.end()) continue;
      Conn* c = it->second.get();
      if ((e.events & EPOLLOUT) != 0 && c->writing) {
        OnWritable(c);
        it = conns_.find(e.data.fd);
        if (it == conns_.end()) continue;
      }
      if ((e.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) {
        if ((e.events & (EPOLLHUP | EPOLLERR)) != 0) {
          CloseConn(c->fd);
          continue;
        }
        OnReadable(c);
      }
    }
    // Deadlines: a client that has not sent its request and read its reply by now is cut off.
    const int64_t now = MonoNs();
    std::vector<int> expired;
    for (const auto& [fd, c] : conns_) {
      if (now >= c->deadline_ns) expired.push_back(fd);
    }
    for (int fd : expired) CloseConn(fd);
  }
}

}  // namespace sentinel::collector
