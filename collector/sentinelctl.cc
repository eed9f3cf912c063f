// sentinelctl: command-line client of sentineld's HTTP API (status, ranks, alerts, top, trace,
// baseline, exclude, net, slow, why, breakdown, record) and the flight records' merge
// (hang-report). Exit codes: 0 ok, 1 collector unreachable (or bad answer), 2 usage, 3 firing
// alerts (alerts).
#include <httplib.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "collector/base/clock.h"
#include "collector/ctl_breakdown.h"
#include "collector/ctl_net.h"
#include "collector/ctl_slow.h"
#include "collector/ctl_text.h"
#include "collector/ctl_why.h"
#include "collector/hang_report.h"
#include "common/baseline_report.h"
#include "common/sentinel_env.h"

namespace {

using sentinel::ctl::Escaped;
using sentinel::ctl::Field;
using sentinel::ctl::JsonText;
using sentinel::ctl::Shown;

constexpr int kOk = 0;
constexpr int kUnreachable = 1;
constexpr int kUsage = 2;
constexpr int kFiring = 3;
constexpr int kNoBaseline = 4;
constexpr int kFileRefused = 5;  // hang-report: some input file was refused

constexpr const char* kUsageText = R"(sentinelctl: talk to the node's sentineld.

Usage: sentinelctl [--addr HOST:PORT | --port-file FILE] COMMAND [options]

Commands:
  status                 collector health and a one-line summary
  ranks [--json]         per-rank table: pid, rank, last seq, lateness p50/p99, drops
  alerts [--json] [--all | --since DUR]
                         firing alerts (--all: the resolved ones sentineld still keeps too;
                         --since 10m: and those resolved in the last 10 minutes); exit 3 when
                         any is firing
  top [--once] [--interval S]  live per-rank table refreshing in the terminal
  trace [--last DUR]     Chrome/Perfetto JSON of the collectives per rank (default 60s) to stdout
  baseline [--json]      the latest sentinel-baseline run beside the job's bus bandwidth, with the
                         verdict; exit 4 when no baseline arrived yet
  exclude [--format slurm|hostfile|json]
                         hosts a restart should avoid (firing and recently resolved straggler,
                         NIC-error and degraded-link alerts; policy: sentineld --exclude-kinds,
                         --exclude-hold). slurm (default): one comma-separated line for
                         `sbatch --exclude=`, empty when none; hostfile: one host per line;
                         json: GET /v1/exclude as is
  net [--json]           the wrapping net plugin's view: devices offered to NCCL, and per
                         connection both ends, bytes, requests, latency, rate, DEGRADED marks
  slow [--json] [--last DUR]
                         slow collectives per communicator (default: sentineld's --window; --last
                         10m: that window): each span's excess over the communicator's usual
                         duration and its cause: late rank N, network (naming the NIC port and
                         counter, e.g. mlx5_0 port 1: port_xmit_wait +X) or transfer; then the
                         seconds by cause
  why [RANK] [--json]    why each late rank is late (or only RANK): the cause sentineld named
                         from the node's evidence (GPU slower, host CPU contention, CPU quota,
                         GPU waiting for the host, memory pressure, network) with the figure that
                         explains the lateness against its usual, what backs it and what to do;
                         "unknown" with the reason when no evidence clears its bar
  breakdown [--json]     where each rank's time went over the last minute: compute,
                         communication (not hidden under compute), wait (for late ranks) and
                         host (GPU idle), in ms per step and % per communicator and rank; then
                         per job the share lost to waiting and the verdict: one bad rank (or a
                         few) named, the distribution widened (no culprit), or not enough data
  hang-report FILE... [--json]
                         merges the flight records sentineld wrote on a hang (one file per node,
                         each node's clock kept apart; operations matched by communicator and
                         position, never by time) and prints the verdict: the first position
                         where ranks issued different operations, a wait cycle across
                         communicators, or the ranks that never reached the stuck collective and
                         what they did last; needs no sentineld. Exit 5 when a file was refused
  record [--comm HEX] [--json]
                         sentineld writes a flight record now (POST /v1/record) of communicator
                         HEX, else of every communicator of yours on this node: each local rank's
                         last operations with their states and times, in a file beside its record
                         log; prints the file's path (--json: the whole answer). Only your own
                         jobs (root: any); for `sentinelctl hang-report`
  help                   this text

The address defaults to $SENTINEL_ADDR, else 127.0.0.1:9464. Each command accepts --help.
Exit codes: 0 ok, 1 collector unreachable, 2 usage, 3 firing alerts (alerts only), 4 no baseline
yet (baseline only), 5 some file refused (hang-report only).
)";

struct Options {
  std::string addr;
  std::string command;
  bool json = false;
  bool all = false;
  bool once = false;
  double interval_s = 1.0;
  std::string last = "60s";
  bool last_set = false;  // --last given (slow: the telemetry window)
  int64_t since_s = -1;   // alerts --since: resolved within this many seconds, -1 = not given
  std::string format = "slurm";    // exclude --format
  int rank = -1;                   // why RANK
  std::vector<std::string> files;  // hang-report FILE...
  std::string comm;                // record --comm HEX
};

// "90s", "10m", "2h", "1d", or plain seconds; -1 when malformed.
int64_t ParseSeconds(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])) != 0) {
    ++digits;
  }
  int64_t n = 0;
  if (digits == 0 || digits > 9 || !absl::SimpleAtoi(text.substr(0, digits), &n)) return -1;
  const std::string unit = text.substr(digits);
  if (unit.empty() || unit == "s") return n;
  if (unit == "m") return n * 60;
  if (unit == "h") return n * 3600;
  if (unit == "d") return n * 86400;
  return -1;
}

// Seconds since the epoch of an RFC 3339 UTC time as sentineld writes it; -1 when malformed.
int64_t ParseUtc(const std::string& text) {
  std::tm tm{};
  if (strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return -1;
  return static_cast<int64_t>(timegm(&tm));
}

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

// GET path (POST with `post`) -> parsed JSON (or raw text when raw != nullptr). false when
// unreachable or answered with an error.
bool Get(const Options& o, const std::string& path, nlohmann::json* out, std::string* raw = nullptr,
         bool post = false) {
  httplib::Client client(absl::StrCat("http://", o.addr));
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(30, 0);
  auto res = post ? client.Post(path.c_str()) : client.Get(path.c_str());
  if (!res) {
    std::fprintf(stderr, "sentinelctl: sentineld unreachable at %s (%s)\n", o.addr.c_str(),
                 httplib::to_string(res.error()).c_str());
    return false;
  }
  if (res->status != 200) {
    // The body is the daemon's (or whoever answers): escaped, and at most 1 KiB of it.
    constexpr size_t kShownBody = 1024;
    std::fprintf(stderr, "sentinelctl: %s answered %d: %s%s\n", path.c_str(), res->status,
                 Escaped(std::string_view(res->body).substr(0, kShownBody)).c_str(),
                 res->body.size() > kShownBody ? "..." : "");
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

// CUPTI GPU activity columns (the /v1/ranks "gpu" object): "-" = no data, "n/m" = not measured
// (another tool owned CUPTI).
std::string GpuHeader() {
  return absl::StrFormat(" %-8s %-8s %-8s %-8s", "COMPUTE%", "COMM%", "OVERLAP%", "EXPOSED%");
}
std::string GpuCells(const nlohmann::json& rank) {
  const nlohmann::json gpu = rank.value("gpu", nlohmann::json::object());
  auto pct = [&](const char* key) -> std::string {
    if (gpu.value("windows", 0) > 0 && !gpu.value("measured", false)) return "n/m";
    const auto it = gpu.find(key);
    if (it == gpu.end() || !it->is_number()) return "-";
    return absl::StrFormat("%.1f", 100 * it->get<double>());
  };
  return absl::StrFormat(" %-8s %-8s %-8s %-8s", pct("compute_ratio"), pct("comm_ratio"),
                         pct("overlap_ratio"), pct("exposed_comm_ratio"));
}

std::string RanksTable(const nlohmann::json& ranks) {
  std::string out = absl::StrFormat("%-6s %-8s %-16s %-10s %-12s %-10s %-10s %-10s %-8s %-6s\n",
                                    "RANK", "PID", "HOST", "LAST_SEQ", "COLLECTIVES", "LATE_P50",
                                    "LATE_P99", "DUR_P50", "DROPS", "STATE");
  out.insert(out.size() - 1, GpuHeader());
  for (const auto& r : Field(ranks, "ranks")) {
    const std::string state = !r.value("connected", false)  ? "gone"
                              : r.value("straggler", false) ? "LATE"
                                                            : "ok";
    out += absl::StrFormat(
        "%-6s %-8d %-16s %-10s %-12d %-10s %-10s %-10s %-8d %-6s\n",
        Field(r, "rank").is_number() ? std::to_string(Field(r, "rank").get<int>()) : "-",
        r.value("pid", 0), Shown(r, "host"),
        Field(r, "last_seq").is_number() ? std::to_string(Field(r, "last_seq").get<uint64_t>())
                                         : "-",
        r.value("collectives", 0), Num(Field(r, "lateness_p50_ms")) + "ms",
        Num(Field(r, "lateness_p99_ms")) + "ms", Num(Field(r, "duration_p50_ms")) + "ms",
        r.value("drops", 0), state);
    out.insert(out.size() - 1, GpuCells(r));
  }
  return out;
}

int Status(const Options& o) {
  nlohmann::json h;
  nlohmann::json a;
  if (!Get(o, "/healthz", &h) || !Get(o, "/v1/alerts", &a)) return kUnreachable;
  int firing = 0;
  for (const auto& alert : Field(a, "alerts")) firing += Field(alert, "state") == "firing" ? 1 : 0;
  std::printf("sentineld %s on %s: %s, up %.0f s, %d client(s), %llu records, %d firing alert(s)\n",
              Shown(h, "version", "?").c_str(), Shown(h, "host", "?").c_str(),
              Shown(h, "status", "?").c_str(), h.value("uptime_s", 0.0), h.value("clients", 0),
              static_cast<unsigned long long>(h.value("records", 0ULL)), firing);
  return kOk;
}

int Ranks(const Options& o) {
  nlohmann::json r;
  if (!Get(o, "/v1/ranks", &r)) return kUnreachable;
  if (o.json) {
    std::cout << JsonText(r, 2) << "\n";
  } else {
    std::cout << RanksTable(r);
  }
  return kOk;
}

int Net(const Options& o) {
  nlohmann::json t;
  nlohmann::json a;
  if (!Get(o, "/v1/telemetry", &t) || !Get(o, "/v1/alerts", &a)) return kUnreachable;
  if (o.json) {
    std::cout << JsonText(sentinel::ctl::NetJson(t, a), 2) << "\n";
  } else {
    std::cout << sentinel::ctl::NetTables(t, a);
  }
  return kOk;
}

int Slow(const Options& o) {
  nlohmann::json t;
  std::string path = "/v1/telemetry";
  if (o.last_set) {
    if (ParseSeconds(o.last) < 0) return Usage("--last needs a duration (e.g. 90s, 10m, 2h)");
    path += "?window=" + o.last;
  }
  if (!Get(o, path, &t)) return kUnreachable;
  if (o.json) {
    std::cout << JsonText(Field(t, "slow_windows"), 2) << "\n";
  } else {
    std::cout << sentinel::ctl::SlowTable(t);
  }
  return kOk;
}

int Why(const Options& o) {
  nlohmann::json a;
  if (!Get(o, "/v1/alerts", &a)) return kUnreachable;
  if (o.json) {
    // The cause objects of the firing straggler alerts, as sentineld wrote them.
    nlohmann::json out = nlohmann::json::array();
    for (const auto& alert : Field(a, "alerts")) {
      if (Shown(alert, "state") != "firing" || Shown(alert, "kind") != "straggler") continue;
      const nlohmann::json& ranks = Field(alert, "ranks");
      if (o.rank >= 0 && !(ranks.is_array() && ranks.size() == 1 && ranks[0] == o.rank)) continue;
      out.push_back({{"id", Field(alert, "id")},
                     {"ranks", ranks},
                     {"cause", Field(Field(alert, "evidence"), "cause")},
                     {"flagged", Field(Field(alert, "evidence"), "flagged")}});
    }
    std::cout << JsonText(out, 2) << "\n";
  } else {
    std::cout << sentinel::ctl::WhyText(a, o.rank);
  }
  return kOk;
}

int Breakdown(const Options& o) {
  nlohmann::json r;
  if (!Get(o, "/v1/ranks", &r)) return kUnreachable;
  if (o.json) {
    std::cout << JsonText(sentinel::ctl::BreakdownJson(r), 2) << "\n";
  } else {
    std::cout << sentinel::ctl::BreakdownTable(r);
  }
  return kOk;
}

int Alerts(const Options& o) {
  nlohmann::json a;
  if (!Get(o, "/v1/alerts", &a)) return kUnreachable;
  int firing = 0;
  nlohmann::json shown = nlohmann::json::array();
  for (const auto& alert : Field(a, "alerts")) {
    const bool is_firing = Field(alert, "state") == "firing";
    firing += is_firing ? 1 : 0;
    bool recent = false;
    if (!is_firing && o.since_s >= 0 && Field(alert, "resolved_at").is_string()) {
      const int64_t at = ParseUtc(Field(alert, "resolved_at").get<std::string>());
      recent = at >= 0 && sentinel::collector::RealClock()->RealNs() / 1000000000 - at <= o.since_s;
    }
    if (is_firing || o.all || recent) shown.push_back(alert);
  }
  if (o.json) {
    std::cout << JsonText(nlohmann::json({{"alerts", shown}}), 2) << "\n";
  } else if (shown.empty()) {
    std::cout << (o.all || o.since_s >= 0 ? "no alerts\n" : "no firing alerts\n");
  } else {
    for (const auto& alert : shown) {
      std::string when = Shown(alert, "started_at");
      if (Field(alert, "resolved_at").is_string()) {
        when += " -> " + Shown(alert, "resolved_at") + " (" +
                Shown(alert, "resolve_reason", "resolved") + ")";
      }
      std::cout << absl::StrFormat("%-8s %-9s %-10s %s\n    %s\n    %s\n    runbook: %s\n",
                                   Shown(alert, "state"), Shown(alert, "kind"),
                                   Shown(alert, "severity"), Shown(alert, "id"),
                                   Shown(alert, "summary"), when, Shown(alert, "runbook"));
    }
  }
  return firing > 0 ? kFiring : kOk;
}

// Set by SIGINT/SIGTERM/SIGHUP while `top` runs: the loop ends and restores the terminal.
volatile sig_atomic_t g_top_stop = 0;
extern "C" void OnTopSignal(int) { g_top_stop = 1; }

int TopLoop(const Options& o, bool tty) {
  while (g_top_stop == 0) {
    nlohmann::json r;
    nlohmann::json t;
    if (!Get(o, "/v1/ranks", &r) || !Get(o, "/v1/telemetry?window=1m", &t)) return kUnreachable;
    std::string screen = tty ? "\x1b[H\x1b[2J" : "";
    screen += absl::StrFormat(
        "sentineld %s  collectives(1m) %d  skew p99 %sms  latency p50 %sms  hang suspects %d\n\n",
        o.addr, t.value("collectives", 0), Num(Field(t, "skew_p99_ms")),
        Num(Field(t, "latency_p50_ms")),
        static_cast<int>(Field(t, "collective_hang_suspects").size()));
    screen += RanksTable(r);
    if (tty) screen += "\n(Ctrl-C to quit)";
    std::fputs(screen.c_str(), stdout);
    std::fflush(stdout);
    if (o.once) return kOk;
    // Sleep in slices so that Ctrl-C restores the terminal at once.
    for (int ms = 0; ms < static_cast<int>(o.interval_s * 1000) && g_top_stop == 0; ms += 50) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return kOk;
}

int Top(const Options& o) {
  const bool tty = isatty(STDOUT_FILENO) != 0 && !o.once;
  if (!tty) return TopLoop(o, false);
  // Like top(1): the alternate screen without a cursor while running; on exit (Ctrl-C, SIGTERM,
  // a lost collector) the shell's screen and cursor come back as they were.
  struct sigaction sa {};
  sa.sa_handler = OnTopSignal;
  sigemptyset(&sa.sa_mask);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  std::fputs("\x1b[?1049h\x1b[?25l", stdout);
  const int rc = TopLoop(o, true);
  std::fputs("\x1b[?25h\x1b[?1049l", stdout);
  std::fflush(stdout);
  // The reason was printed on the alternate screen, which is gone now: say it again.
  if (rc == kUnreachable)
    std::fprintf(stderr, "sentinelctl top: lost sentineld at %s\n", o.addr.c_str());
  return rc;
}

int Trace(const Options& o) {
  // Parsed and written again (compact, every control and non-ASCII character in a string as
  // \uXXXX): the body is the daemon's, and this goes to a terminal as often as to a file.
  nlohmann::json trace;
  if (!Get(o, absl::StrCat("/v1/trace?last=", o.last), &trace)) return kUnreachable;
  const std::string body = JsonText(trace, -1);
  std::fwrite(body.data(), 1, body.size(), stdout);
  std::fputc('\n', stdout);
  return kOk;
}

// The baseline comparison, rendered by sentinel-baseline's own table and verdict code.
int Baseline(const Options& o) {
  nlohmann::json t;
  if (!Get(o, "/v1/telemetry", &t)) return kUnreachable;
  const nlohmann::json& b = Field(t, "baseline");
  if (o.json) std::cout << JsonText(b, 2) << "\n";
  if (!b.is_object()) {
    if (!o.json) std::cout << "no baseline yet: run sentinel-baseline on the job's allocation\n";
    return kNoBaseline;
  }
  if (o.json) return kOk;
  namespace bl = sentinel::baseline;
  std::vector<bl::SizeResult> results;
  int nranks = 0;
  for (const auto& s : Field(b, "sizes")) {
    bl::SizeResult r;
    if (!bl::ParseColl(s.value("func", ""), &r.coll)) continue;
    r.bytes = s.value("bytes", uint64_t{0});
    r.time_ns = s.value("time_us", 0.0) * 1e3;
    r.algbw_gbs = s.value("algbw_gbytes_per_s", 0.0);
    r.busbw_gbs = s.value("busbw_gbytes_per_s", 0.0);
    const auto& job = Field(s, "job_busbw_gbytes_per_s");
    r.job_busbw_gbs = job.is_number() ? job.get<double>() : -1;
    nranks = s.value("nranks", 0);
    results.push_back(r);
  }
  const double link = Field(b, "link_gbps").is_number() ? Field(b, "link_gbps").get<double>() : 0;
  std::cout << absl::StrFormat(
      "baseline %s from %s (job %s), received %s%s\n", Shown(b, "run_id"), Shown(b, "host"),
      Shown(b, "job_id").empty() ? "-" : Shown(b, "job_id"), Shown(b, "received_at"),
      b.value("complete", false) ? "" : " (incomplete)");
  std::cout << bl::FormatTable(results, nranks, link);
  std::cout << "verdict: " << bl::Judge(results, nranks, link, bl::VerdictThresholds()).line
            << "\n";
  return kOk;
}

// A flight record now: sentineld writes it and answers where.
int Record(const Options& o) {
  std::string path = "/v1/record";
  if (!o.comm.empty()) path += "?comm=" + o.comm;
  nlohmann::json r;
  if (!Get(o, path, &r, nullptr, /*post=*/true)) return kUnreachable;
  if (o.json) {
    std::cout << JsonText(r, 2) << "\n";
  } else {
    std::cout << Shown(r, "path") << "\n";  // escaped: the daemon's text reaches a terminal
  }
  return kOk;
}

// Hosts to exclude, in the format a scheduler or launcher reads.
int Exclude(const Options& o) {
  nlohmann::json e;
  if (!Get(o, "/v1/exclude", &e)) return kUnreachable;
  if (o.format == "json") {
    std::cout << JsonText(e, 2) << "\n";
    return kOk;
  }
  std::vector<std::string> hosts;
  for (const auto& h : Field(e, "hosts")) {
    // A script reads this: an entry it cannot read must not silently drop a host from the list.
    if (!h.is_object()) {
      std::fprintf(stderr,
                   "sentinelctl: exclude: sentineld's answer has an unexpected shape (a hosts "
                   "entry that is not an object)\n");
      return kUnreachable;
    }
    // A newline or escape in a host would forge lines, so escaped too.
    if (Field(h, "host").is_string()) hosts.push_back(Shown(h, "host"));
  }
  if (o.format == "slurm") {
    std::cout << absl::StrJoin(hosts, ",") << "\n";
  } else {
    for (const auto& h : hosts) std::cout << h << "\n";
  }
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {  // NOLINT(bugprone-exception-escape)
  Options o;
  std::string port_file;
  // SENTINEL_ADDR from the process's one reading of SENTINEL_* (common/sentinel_env.h).
  const char* env = sentinel::rules::ProcessSentinelEnv().Text(sentinel::rules::Var::kAddr);
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
    } else if (a == "--since") {
      std::string v;
      if (!value(&v) || (o.since_s = ParseSeconds(v)) < 0) {
        return Usage("--since needs a duration (e.g. 90s, 10m, 2h)");
      }
    } else if (a == "--once") {
      o.once = true;
    } else if (a == "--interval") {
      std::string v;
      if (!value(&v) || !absl::SimpleAtod(v, &o.interval_s) || o.interval_s <= 0)
        return Usage("bad --interval");
    } else if (a == "--format") {
      if (!value(&o.format) ||
          (o.format != "slurm" && o.format != "hostfile" && o.format != "json")) {
        return Usage("--format needs slurm, hostfile or json");
      }
    } else if (a == "--comm") {
      // Hex digits only: it goes into the request's query as is.
      if (!value(&o.comm) || o.comm.empty() ||
          o.comm.find_first_not_of("0123456789abcdefABCDEFxX") != std::string::npos) {
        return Usage("--comm needs a communicator hash in hex (e.g. 0x1a2b3c)");
      }
    } else if (a == "--last") {
      if (!value(&o.last)) return Usage("--last needs a duration");
      o.last_set = true;
    } else if (!a.empty() && a[0] == '-') {
      return Usage(absl::StrCat("unknown option ", a).c_str());
    } else if (o.command.empty()) {
      o.command = a;
    } else if (o.command == "hang-report") {
      o.files.push_back(a);
    } else if (o.command == "why" && o.rank < 0) {
      int64_t r = -1;
      if (!absl::SimpleAtoi(a, &r) || r < 0 || r > std::numeric_limits<int32_t>::max()) {
        return Usage(absl::StrCat("why: RANK must be a rank number, got '", a, "'").c_str());
      }
      o.rank = static_cast<int>(r);
    } else {
      return Usage(absl::StrCat("unexpected argument ", a).c_str());
    }
  }
  if (o.command == "hang-report") {  // files only: no sentineld
    if (o.files.empty()) return Usage("hang-report: give the flight record files (FILE...)");
    const sentinel::collector::HangReportResult r =
        sentinel::collector::HangReportFromPaths(o.files);
    std::fputs(o.json ? (JsonText(r.json, 2) + "\n").c_str() : r.text.c_str(), stdout);
    return r.ok ? kOk : kFileRefused;
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
  // An answer of an unexpected shape (a field of another type) ends the command with a line,
  // not an uncaught exception.
  try {
    if (o.command == "status") return Status(o);
    if (o.command == "ranks") return Ranks(o);
    if (o.command == "alerts") return Alerts(o);
    if (o.command == "top") return Top(o);
    if (o.command == "trace") return Trace(o);
    if (o.command == "baseline") return Baseline(o);
    if (o.command == "exclude") return Exclude(o);
    if (o.command == "net") return Net(o);
    if (o.command == "slow") return Slow(o);
    if (o.command == "why") return Why(o);
    if (o.command == "breakdown") return Breakdown(o);
    if (o.command == "record") return Record(o);
  } catch (const nlohmann::json::exception& e) {
    std::fprintf(stderr, "sentinelctl: %s: sentineld's answer has an unexpected shape (%s)\n",
                 o.command.c_str(), Escaped(e.what()).c_str());
    return kUnreachable;
  }
  return Usage(o.command.empty() ? "missing command"
                                 : absl::StrCat("unknown command ", o.command).c_str());
}
