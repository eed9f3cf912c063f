// sentineld: flags, signals and the run loop. Everything else lives in sentinel_collector_lib.
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "spdlog/spdlog.h"

#include "collector/aggregate/aggregator.h"
#include "collector/config/config.h"
#include "collector/evidence/evidence_poller.h"
#include "collector/export/alertmanager.h"
#include "collector/export/http_server.h"
#include "collector/export/record_log.h"
#include "collector/export/version.h"
#include "collector/ingest/ingest_server.h"
#include "collector/log/daemon_log.h"
#include "collector/nic/nic_counters.h"

namespace {

sentinel::collector::IngestServer* g_server = nullptr;  // for the signal handler only

extern "C" void OnSignal(int) {
  if (g_server != nullptr) g_server->Stop();  // an atomic store and a write(2): signal-safe
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sentinel::collector;  // NOLINT(google-build-using-namespace): main only
  // Reading the command line reads the environment, whose problems are lines of our log: held
  // until the log has its format.
  HoldStartupLines();
  Config config;
  bool help = false;
  absl::Status s = ParseCommandLine(argc, argv, &config, &help);
  if (help) {
    std::fputs(UsageText().c_str(), stdout);
    return 0;
  }
  if (!s.ok()) {
    // A refused command line still gets the format it asked for, when that much was readable.
    std::string format = LogFormatFromArgs(argc, argv, config.log_format);
    LogFormat parsed = LogFormat::kText;
    if (!ParseLogFormat(format, &parsed).ok()) format = "text";
    (void)ConfigureDaemonLog(format, "info");
    if (parsed == LogFormat::kJson) {
      spdlog::critical("{} (see sentineld --help)", std::string(s.message()));
    } else {
      std::fprintf(stderr, "sentineld: %s\n(see sentineld --help)\n",
                   std::string(s.message()).c_str());
    }
    return 2;
  }
  // Large buffers (join windows, rendered /metrics and API bodies) always come from mmap and go
  // back to the kernel when freed. glibc's default raises that threshold to the largest block
  // freed so far (up to 32 MiB), after which such buffers stay in the heap: a burst of state, or a
  // big scrape, then pinned its peak (measured: +4.6 MiB after one 4.7 MB /metrics). Set here,
  // before any thread starts.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);  // NOLINT(concurrency-mt-unsafe): still one thread
  // Validated by ParseCommandLine: cannot fail here.
  (void)ConfigureDaemonLog(config.log_format, config.log_level);
  signal(SIGPIPE, SIG_IGN);

  Aggregator aggregator(config, RealClock());
  std::unique_ptr<RecordLog> record_log;
  if (!config.record_log.empty()) {
    record_log = std::make_unique<RecordLog>(config.record_log,
                                             static_cast<uint64_t>(config.record_log_max_mb) << 20);
    absl::Status rs = record_log->Open();
    if (!rs.ok()) {
      spdlog::critical("{}", std::string(rs.message()));
      return 1;
    }
    aggregator.SetRecordLog(record_log.get());
  }
  IngestServer ingest(config, &aggregator);
  s = ingest.Listen();
  if (!s.ok()) {
    spdlog::critical("{}", std::string(s.message()));
    return 1;
  }
  // The node default expectation, next to the socket: the plugin reads it in its preload
  // constructor (a local file read, no network round trip; plugin/guard/README.md).
  std::string expect_file;
  if (!config.expect.empty()) {
    expect_file = NodeExpectPath(ingest.socket_path());
    absl::Status es = WriteFileAtomically(expect_file, NodeExpectFileContent(config), 0644);
    if (!es.ok()) {
      spdlog::critical("{}", std::string(es.message()));
      return 1;
    }
  }
  HttpServer http(&aggregator);
  absl::StatusOr<int> port = http.Start(config.listen);
  if (!port.ok()) {
    spdlog::critical("{}", std::string(port.status().message()));
    return 1;
  }
  // Signals are handled from before the port file says the daemon is up: a SIGTERM right after
  // it stops the daemon cleanly (Run() returns at once), never kills it mid-start.
  g_server = &ingest;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (!config.port_file.empty()) {
    // Atomic (readers never see a partial file); a failure is fatal, not a silent no-file.
    absl::Status ps = WriteFileAtomically(config.port_file, std::to_string(*port) + "\n", 0644);
    if (!ps.ok()) {
      spdlog::critical("--port-file: {}", std::string(ps.message()));
      g_server = nullptr;
      return 1;
    }
  }
  std::unique_ptr<AlertPusher> pusher;
  if (!config.alertmanager.empty()) {
    pusher = std::make_unique<AlertPusher>(config.alertmanager, &aggregator);
    pusher->Start();
  }
  // Own thread: sysfs PMA reads are firmware round trips, kept off the ingest loop.
  NicPoller nic_poller(config.sysfs_root, config.nic_poll_ns, &aggregator);
  nic_poller.Start();
  spdlog::info("sentineld {} listening: socket {} http {} (port {})", kSentinelVersion,
               ingest.socket_path(), config.listen, *port);
  // Own thread, started after the line above (an NVML warning follows it): each rank process's
  // /proc and cgroup files and NVML, for the causes of late ranks.
  EvidenceOptions evidence_options;
  evidence_options.period_ns = config.evidence_poll_ns;
  evidence_options.roots.proc = config.proc_root;
  evidence_options.roots.cgroup = config.cgroup_root;
  evidence_options.nvml_library = config.nvml_library;
  evidence_options.max_pids = static_cast<size_t>(std::max(config.max_clients, 1));
  EvidencePoller evidence(evidence_options, RealClock(),
                          [&aggregator] { return aggregator.LivePids(); });
  evidence.Start();
  if (config.evidence_poll_ns > 0) aggregator.SetEvidence(&evidence);
  ingest.Run();
  g_server = nullptr;
  spdlog::info("sentineld stopping");
  aggregator.SetEvidence(nullptr);
  evidence.Stop();
  nic_poller.Stop();
  if (pusher) pusher->Stop();
  http.Stop();
  if (record_log) record_log->Flush();
  if (!expect_file.empty()) unlink(expect_file.c_str());
  return 0;
}
