// Alertmanager push: see alertmanager.h.
#include "collector/export/alertmanager.h"

#include <httplib.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"

#include "collector/base/real_time.h"
#include "collector/base/thread.h"

namespace sentinel::collector {
namespace {

// Firing alerts are sent again this often: Alertmanager resolves an alert it has not heard of
// for its resolve_timeout (5 minutes by default).
constexpr int64_t kResendEveryNs = 60'000'000'000;

}  // namespace

nlohmann::json AlertmanagerPayload(const std::vector<Alert>& alerts) {
  nlohmann::json out = nlohmann::json::array();
  for (const Alert& a : alerts) {
    std::string kind = AlertKindName(a.kind);
    if (!kind.empty())
      kind[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(kind[0])));
    nlohmann::json item = {
        {"labels",
         {{"alertname", "Sentinel" + kind},
          {"kind", AlertKindName(a.kind)},
          {"severity", AlertSeverityName(a.severity)},
          {"comm", a.comm},
          // Two users' communicators of one hash raise alerts of one id: the owner tells them
          // apart (empty for a node-level alert).
          {"uid", a.owner_uid == kNoUid ? std::string() : absl::StrCat(a.owner_uid)},
          {"host", a.host},
          {"ranks", absl::StrJoin(a.ranks, ",")},
          {"sentinel_id", a.id}}},
        {"annotations",
         {{"summary", a.summary},
          {"runbook_url", a.runbook},
          {"evidence", a.evidence.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)}}},
        {"startsAt", FormatRealTime(a.started_real_ns)}};
    if (a.resolved_real_ns != 0) item["endsAt"] = FormatRealTime(a.resolved_real_ns);
    out.push_back(item);
  }
  return out;
}

AlertPusher::AlertPusher(std::string url, SnapshotSource* source, Clock* clock)
    : url_(std::move(url)), source_(source), clock_(clock) {}

AlertPusher::~AlertPusher() { Stop(); }

void AlertPusher::Start() {
  thread_ = StartThread("sentineld-alert", [this] { Loop(); });
}

void AlertPusher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::Status AlertPusher::Post(const std::vector<Alert>& alerts) {
  if (alerts.empty()) return absl::OkStatus();
  httplib::Client client(url_);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  auto res = client.Post(
      "/api/v2/alerts",
      AlertmanagerPayload(alerts).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
      "application/json");
  if (res && res->status / 100 == 2) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("alertmanager push to ", url_, " failed"));
}

void AlertPusher::Loop() {
  int64_t last_resend_ns = clock_->MonoNs();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
      if (stop_) return;
    }
    std::vector<Alert> changes = source_->TakeAlertChanges();
    if (const int64_t now = clock_->MonoNs(); now - last_resend_ns > kResendEveryNs) {
      last_resend_ns = now;
      for (Alert& a : source_->FiringAlerts()) changes.push_back(std::move(a));
    }
    // Not retried here: the firing ones are sent again within a minute.
    if (absl::Status pushed = Post(changes); !pushed.ok())
      spdlog::warn("{}", std::string(pushed.message()));
  }
}

}  // namespace sentinel::collector
