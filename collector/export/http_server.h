// sentineld's HTTP API (design.md "Collector API") on cpp-httplib: /metrics, /healthz,
// /v1/ranks, /v1/telemetry, /v1/alerts, /v1/trace, /v1/expect. Runs its own threads; reads the
// aggregator only through Aggregator::Read().
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

#include "collector/aggregate/aggregator.h"

namespace httplib {
class Server;
}

namespace sentinel::collector {

class HttpServer {
 public:
  explicit HttpServer(Aggregator* aggregator);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds HOST:PORT (port 0 = any free port) and starts serving. Returns the bound port.
  absl::StatusOr<int> Start(const std::string& listen);
  void Stop();

 private:
  Aggregator* const aggregator_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

// Splits "HOST:PORT" ("[::1]:9464" allowed).
absl::Status SplitHostPort(const std::string& listen, std::string* host, int* port);

}  // namespace sentinel::collector
