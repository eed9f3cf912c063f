// What export/ reads of the aggregator: plain-data snapshots copied under its lock, the
// alert changes for the Alertmanager push, its config and clock. The Aggregator implements it;
// the HTTP server and the Alertmanager pusher hold only this, so export/ never sees State and a
// test may hand them a fake. Every snapshot is taken under one hold of the aggregator's lock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collector/aggregate/alert_book.h"
#include "collector/aggregate/api_snapshot.h"
#include "collector/aggregate/api_viewer.h"
#include "collector/aggregate/exclusion.h"
#include "collector/aggregate/metrics_snapshot.h"
#include "collector/aggregate/snapshot.h"
#include "collector/base/clock.h"
#include "collector/config/config.h"

namespace sentinel::collector {

// What a viewer of the HTTP API may see of a snapshot (api_viewer.h): the processes, ranks,
// communicators, collectives, trace events, hang suspects, slow-cause entries and alerts of the
// viewer's uid; node-level figures (counters, NIC ports, net links, GPU sums) stay. A viewer that
// sees all keeps everything.
void FilterForViewer(const ApiViewer& viewer, RanksSnapshot* snap);
void FilterForViewer(const ApiViewer& viewer, TelemetrySnapshot* snap);
void FilterForViewer(const ApiViewer& viewer, TraceSnapshot* snap);
void FilterForViewer(const ApiViewer& viewer, std::vector<Alert>* alerts);
// An alert of a communicator is its owner's; a node-level one is everyone's when sentineld raised
// it from its own measurements, else its source client's uid's.
bool ViewerSeesAlert(const ApiViewer& viewer, const Alert& alert);

// Who asks for a flight record now (POST /v1/record): the kernel's uid of a local peer. A record
// writes a file, so only the job's own uid, root and sentineld's own user may ask; `any_job` (root,
// sentineld's user) records any user's communicators, every other uid only its own.
struct FlightRequester {
  uint32_t uid = 0;
  bool any_job = false;
};

// What came of it: `status` as HTTP says it (200 written; 404 nothing to record; 409 sentineld
// writes no flight records; 429 asked again within a second; 500 the write failed) with `error`,
// else the file's `path` and what it holds.
struct FlightRecordAnswer {
  int status = 501;
  std::string error = "flight records are not supported here";
  std::string path;
  std::vector<uint64_t> comms;  // the communicators written, by hash
  size_t ranks = 0;             // the local ranks written
  size_t left_out = 0;          // communicators of another user with a hash already written
};

class SnapshotSource {
 public:
  virtual ~SnapshotSource() = default;

  virtual const Config& config() const = 0;
  virtual Clock* clock() const = 0;

  // /metrics: what it renders, and the hosts `exclude` lists at `now_real_ns` (same lock hold).
  virtual MetricsSnapshot SnapshotMetrics(const ExcludePolicy& exclude, int64_t now_real_ns,
                                          std::vector<ExcludedHost>* excluded) const = 0;
  virtual HealthSnapshot SnapshotHealth() const = 0;  // /healthz
  // The job details below hold only what `viewer` may see (api_viewer.h).
  virtual RanksSnapshot SnapshotRanks(const ApiViewer& viewer) const = 0;  // /v1/ranks
  virtual TelemetrySnapshot SnapshotTelemetry(int64_t window_ns,           // /v1/telemetry
                                              int64_t now_mono_ns,
                                              const ApiViewer& viewer) const = 0;
  virtual TraceSnapshot SnapshotTrace(int64_t since_ns,  // /v1/trace
                                      const ApiViewer& viewer) const = 0;
  // /v1/alerts: all the viewer may see, in the book's order.
  virtual std::vector<Alert> SnapshotAlerts(const ApiViewer& viewer) const = 0;
  // /v1/exclude: the hosts `exclude` lists at `now_real_ns`.
  virtual std::vector<ExcludedHost> SnapshotExclusions(const ExcludePolicy& exclude,
                                                       int64_t now_real_ns) const = 0;
  // The Alertmanager push: the firing alerts (re-sent every minute), and those whose state
  // changed since the last call.
  virtual std::vector<Alert> FiringAlerts() const = 0;
  virtual std::vector<Alert> TakeAlertChanges() = 0;
  // POST /v1/record: writes a flight record of `comm` (every communicator `who` may record when
  // none) and says where. Takes the aggregator's lock to copy, writes after releasing it.
  virtual FlightRecordAnswer RecordFlight(const FlightRequester& who,
                                          std::optional<uint64_t> comm) {
    (void)who;
    (void)comm;
    return FlightRecordAnswer{};
  }
};

}  // namespace sentinel::collector
