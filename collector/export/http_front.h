// The accept front end of sentineld's HTTP server (http_server.h). libmicrohttpd 0.9.75 writes the
// response head twice when it refuses a request for its Content-Length (malformed: 400; past 64
// bits: 413), and no option of it avoids that. So this owns the listening socket: it accepts each
// connection, waits in its own epoll until the request head is complete, reads it with MSG_PEEK
// (nothing consumed), answers a bad Content-Length itself with one head and our JSON error body,
// and hands every other connection to libmicrohttpd untouched.
// A connection still sending its head (a slow client) costs only an fd here: at most max_waiting
// wait, the oldest closed first when a new one would pass that, and each is closed when its
// deadline (accept + timeout) passes, so a fresh request is always accepted and handed on.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "collector/base/clock.h"

namespace sentinel::collector {

// What the front end decides from the bytes a connection sent so far.
enum class HeadVerdict {
  kIncomplete,   // the head has not ended yet
  kPass,         // hand to libmicrohttpd
  kBadLength,    // 400: Content-Length is not a decimal number
  kLengthTooBig  // 413: Content-Length does not fit 64 bits
};

// Judges a request head (request line, header lines, empty line; CRLF or LF). With a
// Transfer-Encoding header the Content-Length is not looked at (libmicrohttpd ignores it then).
HeadVerdict JudgeHead(std::string_view bytes);

class HttpFront {
 public:
  // What became of a connection handed on: taken; failed (and closed by the callee); or refused
  // for now because libmicrohttpd is full (the fd is still the front end's, which answers 503).
  enum class Handed { kTaken, kFailed, kBusy };
  // Takes a connection whose head is complete (or too large to judge). `deadline_ns` is the
  // connection's accept time + timeout (Clock::MonoNs).
  using HandOver =
      std::function<Handed(int fd, const sockaddr* addr, socklen_t len, int64_t deadline_ns)>;

  // `peek_bytes`: at least libmicrohttpd's connection memory, so that a head this cannot see
  // whole is one libmicrohttpd refuses itself.
  HttpFront(Clock* clock, size_t max_waiting, int64_t timeout_ns, size_t peek_bytes,
            HandOver hand_over);
  ~HttpFront();
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  // Serves `listen_fd` (non-blocking, listening; owned from here on, closed by Stop). False, with
  // the fd closed, when the front end cannot start.
  bool Start(int listen_fd);
  // Joins the thread and closes the listening socket and every connection still waiting.
  void Stop();

  uint64_t Evicted() const {
    absl::MutexLock lock(&mu_);
    return evicted_;
  }

 private:
  struct Waiting {
    int64_t deadline_ns = 0;
    sockaddr_storage addr{};
    socklen_t addr_len = 0;
    bool draining = false;  // answered by us: reading what the client still sends, then closed
  };
  void Run();
  void AcceptAll();
  void OnReadable(int fd, uint32_t events);
  // Answers `code` with one head and our JSON error body, then drains the connection.
  void Refuse(int fd, int code, const char* reason, const char* message);
  void Drop(int fd);  // closes and forgets a waiting connection
  bool Stopping() const {
    absl::MutexLock lock(&mu_);
    return stop_;
  }

  Clock* const clock_;
  const size_t max_waiting_;
  const int64_t timeout_ns_;
  HandOver hand_over_;
  std::vector<char> peek_;  // the front thread's buffer
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd: Stop wakes the thread with it
  std::thread thread_;
  // Only the front thread touches these while it runs (Stop after joining it).
  std::map<int, Waiting> waiting_;
  std::set<std::pair<int64_t, int>> by_deadline_;  // oldest first: all share one timeout
  int64_t evict_logged_ns_ = 0;
  uint64_t evict_logged_ = 0;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t evicted_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sentinel::collector
