// Configuration parsing for sentineld: defaults live in config.h, documentation in README.md.
#include "collector/config/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

#include "collector/base/alert_kind.h"
#include "collector/base/owned_paths.h"
#include "collector/base/user_groups.h"
#include "collector/config/metrics_detail.h"
#include "collector/log/daemon_log.h"
#include "collector/log/flight_record.h"
#include "common/choice_words.h"
#include "common/errno_text.h"
#include "common/expectation.h"
#include "common/fs_trust.h"
#include "common/sentinel_env.h"
#include "common/socket_path.h"

namespace sentinel::collector {
namespace {

absl::Status ParseInt(absl::string_view key, absl::string_view value, int64_t lo, int64_t hi,
                      int64_t* out) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v) || v < lo || v > hi) {
    return absl::InvalidArgumentError(absl::StrCat("--", key, ": expected an integer in [", lo,
                                                   ", ", hi, "], got '", value, "'"));
  }
  *out = v;
  return absl::OkStatus();
}

absl::Status ParseIntField(absl::string_view key, absl::string_view value, int lo, int hi,
                           int* out) {
  int64_t v = 0;
  absl::Status s = ParseInt(key, value, lo, hi, &v);
  if (s.ok()) *out = static_cast<int>(v);
  return s;
}

absl::Status ParseOnOff(absl::string_view key, absl::string_view value, bool* out) {
  if (value != "on" && value != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--", key, ": expected on|off, got '", value, "'"));
  }
  *out = value == "on";
  return absl::OkStatus();
}

absl::Status ParseDouble(absl::string_view key, absl::string_view value, double* out) {
  double v = 0;
  if (!absl::SimpleAtod(value, &v) || !std::isfinite(v) || !(v >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", key, ": expected a finite number >= 0, got '", value, "'"));
  }
  *out = v;
  return absl::OkStatus();
}

absl::Status ParseDurationField(absl::string_view key, absl::string_view value, int64_t* out) {
  absl::StatusOr<int64_t> d = ParseDurationNs(value);
  if (!d.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", key, ": ", d.status().message()));
  }
  *out = *d;
  return absl::OkStatus();
}

// The same grammar and parser as the plugin's guard, so a bad node default fails at startup.
absl::Status SetExpect(absl::string_view value, std::string* out) {
  rules::Expectation parsed;
  const rules::Status error =
      rules::ParseExpectation(std::string_view(value.data(), value.size()), &parsed);
  if (!error.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid expectation: ", rules::FormatParseError("--expect", error)));
  }
  if (parsed.Empty()) return absl::InvalidArgumentError("--expect: the expectation has no term");
  *out = std::string(value);
  return absl::OkStatus();
}

}  // namespace

std::string NodeExpectPath(const std::string& socket_path) {
  char path[rules::kSocketPathMax + 16];
  if (!rules::NodeExpectPath(socket_path.c_str(), path, sizeof(path))) return "";
  return path;
}

std::string NodeExpectFileContent(const Config& config) {
  std::string content =
      "# nccl-sentinel node default expectation, published by sentineld --expect (removed when it "
      "stops)\n";
  if (!config.expect_on_mismatch.empty()) {
    absl::StrAppend(&content, "# on_mismatch=", config.expect_on_mismatch, "\n");
  }
  absl::StrAppend(&content, config.expect, "\n");
  return content;
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& content, mode_t mode) {
  // A fixed temporary name (<path>.tmp.<pid>) opened with O_TRUNC followed symlinks planted in
  // advance: an unpredictable O_EXCL|O_NOFOLLOW name, in a directory checked first.
  return WriteFileSafely(path, content, mode, rules::TrustedUidsFromEnv());
}

absl::StatusOr<int64_t> ParseDurationNs(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) != 0 || text[digits] == '.')) {
    ++digits;
  }
  double number = 0;
  if (digits == 0 || !absl::SimpleAtod(text.substr(0, digits), &number)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad duration '", text, "' (use e.g. 60s, 15m, 2h)"));
  }
  absl::string_view unit = text.substr(digits);
  double scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1e9;
  } else if (unit == "ms") {
    scale = 1e6;
  } else if (unit == "us") {
    scale = 1e3;
  } else if (unit == "m") {
    scale = 60e9;
  } else if (unit == "h") {
    scale = 3600e9;
  } else if (unit == "d") {
    scale = 86400e9;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("bad duration unit in '", text, "' (us, ms, s, m, h, d)"));
  }
  const double ns = number * scale;
  if (ns > 365.0 * 86400e9) return absl::InvalidArgumentError("duration longer than a year");
  return static_cast<int64_t>(ns);
}

std::string DefaultSocketPath(const char* sentinel_socket, const char* xdg_runtime_dir) {
  // The plugins' rule (common/socket_path.h), so both sides agree. SENTINEL_SOCKET=none turns the
  // plugins' streaming off; for the daemon it means the per-user default. A path that does not fit
  // a sockaddr_un is returned as the user wrote it, so that listening fails naming it.
  const char* env = sentinel_socket;
  if (env != nullptr && std::strcmp(env, "none") == 0) env = nullptr;
  char path[rules::kSocketPathMax];
  if (rules::ResolveSocketPath(env, xdg_runtime_dir, getuid(), path, sizeof(path)) ==
      rules::SocketPathKind::kPath) {
    return path;
  }
  if (env != nullptr && env[0] != '\0') return env;
  return absl::StrCat(xdg_runtime_dir != nullptr ? xdg_runtime_dir : "",
                      "/sentinel/sentineld.sock");
}

std::string DefaultSocketPath() {
  // SENTINEL_SOCKET from the process's one reading (common/sentinel_env.h); XDG_RUNTIME_DIR is not
  // ours. Start-up only.
  return DefaultSocketPath(rules::ProcessSentinelEnv().Text(rules::Var::kSocket),
                           std::getenv("XDG_RUNTIME_DIR"));  // NOLINT(concurrency-mt-unsafe)
}

absl::Status Config::Set(absl::string_view raw_key, absl::string_view value) {
  const std::string key = absl::StrReplaceAll(raw_key, {{"_", "-"}});
  value = absl::StripAsciiWhitespace(value);
  if (key == "socket") {
    // Empty is not "the default": a config that meant a path must not silently move the socket.
    if (value.empty()) {
      return absl::InvalidArgumentError(
          "--socket: empty path (leave the option out for the default socket)");
    }
    socket_path = std::string(value);
    return absl::OkStatus();
  }
  if (key == "node") {
    // Shown to people and scheduler scripts (alert ids, /v1/exclude, label values): a host-name-
    // like word only, so that it can forge no line, label or id.
    if (value.empty() || value.size() > kMaxNodeNameLen) {
      return absl::InvalidArgumentError(absl::StrCat("--node: expected 1 to ", kMaxNodeNameLen,
                                                     " characters, got ", value.size()));
    }
    if (!absl::ascii_isalnum(static_cast<unsigned char>(value[0]))) {
      return absl::InvalidArgumentError(
          "--node: must start with a letter or a digit (letters, digits, '.', '_', '-')");
    }
    for (const char ch : value) {
      const auto c = static_cast<unsigned char>(ch);
      if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--node: only letters, digits, '.', '_' and '-' are allowed, got byte 0x%02x", c));
      }
    }
    node_name = std::string(value);
    return absl::OkStatus();
  }
  if (key == "listen") {
    listen = std::string(value);
    return absl::OkStatus();
  }
  if (key == "port-file") {
    port_file = std::string(value);
    return absl::OkStatus();
  }
  if (key == "allow-group") {
    allow_group = std::string(value);
    return absl::OkStatus();
  }
  if (key == "api-read-group") {
    api_read_group = std::string(value);
    return absl::OkStatus();
  }
  if (key == "api-remote-details") return ParseOnOff(key, value, &api_remote_details);
  if (key == "record-log") {
    record_log = std::string(value);
    return absl::OkStatus();
  }
  if (key == "alertmanager") {
    alertmanager = std::string(value);
    return absl::OkStatus();
  }
  if (key == "log-level") {
    log_level = std::string(value);
    return absl::OkStatus();
  }
  if (key == "log-format") {
    LogFormat unused;
    absl::Status s = ParseLogFormat(value, &unused);
    if (s.ok()) log_format = std::string(value);
    return s;
  }
  if (key == "runbook-base") {
    runbook_base = std::string(value);
    return absl::OkStatus();
  }
  if (key == "expect") return SetExpect(value, &expect);
  if (key == "expect-on-mismatch") {
    rules::OnMismatch unused;
    if (!rules::ParseOnMismatch(std::string(value).c_str(), &unused)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--expect-on-mismatch: expected ", rules::kOnMismatchWords, ", got '", value, "'"));
    }
    expect_on_mismatch = std::string(value);
    return absl::OkStatus();
  }
  if (key == "window") return ParseDurationField(key, value, &window_ns);
  if (key == "hang-timeout") return ParseDurationField(key, value, &hang_timeout_ns);
  if (key == "hang-timeout-busy") return ParseDurationField(key, value, &hang_timeout_busy_ns);
  if (key == "hang-timeout-paused") {
    return ParseDurationField(key, value, &hang_timeout_paused_ns);
  }
  if (key == "tick") return ParseDurationField(key, value, &tick_ns);
  if (key == "nic-poll") return ParseDurationField(key, value, &nic_poll_ns);
  if (key == "sysfs-root") {
    sysfs_root = std::string(value);
    return absl::OkStatus();
  }
  if (key == "evidence-poll") return ParseDurationField(key, value, &evidence_poll_ns);
  if (key == "proc-root" || key == "cgroup-root" || key == "nvml-library") {
    if (value.empty()) return absl::InvalidArgumentError(absl::StrCat("--", key, ": empty"));
    std::string* field = key == "proc-root"     ? &proc_root
                         : key == "cgroup-root" ? &cgroup_root
                                                : &nvml_library;
    *field = std::string(value);
    return absl::OkStatus();
  }
  if (key == "straggler-min") return ParseDurationField(key, value, &straggler_min_ns);
  if (key == "straggler-evidence") {
    return ParseDurationField(key, value, &straggler_evidence_ns);
  }
  if (key == "http-timeout") return ParseDurationField(key, value, &http_timeout_ns);
  if (key == "hello-timeout") return ParseDurationField(key, value, &hello_timeout_ns);
  if (key == "max-handshaking") return ParseIntField(key, value, 1, 1 << 20, &max_handshaking);
  if (key == "max-ranks-per-client") {
    return ParseIntField(key, value, 1, 1 << 20, &max_ranks_per_client);
  }

  if (key == "record-log-max-mb") return ParseInt(key, value, 1, 1 << 20, &record_log_max_mb);
  if (key == "flight-ops") {
    return ParseIntField(key, value, 0, static_cast<int>(kFlightMaxOpsPerRank), &flight_ops);
  }
  if (key == "pending-slots") return ParseIntField(key, value, 8, 1 << 16, &pending_slots);
  if (key == "history-per-rank") return ParseIntField(key, value, 16, 1 << 20, &history_per_rank);
  if (key == "history-collectives") {
    return ParseIntField(key, value, 16, 1 << 24, &history_collectives);
  }
  if (key == "max-comms") return ParseIntField(key, value, 1, 1 << 20, &max_comms);
  if (key == "max-ranks") return ParseIntField(key, value, 1, 1 << 20, &max_ranks);
  if (key == "max-clients") return ParseIntField(key, value, 1, 1 << 20, &max_clients);
  if (key == "node-wait-alerts") return ParseOnOff(key, value, &node_wait_alerts);
  if (key == "straggler-rel") return ParseDouble(key, value, &straggler_rel);
  if (key == "straggler-noise-h") return ParseDouble(key, value, &straggler_noise_h);
  if (key == "straggler-floor-h") return ParseDouble(key, value, &straggler_floor_h);
  if (key == "straggler-learn") return ParseIntField(key, value, 0, 1000000, &straggler_learn);
  if (key == "hang-silent") return ParseDurationField(key, value, &hang_silent_ns);
  if (key == "alert-retention") return ParseDurationField(key, value, &alert_retention_ns);
  if (key == "exclude-kinds") {
    absl::StatusOr<uint32_t> kinds = ParseExcludeKinds(value);
    if (!kinds.ok()) return kinds.status();
    exclude_kinds = std::string(absl::StripAsciiWhitespace(value));
    return absl::OkStatus();
  }
  if (key == "exclude-hold") return ParseDurationField(key, value, &exclude_hold_ns);
  if (key == "straggler-warmup") return ParseIntField(key, value, 0, 1000000, &straggler_warmup);
  if (key == "metrics-detail") {
    absl::StatusOr<MetricsDetail> detail = ParseMetricsDetail(value);
    if (!detail.ok()) return detail.status();
    metrics_detail = std::string(absl::StripAsciiWhitespace(value));
    return absl::OkStatus();
  }
  if (key == "metrics-comms") {
    metrics_comms = std::string(absl::StripAsciiWhitespace(value));
    return absl::OkStatus();
  }
  if (key == "series-retention") return ParseDurationField(key, value, &series_retention_ns);
  return absl::InvalidArgumentError(absl::StrCat("unknown option '", raw_key, "'"));
}

absl::Status Config::LoadFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat("--config: cannot read config file ", path, ": ", ErrnoText(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("--config: ", path, " is not a regular file"));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--config: cannot read config file ", path));
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    const size_t eq = text.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": expected key = value"));
    }
    absl::Status s = Set(absl::StripAsciiWhitespace(text.substr(0, eq)), text.substr(eq + 1));
    if (!s.ok())
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ParseCommandLine(int argc, char** argv, Config* config, bool* help) {
  *help = false;
  std::vector<std::pair<std::string, std::string>> options;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return absl::OkStatus();
    }
    if (!absl::ConsumePrefix(&arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    std::string key;
    std::string value;
    const size_t eq = arg.find('=');
    if (eq != absl::string_view::npos) {
      key = std::string(arg.substr(0, eq));
      value = std::string(arg.substr(eq + 1));
    } else {
      key = std::string(arg);
      if (i + 1 >= argc)
        return absl::InvalidArgumentError(absl::StrCat("--", key, " needs a value"));
      value = argv[++i];
    }
    if (key == "config") {
      config->config_file = value;
    } else {
      options.emplace_back(key, value);
    }
  }
  if (!config->config_file.empty()) {
    absl::Status s = config->LoadFile(config->config_file);
    if (!s.ok()) return s;
  }
  for (const auto& [key, value] : options) {
    absl::Status s = config->Set(key, value);
    if (!s.ok()) return s;
  }
  return config->Validate();
}

absl::Status Config::Validate() const {
  rules::LogLevelWord unused_level;
  if (!rules::ParseLogLevel(log_level.c_str(), &unused_level)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--log-level: expected ", rules::kDaemonLogLevelWords, ", got '", log_level, "'"));
  }
  // Zero durations would spin a core (tick) or make every window/timeout empty.
  const struct {
    const char* name;
    int64_t value;
    int64_t min;
  } durations[] = {{"tick", tick_ns, 1000000},
                   {"window", window_ns, 1000000},
                   {"hang-timeout", hang_timeout_ns, 1000000},
                   {"http-timeout", http_timeout_ns, 1000000},
                   {"hello-timeout", hello_timeout_ns, 1000000}};
  for (const auto& d : durations) {
    if (d.value < d.min) {
      return absl::InvalidArgumentError(absl::StrCat("--", d.name, ": must be at least 1ms"));
    }
  }
  if (hang_timeout_busy_ns < hang_timeout_ns) {
    return absl::InvalidArgumentError(
        "--hang-timeout-busy: must be at least --hang-timeout (a rank busy outside NCCL is given "
        "more time than a stuck one, never less)");
  }
  if (hang_timeout_paused_ns < hang_timeout_ns) {
    return absl::InvalidArgumentError(
        "--hang-timeout-paused: must be at least --hang-timeout (a rank paused outside NCCL is "
        "given more time than a stuck one, never less)");
  }
  // Each bound below is a value that parses but cannot work: a detector dividing by zero, a rank
  // called gone between two of its own reports, a sysfs poll that keeps a core busy.
  if (!std::isfinite(straggler_rel) || straggler_rel <= 0 || straggler_rel > kMaxStragglerRel) {
    return absl::InvalidArgumentError(
        absl::StrCat("--straggler-rel: must be a finite fraction > 0 and at most ",
                     kMaxStragglerRel, " (e.g. 0.05), got ", straggler_rel));
  }
  if (!std::isfinite(straggler_noise_h) || straggler_noise_h <= 0 ||
      straggler_noise_h > kMaxStragglerNoiseH) {
    return absl::InvalidArgumentError(
        absl::StrCat("--straggler-noise-h: must be a number in (0, ", kMaxStragglerNoiseH,
                     "] (larger never fires), got ", straggler_noise_h));
  }
  if (!std::isfinite(straggler_floor_h) || straggler_floor_h < 0 ||
      straggler_floor_h > kMaxStragglerFloorH) {
    return absl::InvalidArgumentError(
        absl::StrCat("--straggler-floor-h: must be a number in [0, ", kMaxStragglerFloorH,
                     "] (larger never fires), got ", straggler_floor_h));
  }
  if (!api_read_group.empty()) {
    if (!GroupId(api_read_group).ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--api-read-group: unknown group '", api_read_group, "'"));
    }
  }
  if (straggler_min_ns < kMinStragglerMinNs) {
    // The detector divides by the compute segment, floored at this: 0 divides by zero.
    return absl::InvalidArgumentError(absl::StrCat(
        "--straggler-min: must be at least 1us (the floor a compute segment is divided by), got ",
        straggler_min_ns, "ns"));
  }
  if (hang_silent_ns < kMinHangSilentNs) {
    return absl::InvalidArgumentError(
        absl::StrCat("--hang-silent: must be at least 2s (plugins send their in-flight state every "
                     "second, so a shorter value calls live ranks gone), got ",
                     hang_silent_ns / 1000000, "ms"));
  }
  if (nic_poll_ns != 0 && nic_poll_ns < kMinNicPollNs) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nic-poll: must be 0 (off) or at least 100ms (each poll reads every port's "
                     "counters from sysfs), got ",
                     nic_poll_ns / 1000, "us"));
  }
  if (evidence_poll_ns != 0 && evidence_poll_ns < kMinNicPollNs) {
    return absl::InvalidArgumentError(
        absl::StrCat("--evidence-poll: must be 0 (off) or at least 100ms (each poll reads every "
                     "rank process's /proc and cgroup files and every GPU), got ",
                     evidence_poll_ns / 1000, "us"));
  }
  // Files sentineld writes go only into directories other users cannot change (fs_trust.h).
  const rules::TrustedUids trusted = rules::TrustedUidsFromEnv();
  const struct {
    const char* flag;
    const std::string& path;
  } files[] = {{"--port-file", port_file}, {"--record-log", record_log}};
  for (const auto& file : files) {
    if (file.path.empty()) continue;
    const rules::TrustFinding f = rules::CheckTrustedParent(file.path.c_str(), trusted);
    if (!f.ok()) return absl::InvalidArgumentError(TrustRefusal(file.flag, f, trusted));
  }
  return absl::OkStatus();
}

std::string UsageText() {
  return R"(sentineld: node-local collector of nccl-sentinel.

Usage: sentineld [--socket PATH] [--listen HOST:PORT] [options]

  --socket PATH            UNIX socket the plugins connect to (default: $SENTINEL_SOCKET, else
                           $XDG_RUNTIME_DIR/sentinel/sentineld.sock, else /tmp/sentinel-<uid>/sentineld.sock).
                           Its directory is created (last component only) or set to 0700 (0750 with
                           --allow-group); one owned by another user or writable by others is refused
  --listen HOST:PORT       HTTP API and /metrics (default 127.0.0.1:9464; port 0 picks a free one)
  --node NAME              this node's name in its alerts, API and /metrics `host` label (default:
                           the short host name); 1-63 letters, digits, '.', '_', '-', starting with
                           a letter or digit. Two daemons on one machine can so stand for two nodes
  --port-file FILE         write the bound HTTP port to FILE once listening (its directory must be
                           yours, root's or the daemon user's, and not writable by others)
  --config FILE            key = value file with any of these options (command line wins)
  --window DUR             default /v1/telemetry window (default 15m)
  --nic-poll DUR           period of the RDMA port counter poll from sysfs (default 5s; 0 = off;
                           else at least 100ms)
  --sysfs-root DIR         where sysfs is mounted, for the NIC counters (default /sys)
  --evidence-poll DUR      period of the late-rank evidence poll: each rank process's /proc and
                           cgroup files and the node's GPUs through NVML (default 1s; 0 = off,
                           every late rank's cause is then "unknown"; else at least 100ms)
  --proc-root DIR          where the host's /proc is mounted (default /proc; a container needs the
                           host PID namespace, or the host's /proc mounted here)
  --cgroup-root DIR        where the cgroup tree is mounted (default /sys/fs/cgroup)
  --nvml-library PATH      NVML, loaded at run time (default libnvidia-ml.so.1; `off`: no GPU
                           state in the causes)
  --hang-timeout DUR       a collective some local ranks reached and others did not, for this long,
                           raises a hang alert (default 30s). Make it longer than the longest
                           legitimate pause of any rank (checkpoint write, evaluation)
  --hang-timeout-busy DUR  a hang whose only culprits are busy_outside_nccl (their process still
                           makes progress elsewhere) is acted on only after this long (default
                           30m; at least --hang-timeout)
  --hang-timeout-paused DUR  a hang whose culprits are alive outside NCCL, one of them paused
                           (paused_outside_nccl: its process reports, nothing of it is in flight
                           in any communicator: a checkpoint write, a long sleep) raises no alert
                           and no abort before this long (default 5m; at least --hang-timeout)
  --hang-silent DUR        a rank that sent no in-flight state for this long is "gone" (default 5s;
                           at least 2s: plugins report every second)
  --alert-retention DUR    resolved alerts stay in /v1/alerts this long (default 1h)
  --exclude-kinds LIST     alert kinds that put a host on GET /v1/exclude: comma list of straggler,
                           hang, transport, placement, link_degraded, nic_errors, or none
                           (default straggler,nic_errors,link_degraded)
  --exclude-hold DUR       a host stays on /v1/exclude this long after its alert resolved (default
                           30m; capped by --alert-retention: older resolved alerts are gone)
  --allow-group GROUP      also accept peers in this group; the socket becomes 0660 (default: own uid
                           only, socket 0600)
  --api-read-group GROUP   members of GROUP read every job's details on the HTTP API (/v1/ranks,
                           /v1/telemetry, /v1/alerts, /v1/trace); others see only their own uid's
                           jobs, root and the daemon's user see all (default: no such group)
  --api-remote-details on|off  peers on other hosts (no local uid) read every job's details
                           (default off: they see none; /metrics, /healthz, /v1/exclude and
                           /v1/expect are node-level and open to all)
  --record-log PATH        append every joined record as JSON lines (default off)
  --record-log-max-mb N    disk cap of the record log, rotation included (default 256)
  --flight-ops N           operations kept per local rank for the flight record sentineld writes
                           beside the record log on a confirmed hang and on demand (`sentinelctl
                           record`): 72 B each, bounded per user (default 2000, at most 100000;
                           0 = no history and no record; needs --record-log)
  --alertmanager URL       push alerts to URL/api/v2/alerts (default off)
  --log-level LEVEL        trace|debug|info|warn|error (default info)
  --log-format FORMAT      text|json: one line per event on stderr, rate-limited (default text)
  --runbook-base PREFIX    prefix of alert runbook links, + "alert-<kind>" (default collector/README.md#)
  --expect 'EXPR'          node default transport/placement expectation for the guard (grammar:
                           plugin/guard/README.md), validated at startup; served at GET /v1/expect
                           and published as the file `expect` next to the socket (default none)
  --expect-on-mismatch M   fail|warn|abort for the node default (default: the plugin's, fail)
  --pending-slots N        in-flight joins per (communicator, function) (default 512)
  --history-per-rank N     samples kept per rank for percentiles and traces (default 1024)
  --history-collectives N  joined collectives kept for telemetry (default 65536)
  --max-comms N / --max-ranks N / --max-clients N   hard bounds (1024 / 4096 / 1024)
  --max-ranks-per-client N ranks (communicator, rank) one plugin connection may create (default
                           64); past it its records are dropped and counted as evicted ranks
                           (collector/README.md: worst-case memory ceiling)
  --http-timeout DUR       a whole HTTP connection, request and reply, gets this long (default 10s)
  --hello-timeout DUR      a plugin connection that has not said hello by then is closed (5s)
  --max-handshaking N      of --max-clients, slots for connections still in their hello (64,
                           and at most a quarter of --max-clients; one uid holds at most half)
  --node-wait-alerts on|off  the node's own slow-node / slow-rank alerts from its ranks' wait
                           evidence (default on; off keeps them to the job-wide rules; the
                           evidence is exported either way)
  --straggler-rel X        smallest slowdown worth an alert, as a fraction of the rank's compute
                           between collectives (default 0.05; at most 10)
  --straggler-noise-h X    evidence threshold in units of the measured noise (default 12; > 0, at
                           most 1000)
  --straggler-floor-h X    ... plus this many compute segments of excess (default 2; at most 1000)
  --straggler-min DUR      clock-noise floor of a compute segment (default 50us; at least 1us)
  --straggler-evidence DUR a straggler's late run must span this much compute (default 2s:
                           longer than a loaded host keeps one rank off its CPU; 0 = no floor)
  --straggler-learn N      judged collectives that only learn the noise level (default 32)
  --straggler-warmup N     first N joined collectives of a communicator are not judged: they
                           measure process start-up, not stragglers (default 2)
  --metrics-detail LIST    per-communicator and per-size series on /metrics: none, or a comma list
                           of comm, size (default none: one communicator per rank, no size
                           buckets, at most ~100 series per rank; the JSON API has every detail)
  --metrics-comms LIST     also export these communicators in full: comma list of hashes
                           (0x...) or communicator names (default none)
  --series-retention DUR   the series of an ended communicator leave /metrics after this long
                           (default 5m; 0 = at once)
  --help                   this text
Durations: 50us, 500ms, 30s, 15m, 2h, 1d, or plain seconds.
)";
}

}  // namespace sentinel::collector
