// sentinelctl facing a hostile daemon: every string in the answers (hosts, alert summaries, ids,
// communicator and device names, an error body, the trace) may carry terminal escapes, newlines
// that forge "[sentinel]" lines, or fields of the wrong type. A fake sentineld (an HTTP server in
// this test, loopback) serves such answers; the REAL sentinelctl must print them escaped, with no
// raw control byte and no forged line, and must not die of a wrong type.
#include <httplib.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "tests/integration/collector/daemon_fixture.h"

namespace sentinel::testing {
namespace {

// A hostile string: sets the terminal title (OSC), clears the screen (with ESC [ and with the
// 8-bit CSI, U+009B in UTF-8), then forges a log line.
const char kEvil[] =
    "h\x1b]0;pwned\x07\x1b[2J\xc2\x9b"
    "2J\n[sentinel] forged line\r";

class FakeDaemon {
 public:
  // `first` may register handlers that win over the hostile defaults below (the first match
  // answers).
  explicit FakeDaemon(const std::function<void(httplib::Server&)>& first = nullptr) {
    if (first) first(server_);
    const nlohmann::json evil = kEvil;
    server_.Get("/healthz", [evil](const httplib::Request&, httplib::Response& res) {
      nlohmann::json h = {{"status", evil},  {"host", evil}, {"version", evil},
                          {"uptime_s", 1.0}, {"clients", 1}, {"records", 2}};
      res.set_content(h.dump(), "application/json");
    });
    server_.Get("/v1/alerts", [evil](const httplib::Request&, httplib::Response& res) {
      nlohmann::json a = {{"id", evil},         {"kind", evil},
                          {"severity", evil},   {"state", "firing"},
                          {"summary", evil},    {"runbook", evil},
                          {"started_at", evil}, {"resolved_at", nullptr},
                          {"host", evil},       {"evidence", nlohmann::json::object()}};
      nlohmann::json resolved = a;
      resolved["state"] = "resolved";
      resolved["resolved_at"] = evil;
      resolved["resolve_reason"] = evil;
      res.set_content(nlohmann::json({{"alerts", {a, resolved}}}).dump(), "application/json");
    });
    server_.Get("/v1/ranks", [evil](const httplib::Request&, httplib::Response& res) {
      nlohmann::json r = {{"rank", 0},
                          {"pid", 1},
                          {"host", evil},
                          {"last_seq", 5},
                          {"collectives", 5},
                          {"lateness_p50_ms", 0.1},
                          {"lateness_p99_ms", 0.2},
                          {"duration_p50_ms", 1.0},
                          {"drops", 0},
                          {"connected", true},
                          {"straggler", false}};
      res.set_content(nlohmann::json({{"ranks", {r}}}).dump(), "application/json");
    });
    server_.Get("/v1/telemetry", [evil](const httplib::Request&, httplib::Response& res) {
      nlohmann::json end = {{"host", evil}, {"pid", 7}, {"dev_name", evil}};
      nlohmann::json t = {{"collectives", 1},
                          {"skew_p99_ms", 0.5},
                          {"latency_p50_ms", 0.5},
                          {"collective_hang_suspects", nlohmann::json::array()},
                          {"baseline",
                           {{"run_id", evil},
                            {"host", evil},
                            {"job_id", evil},
                            {"received_at", evil},
                            {"complete", true},
                            {"link_gbps", 10.0},
                            {"sizes", nlohmann::json::array()}}},
                          {"net",
                           {{"devices",
                             {{{"host", evil},
                               {"pid", 7},
                               {"dev", 0},
                               {"name", evil},
                               {"plugin", evil},
                               {"pci_path", evil},
                               {"speed_mbps", 1000}}}},
                            {"links", {{{"link_id", evil}, {"send", end}, {"recv", end}}}}}}};
      res.set_content(t.dump(), "application/json");
    });
    server_.Get("/v1/exclude", [evil](const httplib::Request&, httplib::Response& res) {
      res.set_content(nlohmann::json({{"hosts", {{{"host", evil}}}}}).dump(), "application/json");
    });
    server_.Get("/v1/trace", [evil](const httplib::Request&, httplib::Response& res) {
      // Valid JSON: the string's control bytes travel as \u00NN escapes.
      nlohmann::json t = {{"traceEvents", {{{"name", evil}, {"ph", "X"}}}}};
      res.set_content(t.dump(), "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // Connections queue on the bound socket until listen_after_bind runs; still, wait for it.
    for (int i = 0; i < 200 && !server_.is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~FakeDaemon() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

// The output has no raw control byte but newlines, and no line a hostile string started.
void ExpectClean(const std::string& what, const std::string& out) {
  for (const char c : out) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n') || u == 0x7f) {
      ADD_FAILURE() << what << ": raw control byte 0x" << std::hex << int{u} << " in:\n" << out;
      return;
    }
  }
  // A C1 control (U+0080-U+009F) in UTF-8: a terminal obeys U+009B as it does ESC [.
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    const auto next = static_cast<unsigned char>(out[i + 1]);
    if (static_cast<unsigned char>(out[i]) == 0xc2 && next >= 0x80 && next <= 0x9f) {
      ADD_FAILURE() << what << ": C1 control U+00" << std::hex << int{next} << " in:\n" << out;
      return;
    }
  }
  EXPECT_EQ(out.find("\n[sentinel] forged"), std::string::npos) << what << ":\n" << out;
  EXPECT_NE(out.find("forged"), std::string::npos) << what << " showed no hostile text:\n" << out;
}

TEST(SentinelctlEscape, EveryCommandEscapesTheDaemonsStrings) {
  FakeDaemon fake;
  const std::string ctl =
      std::string(SENTINELCTL_PATH) + " --addr 127.0.0.1:" + std::to_string(fake.port()) + " ";
  for (const char* cmd :
       {"status", "ranks", "alerts --all", "top --once", "baseline", "exclude --format hostfile",
        "exclude", "net", "trace", "ranks --json", "alerts --all --json", "net --json"}) {
    std::string out;
    RunCommand(ctl + cmd, &out);
    ExpectClean(cmd, out);
  }
  std::string out;
  RunCommand(ctl + "alerts", &out);
  EXPECT_NE(out.find("\\x1b]0;pwned\\x07"), std::string::npos) << "not escaped as \\xNN:\n" << out;
}

TEST(SentinelctlEscape, ErrorBodiesAndWrongTypes) {
  FakeDaemon fake([](httplib::Server& server) {
    server.Get("/v1/ranks", [](const httplib::Request&, httplib::Response& res) {
      res.status = 500;
      res.set_content(std::string("oops \x9b"
                                  "2J ") +
                          kEvil,
                      "text/plain");
    });
    server.Get("/v1/alerts", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"alerts":[{"state":"firing","summary":42,"kind":["x"]}]})",
                      "application/json");
    });
    server.Get("/v1/trace", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string("{\"traceEvents\":[{\"name\":\"") + kEvil + "\"}]}",
                      "application/json");
    });
    server.Get("/v1/exclude", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"hosts":[{"host":7}, 3]})", "application/json");
    });
  });
  const std::string ctl =
      std::string(SENTINELCTL_PATH) + " --addr 127.0.0.1:" + std::to_string(fake.port()) + " ";
  std::string out;
  EXPECT_EQ(RunCommand(ctl + "ranks", &out), 1) << out;
  ExpectClean("error body", out);
  EXPECT_EQ(out.find('\x9b'), std::string::npos) << "a raw 8-bit CSI byte: " << out;
  EXPECT_NE(out.find("\\x9b2J"), std::string::npos) << out;
  // A number where a string was expected is shown as a number; a list as nothing. No crash.
  EXPECT_EQ(RunCommand(ctl + "alerts", &out), 3) << out;
  EXPECT_NE(out.find("42"), std::string::npos) << out;
  // Raw control bytes in a "JSON" trace: not JSON, refused, nothing of it printed.
  EXPECT_EQ(RunCommand(ctl + "trace", &out), 1) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_NE(out.find("not JSON"), std::string::npos) << out;
  // A list entry that is not an object: a line saying so and exit 1, not an abort.
  EXPECT_EQ(RunCommand(ctl + "exclude", &out), 1) << out;
  EXPECT_NE(out.find("unexpected shape"), std::string::npos) << out;
}

}  // namespace
}  // namespace sentinel::testing
