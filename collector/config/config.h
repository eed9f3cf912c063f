// sentineld's configuration: defaults, the key=value config file, the command line, and the
// duration / size parsers shared with the HTTP API. Every default is documented in
// collector/README.md; keep the two in sync.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "common/errno_text.h"

namespace sentinel::collector {

// Lower bounds Validate() enforces (below them a value parses but cannot work).
inline constexpr int64_t kMinStragglerMinNs = 1000;            // --straggler-min: 1us
inline constexpr int64_t kMinHangSilentNs = 2LL * 1000000000;  // --hang-silent: 2s
inline constexpr size_t kMaxNodeNameLen = 63;                  // --node: a host name label's limit
inline constexpr int64_t kMinNicPollNs = 100LL * 1000000;      // --nic-poll: 100ms (or 0 = off)
// Upper bounds of the straggler detector's numbers: past them the detector never fires (its
// threshold overflows to infinity, or a slowdown must be a multiple of the run time itself).
inline constexpr double kMaxStragglerRel = 10.0;       // --straggler-rel: a 10x slowdown
inline constexpr double kMaxStragglerNoiseH = 1000.0;  // --straggler-noise-h (default 12)
inline constexpr double kMaxStragglerFloorH = 1000.0;  // --straggler-floor-h (default 2)

struct Config {
  std::string socket_path;  // empty = DefaultSocketPath()
  std::string listen = "127.0.0.1:9464";
  // --node: this node's name in its alerts (ids such as straggler-node-<name>, texts, `host`),
  // the API and /metrics' `host` label, instead of the machine's short host name; so that two
  // daemons on one machine can stand for two nodes. Empty = the short host name.
  std::string node_name;
  std::string port_file;  // written with the bound HTTP port once listening
  std::string config_file;
  int64_t window_ns = 15LL * 60 * 1000000000;   // default telemetry window
  int64_t hang_timeout_ns = 30LL * 1000000000;  // pending join older than this = hang
  // A hang whose only culprits are busy_outside_nccl (alive, progressing elsewhere) is acted on
  // (an abort verdict) only after this long; at least hang_timeout_ns.
  int64_t hang_timeout_busy_ns = 30LL * 60 * 1000000000;
  // A hang whose culprits are alive outside NCCL, one of them paused (paused_outside_nccl: nothing
  // of its process in flight, e.g. a checkpoint write) raises no alert and no action before this
  // long; at least hang_timeout_ns.
  int64_t hang_timeout_paused_ns = 5LL * 60 * 1000000000;
  std::string allow_group;  // extra group allowed to connect
  // Who reads other users' job details on the HTTP API (collector/export/http_peer.h): members of
  // this group (besides root and the daemon's user), and, with api_remote_details, peers on other
  // hosts. Everyone else sees only the jobs their own uid runs.
  std::string api_read_group;
  bool api_remote_details = false;
  std::string record_log;           // JSONL record log path, empty = off
  int64_t record_log_max_mb = 256;  // disk cap over the log and its rotation
  // Operations kept per local rank for the flight record written on a hang (and on demand),
  // beside the record log (collector/aggregate/flight_history.h); 0 = no history, no record.
  int flight_ops = 2000;
  std::string alertmanager;  // base URL, empty = no push
  std::string log_level = "info";
  std::string log_format = "text";  // text|json (collector/log/daemon_log.h)
  // Prefix of every alert's runbook link: a page per alert kind is `<base>alert-<kind>`. The
  // default points into this repository's collector/README.md; operators set their own wiki.
  std::string runbook_base = "collector/README.md#";
  // The node default expectation (plugin/guard/README.md grammar), validated when set; served at
  // GET /v1/expect and published as the file `expect` next to the socket. Empty = none.
  std::string expect;
  std::string expect_on_mismatch;  // fail|warn|abort; empty = the plugin's default
  // Aggregation bounds (memory is bounded by these, whatever the traffic).
  int pending_slots = 512;          // in-flight joins kept per (communicator, function)
  int history_per_rank = 1024;      // per-rank samples kept (percentiles, trace)
  int history_collectives = 65536;  // joined collective summaries kept (telemetry)
  int max_comms = 1024;
  int max_ranks = 4096;
  int max_clients = 1024;
  // Straggler detection (straggler_detector.h; defaults from detection_eval, README).
  // The node's own clock-free straggler alerts from its ranks' wait evidence (slow node, slow rank
  // in a communicator spanning nodes): a slow node names itself within seconds. On by default
  // (collector/README.md, the `node-wait-alerts` row, says why it once was not); the evidence
  // itself is computed and exported either way.
  bool node_wait_alerts = true;
  double straggler_rel = 0.05;       // smallest relative slowdown worth an alert
  double straggler_noise_h = 12.0;   // CUSUM threshold in units of noise variance / drift
  double straggler_floor_h = 2.0;    // ... plus this many compute segments
  int64_t straggler_min_ns = 50000;  // clock-noise floor of a compute segment
  int straggler_learn = 32;          // judged collectives that only train the noise estimate
  // A straggler's evidence must span this much of the ranks' compute: longer than a loaded host's
  // scheduler keeps one rank off its CPU (the host's time scale, not the job's; see
  // collector/README "A loaded host").
  int64_t straggler_evidence_ns = 2LL * 1000000000;
  int straggler_warmup = 2;  // first joined collectives of a comm not judged (start skew)
  int64_t hang_silent_ns = 5LL * 1000000000;  // no in-flight record for this long = rank gone
  int64_t alert_retention_ns = 3600LL * 1000000000;  // resolved alerts kept in /v1/alerts
  int64_t tick_ns = 200000000;                       // hang checks and alert pushes
  // NIC counters (collector/nic/): sysfs mount point and poll period (0 = off).
  std::string sysfs_root = "/sys";
  int64_t nic_poll_ns = 5LL * 1000000000;
  // Why a rank is late (collector/evidence/): its process's /proc and cgroup files and the node's
  // GPUs through NVML, read by one thread every evidence_poll_ns (0 = off). nvml_library "off":
  // no NVML.
  int64_t evidence_poll_ns = 1000000000;
  std::string proc_root = "/proc";
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string nvml_library = "libnvidia-ml.so.1";
  // Hardening: a whole HTTP connection (request read + reply written) and a plugin
  // connection's hello each get this long; connections still in their handshake hold at most
  // max_handshaking of the max_clients slots, so clients that said hello are preferred.
  int64_t http_timeout_ns = 10LL * 1000000000;
  int64_t hello_timeout_ns = 5LL * 1000000000;
  int max_handshaking = 64;
  // Per-client bounds on the state one connection can create.
  int max_ranks_per_client = 64;
  // Node exclusion (collector/aggregate/exclusion.h): the alert kinds that put a
  // host on GET /v1/exclude, and how long it stays listed after its alert resolved.
  std::string exclude_kinds = "straggler,nic_errors,link_degraded";
  int64_t exclude_hold_ns = 30LL * 60 * 1000000000;
  // Series budget of /metrics (collector/export/metrics_select.h): per-communicator and
  // per-size-bucket detail is opt-in; the series of an ended communicator go after the retention.
  std::string metrics_detail = "none";  // none, or a comma list of comm, size
  std::string metrics_comms;            // allow-list: communicator hashes (0x...) or names
  int64_t series_retention_ns = 5LL * 60 * 1000000000;

  // Parses a "key = value" file (# comments, keys as the long flags without "--", '-' or '_').
  absl::Status LoadFile(const std::string& path);
  // Sets one option from its key; unknown key -> InvalidArgument.
  absl::Status Set(absl::string_view key, absl::string_view value);
  // Cross-option checks after every option is set: values that parse but cannot work.
  absl::Status Validate() const;
};

// $SENTINEL_SOCKET, else $XDG_RUNTIME_DIR/sentinel/sentineld.sock, else
// /tmp/sentinel-<uid>/sentineld.sock.
std::string DefaultSocketPath();
// The same rule on given values (null = unset): the test seam.
std::string DefaultSocketPath(const char* sentinel_socket, const char* xdg_runtime_dir);

// "500ms", "30s", "15m", "2h", "1d", or a bare number of seconds. Rejects negatives and garbage.
absl::StatusOr<int64_t> ParseDurationNs(absl::string_view text);

// Parses argv into `config` (after loading --config FILE, so the command line wins).
// Sets *help when --help was given. Returns InvalidArgument with a message on a usage error.
absl::Status ParseCommandLine(int argc, char** argv, Config* config, bool* help);

std::string UsageText();

// The one errno text (common/errno_text.h), for the collector's callers.
using rules::ErrnoText;

// The node default expectation file: `expect` in the socket's directory (where the plugin looks).
std::string NodeExpectPath(const std::string& socket_path);
// Its content: a comment header, "# on_mismatch=X" when set, then the expectation.
std::string NodeExpectFileContent(const Config& config);
// Writes `content` to `path` through a temp file and rename(2) (readers never see a partial
// file), with `mode` regardless of the umask. The temp file has an unpredictable name, is created
// with O_CREAT|O_EXCL|O_NOFOLLOW, and `path`'s directory must pass rules::CheckTrustedParent
// (collector/base/owned_paths.h WriteFileSafely).
absl::Status WriteFileAtomically(const std::string& path, const std::string& content, mode_t mode);

}  // namespace sentinel::collector
