// sentinelctl: command-line client of sentineld's HTTP API (status, ranks, alerts, top, trace).
// Exit codes: 0 ok, 1 collector unreachable (or bad answer), 2 usage, 3 firing alerts (alerts).
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace {

constexpr int kOk = 0;
constexpr int kUnreachable = 1;
constexpr int kUsage = 2;
constexpr int kFiring = 3;

constexpr const char* kUsageText = R"(sentinelctl: talk to the node's sentineld.

Usage: sentinelctl [--addr HOST:PORT | --port-file FILE] COMMAND [options]

Commands:
  status                 collector health and a one-line summary
  ranks [--json]         per-rank table: pid, rank, last seq, lateness p50/p99, drops
  alerts [--json] [--all]  firing alerts (--all: resolved too); exit 3 when any is firing
  top [--once] [--interval S]  live per-rank table refreshing in the terminal
  trace [--last DUR]     Chrome/Perfetto JSON of the collectives per rank (default 60s) to stdout
  help                   this text

The address defaults to $SENTINEL_ADDR, else 127.0.0.1:9464. Each command accepts --help.
Exit codes: 0 ok, 1 collector unreachable, 2 usage, 3 firing alerts (alerts only).
)";

struct Options {
  std::string addr;
  std::string command;
  bool json = false;
  bool all = false;
  bool once = false;
  double interval_s = 1.0;
  std::string last = "60s";
};

// HOST:PORT ("[::1]:9464" allowed) with a port in 1..65535: anything else is a usage error,
// not an unreachable collector.
bool ValidAddr(const std::string& addr) {
  const size_t colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  int port = 0;
  return absl::SimpleAtoi(addr.substr(colon + 1), &port) && port >= 1 && port <= 65535;
}

int Usage(const char* message) {
  if (message != nullptr) std::fprintf(stderr, "sentinelctl: %s\n", message);
  std::fputs(kUsageText, stderr);
  return kUsage;
}

// GET path -> parsed JSON (or raw text when raw != nullptr). false when unreachable.
bool Get(const Options& o, const std::string& path, nlohmann::json* out,
         std::string* raw = nullptr) {
  httplib::Client client(absl::StrCat("http://", o.addr));
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(30, 0);
  auto res = client.Get(path.c_str());
  if (!res) {
    std::fprintf(stderr, "sentinelctl: sentineld unreachable at %s (%s)\n", o.addr.c_str(),
                 httplib::to_string(res.error()).c_str());
    return false;
  }
  if (res->status != 200) {
    std::fprintf(stderr, "sentinelctl: %s answered %d: %s\n", path.c_str(), res->status,
                 res->body.c_str());
    return false;
  }
  if (raw != nullptr) {
    *raw = res->body;
    return true;
  }
  *out = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    std::fprintf(stderr, "sentinelctl: %s: answer is not JSON\n", path.c_str());
    return false;
  }
  return true;
}

std::string Num(const nlohmann::json& v) {
  if (v.is_number()) return absl::StrFormat("%.2f", v.get<double>());
  return "-";
}

std::string RanksTable(const nlohmann::json& ranks) {
  std::string out = absl::StrFormat("%-6s %-8s %-16s %-10s %-12s %-10s %-10s %-10s %-8s %-6s\n",
                                    "RANK", "PID", "HOST", "LAST_SEQ", "COLLECTIVES", "LATE_P50",
                                    "LATE_P99", "DUR_P50", "DROPS", "STATE");
  for (const auto& r : ranks["ranks"]) {
    const std::string state = !r.value("connected", false)  ? "gone"
                              : r.value("straggler", false) ? "LATE"
                                                            : "ok";
    out += absl::StrFormat(
        "%-6s %-8d %-16s %-10s %-12d %-10s %-10s %-10s %-8d %-6s\n",
        r["rank"].is_number() ? std::to_string(r["rank"].get<int>()) : "-", r.value("pid", 0),
        r.value("host", ""),
        r["last_seq"].is_number() ? std::to_string(r["last_seq"].get<uint64_t>()) : "-",
        r.value("collectives", 0), Num(r["lateness_p50_ms"]) + "ms",
        Num(r["lateness_p99_ms"]) + "ms", Num(r["duration_p50_ms"]) + "ms", r.value("drops", 0),
        state);
  }
  return out;
}

int Status(const Options& o) {
  nlohmann::json h;
  nlohmann::json a;
  if (!Get(o, "/healthz", &h) || !Get(o, "/v1/alerts", &a)) return kUnreachable;
  int firing = 0;
  for (const auto& alert : a["alerts"]) firing += alert["state"] == "firing" ? 1 : 0;
  std::printf("sentineld %s on %s: %s, up %.0f s, %d client(s), %llu records, %d firing alert(s)\n",
              h.value("version", "?").c_str(), h.value("host", "?").c_str(),
              h.value("status", "?").c_str(), h.value("uptime_s", 0.0), h.value("clients", 0),
              static_cast<unsigned long long>(h.value("records", 0ULL)), firing);
  return kOk;
}

int Ranks(const Options& o) {
  nlohmann::json r;
  if (!Get(o, "/v1/ranks", &r)) return kUnreachable;
  if (o.json) {
    std::cout << r.dump(2) << "\n";
  } else {
    std::cout << RanksTable(r);
  }
  return kOk;
}

int Alerts(const Options& o) {
  nlohmann::json a;
  if (!Get(o, "/v1/alerts", &a)) return kUnreachable;
  int firing = 0;
  nlohmann::json shown = nlohmann::json::array();
  for (const auto& alert : a["alerts"]) {
    const bool is_firing = alert["state"] == "firing";
    firing += is_firing ? 1 : 0;
    if (is_firing || o.all) shown.push_back(alert);
  }
  if (o.json) {
    std::cout << nlohmann::json({{"alerts", shown}}).dump(2) << "\n";
  } else if (shown.empty()) {
    std::cout << "no firing alerts\n";
  } else {
    for (const auto& alert : shown) {
      std::cout << absl::StrFormat("%-8s %-9s %-10s %s\n    %s\n    runbook: %s\n",
                                   alert.value("state", ""), alert.value("kind", ""),
                                   alert.value("severity", ""), alert.value("id", ""),
                                   alert.value("summary", ""), alert.value("runbook", ""));
    }
  }
  return firing > 0 ? kFiring : kOk;
}

int Top(const Options& o) {
  const bool tty = isatty(STDOUT_FILENO) != 0 && !o.once;
  for (;;) {
    nlohmann::json r;
    nlohmann::json t;
    if (!Get(o, "/v1/ranks", &r) || !Get(o, "/v1/telemetry?window=1m", &t)) return kUnreachable;
    std::string screen = tty ? "\x1b[H\x1b[2J" : "";
    screen += absl::StrFormat(
        "sentineld %s  collectives(1m) %d  skew p99 %sms  latency p50 %sms  hang suspects %d\n\n",
        o.addr, t.value("collectives", 0), Num(t["skew_p99_ms"]), Num(t["latency_p50_ms"]),
        static_cast<int>(t["collective_hang_suspects"].size()));
    screen += RanksTable(r);
    std::fputs(screen.c_str(), stdout);
    std::fflush(stdout);
    if (o.once) return kOk;
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(o.interval_s * 1000)));
  }
}

int Trace(const Options& o) {
  std::string body;
  nlohmann::json unused;
  if (!Get(o, absl::StrCat("/v1/trace?last=", o.last), &unused, &body)) return kUnreachable;
  std::fwrite(body.data(), 1, body.size(), stdout);
  std::fputc('\n', stdout);
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string port_file;
  const char* env = std::getenv("SENTINEL_ADDR");  // NOLINT(concurrency-mt-unsafe): main thread
  o.addr = env != nullptr && env[0] != '\0' ? env : "127.0.0.1:9464";
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    if (a == "--help" || a == "-h" || a == "help") {
      std::fputs(kUsageText, stdout);
      return kOk;
    }
    if (a == "--addr") {
      if (!value(&o.addr)) return Usage("--addr needs HOST:PORT");
    } else if (a == "--port-file") {
      if (!value(&port_file)) return Usage("--port-file needs a file");
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--all") {
      o.all = true;
    } else if (a == "--once") {
      o.once = true;
    } else if (a == "--interval") {
      std::string v;
      if (!value(&v) || !absl::SimpleAtod(v, &o.interval_s) || o.interval_s <= 0)
        return Usage("bad --interval");
    } else if (a == "--last") {
      if (!value(&o.last)) return Usage("--last needs a duration");
    } else if (!a.empty() && a[0] == '-') {
      return Usage(absl::StrCat("unknown option ", a).c_str());
    } else if (o.command.empty()) {
      o.command = a;
    } else {
      return Usage(absl::StrCat("unexpected argument ", a).c_str());
    }
  }
  if (!port_file.empty()) {
    std::ifstream in(port_file);
    int port = 0;
    if (!(in >> port) || port <= 0) {
      std::fprintf(stderr, "sentinelctl: cannot read a port from %s\n", port_file.c_str());
      return kUnreachable;
    }
    o.addr = absl::StrCat("127.0.0.1:", port);
  }
  if (!ValidAddr(o.addr)) {
    return Usage(
        absl::StrCat("--addr/SENTINEL_ADDR: expected HOST:PORT, got '", o.addr, "'").c_str());
  }
  if (o.command == "status") return Status(o);
  if (o.command == "ranks") return Ranks(o);
  if (o.command == "alerts") return Alerts(o);
  if (o.command == "top") return Top(o);
  if (o.command == "trace") return Trace(o);
  return Usage(o.command.empty() ? "missing command"
                                 : absl::StrCat("unknown command ", o.command).c_str());
}
