// Optional push of alerts to an Alertmanager (POST /api/v2/alerts). Runs on its own thread so a
// slow or absent Alertmanager never delays ingest; firing alerts are re-sent every minute, as
// Alertmanager expects, and resolved ones once with endsAt.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"

#include "collector/aggregate/snapshot_source.h"
#include "collector/base/clock.h"

namespace sentinel::collector {

// The /api/v2/alerts body for these alerts.
nlohmann::json AlertmanagerPayload(const std::vector<Alert>& alerts);

class AlertPusher {
 public:
  // `clock` times the minute between re-sends (tests may inject a fake).
  AlertPusher(std::string url, SnapshotSource* source, Clock* clock = RealClock());
  ~AlertPusher();
  AlertPusher(const AlertPusher&) = delete;
  AlertPusher& operator=(const AlertPusher&) = delete;
  void Start();
  void Stop();

 private:
  void Loop();
  // One POST of `alerts` (none: nothing sent); Unavailable when Alertmanager did not take it.
  absl::Status Post(const std::vector<Alert>& alerts);

  const std::string url_;
  SnapshotSource* const source_;
  Clock* const clock_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

}  // namespace sentinel::collector
