// The HTTP accept front end: see http_front.h.
#include "collector/export/http_front.h"

#include <errno.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

#include "collector/base/thread.h"
#include "collector/export/api_json.h"

namespace sentinel::collector {
namespace {

constexpr int kFrontEvents = 64;
constexpr int kFrontMaxWaitMs =
    100;  // deadlines are checked at least this often (the clock may be fake)
constexpr int kFrontAcceptBurst = 1024;
constexpr int64_t kFrontEvictLogNs = 10LL * 1000000000;
// A refused connection is read until the client closes it, so that closing it never resets the
// answer away (unread input makes close() send RST); at most this long.
constexpr int64_t kFrontDrainNs = 2LL * 1000000000;

bool HeaderNameIs(std::string_view line, size_t colon, std::string_view name) {
  return colon == name.size() && strncasecmp(line.data(), name.data(), name.size()) == 0;
}

// As libmicrohttpd reads it: leading blanks skipped, then digits only (a trailing blank too is
// malformed); digits past 64 bits are "too large".
HeadVerdict JudgeContentLength(std::string_view value) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  uint64_t n = 0;
  size_t digits = 0;
  while (digits < value.size() && absl::ascii_isdigit(static_cast<unsigned char>(value[digits]))) {
    const auto d = static_cast<uint64_t>(value[digits] - '0');
    if (n > (UINT64_MAX - d) / 10) return HeadVerdict::kLengthTooBig;
    n = n * 10 + d;
    ++digits;
  }
  if (digits == 0 || digits != value.size()) return HeadVerdict::kBadLength;
  return HeadVerdict::kPass;
}

}  // namespace

HeadVerdict JudgeHead(std::string_view bytes) {
  size_t start = 0;
  // Empty lines before the request line are skipped (RFC 9112 2.2), then the request line.
  while (start < bytes.size() && (bytes[start] == '\r' || bytes[start] == '\n')) ++start;
  size_t end = bytes.find('\n', start);
  if (end == std::string_view::npos) return HeadVerdict::kIncomplete;
  start = end + 1;
  bool chunked_or_other = false;
  bool seen_length = false;
  std::string length;  // the first Content-Length's value, folded lines joined
  bool in_length = false;
  for (;;) {
    end = bytes.find('\n', start);
    if (end == std::string_view::npos) return HeadVerdict::kIncomplete;
    std::string_view line = bytes.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') {  // a folded continuation line
      if (in_length) length.append(" ").append(line);
      continue;
    }
    in_length = false;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;  // libmicrohttpd refuses it itself
    if (HeaderNameIs(line, colon, "transfer-encoding")) chunked_or_other = true;
    if (!seen_length && HeaderNameIs(line, colon, "content-length")) {
      seen_length = true;
      in_length = true;
      length = std::string(line.substr(colon + 1));
    }
  }
  // With Transfer-Encoding libmicrohttpd does not read Content-Length at all.
  if (chunked_or_other || !seen_length) return HeadVerdict::kPass;
  return JudgeContentLength(length);
}

HttpFront::HttpFront(Clock* clock, size_t max_waiting, int64_t timeout_ns, size_t peek_bytes,
                     HandOver hand_over)
    : clock_(clock),
      max_waiting_(std::max<size_t>(1, max_waiting)),
      timeout_ns_(timeout_ns),
      hand_over_(std::move(hand_over)),
      peek_(peek_bytes) {}

HttpFront::~HttpFront() { Stop(); }

bool HttpFront::Start(int listen_fd) {
  listen_fd_ = listen_fd;
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) return false;  // Stop (the destructor) closes them
  for (int fd : {listen_fd_, wake_fd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return false;
  }
  thread_ = StartThread("sentineld-front", [this] { Run(); });
  return true;
}

void HttpFront::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  while (!waiting_.empty()) Drop(waiting_.begin()->first);
  for (int* fd : {&listen_fd_, &epoll_fd_, &wake_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

void HttpFront::Run() {
  std::vector<epoll_event> events(kFrontEvents);
  while (!Stopping()) {
    const int64_t now = clock_->MonoNs();
    while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
      Drop(by_deadline_.begin()->second);
    }
    // With no connection waiting there is no deadline to check: sleep until one arrives (the
    // listening socket) or Stop (the wake fd). 10 wake-ups a second cost an idle daemon ~1 ms of
    // CPU a second.
    int wait_ms = -1;
    if (!by_deadline_.empty()) {
      const int64_t due_ms = (by_deadline_.begin()->first - now + 999999) / 1000000;
      wait_ms = static_cast<int>(std::clamp<int64_t>(due_ms, 1, kFrontMaxWaitMs));
    }
    const int n = epoll_wait(epoll_fd_, events.data(), kFrontEvents, wait_ms);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        AcceptAll();
      } else if (fd == wake_fd_) {
        uint64_t count = 0;
        (void)!read(wake_fd_, &count, sizeof(count));
      } else {
        OnReadable(fd, events[i].events);
      }
    }
  }
}

void HttpFront::AcceptAll() {
  for (int i = 0; i < kFrontAcceptBurst; ++i) {
    Waiting w;
    w.addr_len = sizeof(w.addr);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&w.addr), &w.addr_len,
                           SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of fds: the oldest waiting connection gives way, or the next round retries.
      if ((errno == EMFILE || errno == ENFILE) && !by_deadline_.empty()) {
        Drop(by_deadline_.begin()->second);
        absl::MutexLock lock(&mu_);
        ++evicted_;
        continue;
      }
      return;
    }
    const int64_t now = clock_->MonoNs();
    uint64_t evicted = 0;
    while (waiting_.size() >= max_waiting_) {
      Drop(by_deadline_.begin()->second);
      ++evicted;
    }
    if (evicted > 0) {
      uint64_t total = 0;
      {
        absl::MutexLock lock(&mu_);
        evicted_ += evicted;
        total = evicted_;
      }
      if (now - evict_logged_ns_ >= kFrontEvictLogNs) {
        spdlog::warn(
            "http: {} connections were still sending their request: closed the oldest {} to "
            "serve new requests; a client holds requests open (slowloris?)",
            max_waiting_, total - evict_logged_);
        evict_logged_ = total;
        evict_logged_ns_ = now;
      }
    }
    epoll_event ev{};
    // Edge-triggered: the head is only peeked, so a level-triggered waiting connection would be
    // reported on every wait, and a few thousand of them would delay a fresh request by
    // milliseconds. Each new arrival of bytes is a new edge.
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      close(fd);
      continue;
    }
    w.deadline_ns = now + timeout_ns_;
    waiting_[fd] = w;
    by_deadline_.emplace(w.deadline_ns, fd);
  }
}

void HttpFront::OnReadable(int fd, uint32_t events) {
  auto it = waiting_.find(fd);
  if (it == waiting_.end()) return;
  if (it->second.draining) {
    char sink[4096];
    for (;;) {
      const ssize_t got = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
      if (got > 0) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      Drop(fd);  // the client closed (or failed): done
      return;
    }
  }
  const ssize_t got = recv(fd, peek_.data(), peek_.size(), MSG_PEEK | MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (got <= 0) {
    Drop(fd);  // closed before sending anything, or failed
    return;
  }
  const HeadVerdict verdict = JudgeHead(std::string_view(peek_.data(), static_cast<size_t>(got)));
  const bool full = static_cast<size_t>(got) == peek_.size();
  const bool ended = (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
  if (verdict == HeadVerdict::kIncomplete && !full) {
    // More to come, or never: a client that stops before its head ends is owed no answer.
    if (ended) Drop(fd);
    return;
  }
  if (verdict == HeadVerdict::kBadLength) {
    Refuse(fd, 400, "Bad Request", "malformed Content-Length");
    return;
  }
  if (verdict == HeadVerdict::kLengthTooBig) {
    Refuse(fd, 413, "Content Too Large", "Content-Length larger than 64 bits");
    return;
  }
  // A good head, or one libmicrohttpd refuses itself (too large, cut short): its connection now.
  const Waiting w = it->second;
  // Out of our epoll before the hand-over: from then on libmicrohttpd may close the fd at any
  // moment (and the number be reused by another connection), so it is never touched after it.
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  const Handed handed =
      hand_over_(fd, reinterpret_cast<const sockaddr*>(&w.addr), w.addr_len, w.deadline_ns);
  if (handed == Handed::kBusy) {
    // Not taken: still ours, back in the epoll to drain after the refusal.
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      Drop(fd);
      return;
    }
    Refuse(fd, 503, "Service Unavailable", "busy: too many requests being answered");
    return;
  }
  // Taken, or closed by libmicrohttpd when it failed: no longer ours either way.
  by_deadline_.erase({w.deadline_ns, fd});
  waiting_.erase(it);
  if (handed == Handed::kFailed) spdlog::debug("http: libmicrohttpd did not take a connection");
}

void HttpFront::Refuse(int fd, int code, const char* reason, const char* message) {
  const std::string body = ErrorJson(code, message).dump();
  const std::string out = absl::StrCat(
      "HTTP/1.1 ", code, " ", reason,
      "\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
      "\r\n\r\n", body);
  char sink[4096];
  while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
  }
  // A few hundred bytes into an empty socket buffer: written whole, or the client is gone.
  (void)!send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(fd, SHUT_WR);
  Waiting& w = waiting_[fd];
  w.draining = true;
  const int64_t drain_until = clock_->MonoNs() + kFrontDrainNs;
  if (drain_until < w.deadline_ns) {
    by_deadline_.erase({w.deadline_ns, fd});
    w.deadline_ns = drain_until;
    by_deadline_.emplace(w.deadline_ns, fd);
  }
}

void HttpFront::Drop(int fd) {
  auto it = waiting_.find(fd);
  if (it == waiting_.end()) return;
  by_deadline_.erase({it->second.deadline_ns, fd});
  waiting_.erase(it);
  if (epoll_fd_ >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
}

}  // namespace sentinel::collector
