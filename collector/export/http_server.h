// sentineld's HTTP API (design.md "Collector API"): /metrics, /healthz, /v1/ranks, /v1/telemetry,
// /v1/alerts, /v1/trace, /v1/expect, /v1/exclude, served by libmicrohttpd with one internal epoll
// thread: a slow client costs a bounded connection buffer, never a worker. libmicrohttpd's own
// timeout is an idle timeout (a client sending a byte a second would never hit it), so a small
// reaper thread enforces --http-timeout as a deadline for each connection's whole life. GET only;
// one request per connection. Reads the aggregator only through SnapshotSource (snapshots copied
// under its lock, rendered here after it).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "collector/aggregate/snapshot_source.h"
#include "collector/export/http_request.h"

struct MHD_Daemon;

namespace sentinel::collector {

class HttpServer {
 public:
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;

  explicit HttpServer(SnapshotSource* source);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds HOST:PORT itself (port 0 = any free port; no SO_REUSEPORT, so an address in use is an
  // error, never shared), hands the socket to libmicrohttpd and starts serving. Returns the port.
  absl::StatusOr<int> Start(const std::string& listen);
  void Stop();

 private:
  struct Glue;  // libmicrohttpd's C callbacks
  void Get(const std::string& path, Handler handler) { routes_[path] = std::move(handler); }
  void Reap();

  SnapshotSource* const source_;
  std::map<std::string, Handler> routes_;  // written before the daemon starts, then read-only
  MHD_Daemon* daemon_ = nullptr;
  std::thread reaper_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Open connections (fd -> deadline, CLOCK_MONOTONIC ns); libmicrohttpd reports a close before
  // it closes the fd, so a listed fd is never a reused one.
  std::map<int, int64_t> deadlines_ ABSL_GUARDED_BY(mu_);
};

// Splits "HOST:PORT" ("[::1]:9464" allowed).
absl::Status SplitHostPort(const std::string& listen, std::string* host, int* port);

}  // namespace sentinel::collector
