// sentineld's HTTP API (schemas/api/api.md): /metrics, /healthz, /v1/ranks, /v1/telemetry,
// /v1/alerts, /v1/trace, /v1/expect, /v1/exclude (GET) and /v1/record (POST), served by
// libmicrohttpd with one internal epoll thread: a slow client costs a bounded connection buffer and
// an fd, never a worker. libmicrohttpd's own timeout is an idle timeout (a client sending a byte a
// second would never hit it), so a small reaper thread enforces --http-timeout as a deadline for
// each connection's whole life. An accept front end (http_front.h) owns the listening socket and
// holds each connection until its request head is complete, then hands it to libmicrohttpd (it
// answers a Content-Length libmicrohttpd would refuse itself: 0.9.75 writes that answer's head
// twice). Thousands of slow clients (slowloris) cannot lock the API out: the front end keeps up to
// 3/4 of ConnectionLimit() waiting and closes the oldest waiting one for each new one past that; in
// libmicrohttpd (the other quarter) a new connection past 7/8 of its share closes the oldest
// open one, and past 15/16 is answered 503. So a fresh request (a liveness probe) is always
// accepted and, being answered in one pass of the polling thread, served. Every deadline counts
// from the accept. GET, and POST without a body on the one route that acts (/v1/record,
// record_route.h); one request per connection. Reads
// the aggregator only through SnapshotSource (snapshots copied under its lock, rendered here after
// it).
// The job-detail routes (/v1/ranks, /v1/telemetry, /v1/alerts, /v1/trace) can grow to megabytes:
// their connection is suspended and one worker thread finds who asks (http_peer.h), takes the
// snapshot for that viewer and renders it, then resumes the connection, so the polling thread
// keeps answering /healthz and /metrics meanwhile. At most kMaxQueuedJobs wait for the worker;
// past that a request is answered 503 at once.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "collector/aggregate/snapshot_source.h"
#include "collector/base/clock.h"
#include "collector/export/http_front.h"
#include "collector/export/http_peer.h"
#include "collector/export/http_request.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace sentinel::collector {

class HttpServer {
 public:
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
  // A job-detail route: answers for the viewer the kernel names (http_peer.h).
  using DetailHandler = std::function<void(const HttpRequest&, const ApiViewer&, HttpResponse&)>;
  // A route that acts (POST): answers for the peer the kernel names, whose rule is its own.
  using ActionHandler = std::function<void(const HttpRequest&, const PeerIdentity&, HttpResponse&)>;

  // `clock` times the connections' deadlines and the log's rate limit (tests may inject a fake).
  explicit HttpServer(SnapshotSource* source, Clock* clock = RealClock());
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds HOST:PORT itself (port 0 = any free port; no SO_REUSEPORT, so an address in use is an
  // error, never shared), hands the socket to libmicrohttpd and starts serving. Returns the port.
  absl::StatusOr<int> Start(const std::string& listen);
  void Stop();

  // Connections served at once (set by Start: 4096, or less when the open-file limit, raised to
  // its hard limit first, is low). Connections closed to make room so far.
  unsigned ConnectionLimit() const { return limit_; }
  uint64_t Evicted() const {
    const uint64_t front = front_ != nullptr ? front_->Evicted() : 0;
    absl::MutexLock lock(&mu_);
    return evicted_ + front;
  }

 private:
  struct Glue;  // libmicrohttpd's C callbacks
  struct Route {
    Handler handler;        // answered on libmicrohttpd's thread
    DetailHandler details;  // or, when set, on the worker for the viewer the kernel names
    ActionHandler action;   // or, when set, a POST on the worker for the peer the kernel names
    const char* method = "GET";
  };
  // A job-detail request waiting for the worker: the connection stays suspended meanwhile.
  struct Job {
    MHD_Connection* conn = nullptr;
    const Route* route = nullptr;
    HttpRequest req;
    sockaddr_storage peer{};
    sockaddr_storage local{};
  };
  void Get(const std::string& path, Handler handler) {
    routes_[path] = {std::move(handler), {}, {}, "GET"};
  }
  void GetDetails(const std::string& path, DetailHandler handler) {
    routes_[path] = {{}, std::move(handler), {}, "GET"};
  }
  void Post(const std::string& path, ActionHandler handler) {
    routes_[path] = {{}, {}, std::move(handler), "POST"};
  }
  void Reap();
  // Reap's idle wait: until stopping or a connection has a deadline (an idle daemon sleeps).
  bool ReapDue() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !by_deadline_.empty(); }
  // The worker: takes each job-detail request, answers it, resumes its connection.
  void Work();
  bool WorkDue() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(work_mu_) {
    return work_stop_ || !jobs_.empty();
  }
  // Drops `fd` from both maps (a no-op when it is not listed).
  void Forget(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes the oldest connections while more than keep_ are open; logs at most once per 10 s.
  void MakeRoom(int64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  SnapshotSource* const source_;
  Clock* const clock_;
  std::map<std::string, Route> routes_;  // written before the daemon starts, then read-only
  ApiReadPolicy policy_;                 // likewise
  MHD_Daemon* daemon_ = nullptr;
  std::unique_ptr<HttpFront> front_;  // owns the listening socket
  std::thread reaper_;
  std::thread worker_;
  unsigned limit_ = 0;       // connections at once, in the front end and in libmicrohttpd
  unsigned keep_ = 0;        // open connections past which the oldest is closed (7/8 of its limit)
  size_t handover_cap_ = 0;  // libmicrohttpd's connections past which new ones get 503
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Open connections (fd -> deadline, CLOCK_MONOTONIC ns) and the same ordered by deadline, i.e.
  // by age (every connection gets the same --http-timeout). libmicrohttpd reports a close before
  // it closes the fd, so a listed fd is never a reused one.
  std::map<int, int64_t> deadlines_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<int64_t, int>> by_deadline_ ABSL_GUARDED_BY(mu_);
  // Connections being handed to libmicrohttpd: fd -> deadline, until it reports them started.
  std::map<int, int64_t> handed_ ABSL_GUARDED_BY(mu_);
  uint64_t evicted_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t evict_logged_ns_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evict_logged_ ABSL_GUARDED_BY(mu_) = 0;  // evicted_ when last logged
  // The worker's queue and its answers, by connection until the resumed connection takes its own
  // (or closes: a closed connection's answer is dropped, so a reused pointer never finds it).
  mutable absl::Mutex work_mu_;
  bool work_stop_ ABSL_GUARDED_BY(work_mu_) = false;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(work_mu_);
  std::map<MHD_Connection*, HttpResponse> answers_ ABSL_GUARDED_BY(work_mu_);
};

// Job-detail requests waiting for the worker at most; more are answered 503.
inline constexpr size_t kMaxQueuedJobs = 64;

// Splits "HOST:PORT" ("[::1]:9464" allowed).
absl::Status SplitHostPort(const std::string& listen, std::string* host, int* port);

}  // namespace sentinel::collector
