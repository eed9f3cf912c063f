// HTTP handlers: see http_server.h.
#include "collector/export/http_server.h"

#include <httplib.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include "collector/export/exporters.h"

namespace sentinel::collector {
namespace {

constexpr const char* kJson = "application/json";

void SendJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  // Strings from plugins are untrusted and may not be UTF-8: replace bad bytes, never fail.
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), kJson);
}

// Reads a duration query parameter; on error fills a 400 response and returns false.
bool DurationParam(const httplib::Request& req, httplib::Response& res, const char* name,
                   int64_t fallback, int64_t* out) {
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
  server_ = std::make_unique<httplib::Server>();
  httplib::Server& svr = *server_;
  Aggregator* agg = aggregator_;
  svr.Get("/metrics", [agg](const httplib::Request&, httplib::Response& res) {
    std::string text;
    agg->Read([&](const State& state) { text = RenderPrometheus(state); });
    res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
  });
  svr.Get("/healthz", [agg](const httplib::Request&, httplib::Response& res) {
    nlohmann::json body;
    const int64_t real = agg->clock()->RealNs();
    const int64_t mono = agg->clock()->MonoNs();
    agg->Read([&](const State& state) { body = HealthzJson(state, real, mono); });
    SendJson(res, 200, body);
  });
  svr.Get("/v1/ranks", [agg](const httplib::Request&, httplib::Response& res) {
    nlohmann::json body;
    const int64_t mono = agg->clock()->MonoNs();
    agg->Read([&](const State& state) { body = RanksJson(state, mono); });
    SendJson(res, 200, body);
  });
  svr.Get("/v1/telemetry", [agg](const httplib::Request& req, httplib::Response& res) {
    int64_t window = 0;
    if (!DurationParam(req, res, "window", agg->config().window_ns, &window)) return;
    nlohmann::json body;
    const int64_t mono = agg->clock()->MonoNs();
    agg->Read([&](const State& state) { body = TelemetryJson(state, window, mono); });
    SendJson(res, 200, body);
  });
  svr.Get("/v1/alerts", [agg](const httplib::Request&, httplib::Response& res) {
    nlohmann::json body;
    agg->Read([&](const State& state) { body = AlertsJson(state); });
    SendJson(res, 200, body);
  });
  svr.Get("/v1/trace", [agg](const httplib::Request& req, httplib::Response& res) {
    int64_t window = 0;
    if (!DurationParam(req, res, "last", 60LL * 1000000000, &window)) return;
    nlohmann::json body;
    const int64_t mono = agg->clock()->MonoNs();
    agg->Read([&](const State& state) { body = TraceJson(state, window, mono); });
    SendJson(res, 200, body);
  });
  svr.Get("/v1/expect", [agg](const httplib::Request&, httplib::Response& res) {
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
  svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    SendJson(res, res.status, ErrorJson(res.status, absl::StrCat("no such endpoint: ", req.path)));
  });
  svr.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        SendJson(res, 500, ErrorJson(500, "internal error"));
      });
  int bound = port;
  if (port == 0) {
    bound = svr.bind_to_any_port(host);
  } else if (!svr.bind_to_port(host, port)) {
    bound = -1;
  }
  if (bound <= 0) return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return bound;
}

void HttpServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace sentinel::collector
