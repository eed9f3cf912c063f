// sentineld's HTTP API (design.md "Collector API"): /metrics, /healthz, /v1/ranks, /v1/telemetry,
// /v1/alerts, /v1/trace, /v1/expect, /v1/exclude. One epoll thread serves every connection
// without blocking: a slow client costs a buffer, never a worker, and each connection has a
// deadline (--http-timeout) for its whole request and reply. GET only; one request per connection.
// Reads the aggregator only through Aggregator::Read().
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

#include "collector/aggregate/aggregator.h"
#include "collector/export/http_request.h"

namespace sentinel::collector {

class HttpServer {
 public:
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;

  explicit HttpServer(Aggregator* aggregator);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds HOST:PORT (port 0 = any free port; an address in use is an error, never shared) and
  // starts serving. Returns the bound port.
  absl::StatusOr<int> Start(const std::string& listen);
  void Stop();

 private:
  struct Conn;
  void Get(const std::string& path, Handler handler) { routes_[path] = std::move(handler); }
  void Loop();
  void AcceptAll();
  void OnReadable(Conn* c);
  void OnWritable(Conn* c);
  void Respond(Conn* c, HttpResponse res, bool allow_get);
  void CloseConn(int fd);

  Aggregator* const aggregator_;
  std::map<std::string, Handler> routes_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::map<int, std::unique_ptr<Conn>> conns_;
  std::thread thread_;
};

// Splits "HOST:PORT" ("[::1]:9464" allowed).
absl::Status SplitHostPort(const std::string& listen, std::string* host, int* port);

}  // namespace sentinel::collector
