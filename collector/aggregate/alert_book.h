// The alert book: every alert sentineld raised, firing or recently resolved. Fire and resolve
// (with a reason), time- and count-bounded retention of resolved alerts, and the queue of state
// changes that the Alertmanager pusher drains. Not thread-safe: the aggregator owns it under its
// lock.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "collector/base/alert_kind.h"

namespace sentinel::collector {

enum class AlertSeverity : uint8_t { kInfo, kWarning, kCritical };
enum class AlertState : uint8_t { kFiring, kResolved };

// Why a firing alert stopped.
enum class ResolveReason : uint8_t {
  kNone,     // still firing
  kCleared,  // the condition is gone (the rank caught up, the collective completed, ...)
  kEnded,    // the communicator ended or its processes are gone
};

// Names used in JSON, Prometheus labels and Alertmanager labels (AlertKindName: alert_kind.h).
const char* AlertSeverityName(AlertSeverity severity);
const char* AlertStateName(AlertState state);
const char* ResolveReasonName(ResolveReason reason);  // kNone -> "" (JSON null)

struct Alert {
  std::string id;
  AlertKind kind = AlertKind::kStraggler;
  AlertSeverity severity = AlertSeverity::kWarning;
  AlertState state = AlertState::kFiring;
  ResolveReason resolve_reason = ResolveReason::kNone;
  std::string comm;  // empty for node-level alerts
  std::vector<int> ranks;
  std::string host;
  std::string summary;
  nlohmann::json evidence = nlohmann::json::object();
  std::string runbook;
  int64_t started_real_ns = 0;
  int64_t resolved_real_ns = 0;  // 0 = still firing
  // The client whose data raised it (-1: sentineld's own measurements, e.g. the NIC counters).
  // Not shown: it bounds how many alerts one client can keep firing.
  int source = -1;
  // That client's kernel uid (SO_PEERCRED; UINT32_MAX: none or unknown). Node exclusion counts a
  // client-raised alert only when other uids' alerts corroborate it (exclusion.h).
  uint32_t source_uid = UINT32_MAX;

  bool firing() const { return state == AlertState::kFiring; }
};

class AlertBook {
 public:
  // Bounds on firing alerts, whatever the peers send: in total, and per source client.
  static constexpr size_t kMaxFiring = 1024;
  static constexpr size_t kMaxFiringPerSource = 32;
  // Resolved alerts kept per source client (the newest); the rest are evicted.
  static constexpr size_t kMaxResolvedPerSource = 8;
  // Ranks listed per alert; the rest are counted in evidence "ranks_omitted".
  static constexpr size_t kMaxRanksPerAlert = 64;
  // Resolved alerts kept, in total, of clients that left (the newest; SourceGone).
  static constexpr size_t kMaxResolvedOfGoneSources = 32;

  // Resolved alerts are kept for `retention_ns` after they resolved, and at most `max_resolved`.
  AlertBook(int64_t retention_ns, size_t max_resolved, size_t max_firing = kMaxFiring,
            size_t max_firing_per_source = kMaxFiringPerSource)
      : retention_ns_(retention_ns),
        max_resolved_(max_resolved),
        max_firing_(max_firing),
        max_firing_per_source_(max_firing_per_source) {}

  // Raises `alert`, or refreshes the firing alert of that id (summary, evidence; the start time and
  // source are kept). A resolved alert of the same id is replaced by the new firing one. Returns
  // true when the alert newly fired; false for a refresh, and for a new alert over the bounds
  // (kMaxFiring in total, kMaxFiringPerSource for its source client), which is dropped and counted
  // in refused(). Sentineld's own alerts (source -1) count only against the total.
  bool Fire(Alert alert, int64_t now_real_ns);
  // Resolves the firing alert `id`; false when none is firing.
  bool Resolve(const std::string& id, ResolveReason reason, int64_t now_real_ns);
  // Resolves every firing alert for which `pred` holds. Returns how many.
  int ResolveIf(const std::function<bool(const Alert&)>& pred, ResolveReason reason,
                int64_t now_real_ns);
  // Drops resolved alerts past the retention. Returns how many were dropped.
  uint64_t Expire(int64_t now_real_ns);
  // Client `source` left: its resolved alerts keep id, kind, summary, ranks and times but lose
  // bulky evidence (strings over 64 bytes, lists over 16 items), and join one history shared by
  // every client that left, of which the newest kMaxResolvedOfGoneSources stay. The table and
  // the change queue give back the room they no longer need, so that memory returns close to
  // idle after a burst of short-lived clients.
  void SourceGone(int source);

  bool IsFiring(const std::string& id) const;
  const Alert* Find(const std::string& id) const;
  const absl::flat_hash_map<std::string, Alert>& all() const { return alerts_; }
  int FiringCount() const;

  // Alerts whose state changed since the last call (bounded: nobody may be draining).
  std::vector<Alert> TakeChanges();
  // Evicted for the count bound or the retention (sentinel_evicted_total{what="alert"}).
  uint64_t evicted() const { return evicted_; }
  // New alerts dropped for the firing bounds.
  uint64_t refused() const { return refused_; }
  size_t FiringOf(int source) const;

 private:
  void PushChange(const Alert& alert);
  void CountFiring(int source, int delta);
  void ForgetResolved(const Alert& alert);

  int64_t retention_ns_;
  size_t max_resolved_;
  size_t max_firing_;
  size_t max_firing_per_source_;
  size_t firing_ = 0;
  absl::flat_hash_map<int, size_t> firing_by_source_;
  absl::flat_hash_map<int, std::deque<std::string>> resolved_by_source_;  // oldest first
  uint64_t refused_ = 0;
  absl::flat_hash_map<std::string, Alert> alerts_;
  std::deque<std::string> resolved_order_;  // oldest resolution first
  // Resolved alerts of clients that left: (id, resolved_real_ns), oldest first. The time tells
  // the resolution apart from a later one of the same id.
  std::deque<std::pair<std::string, int64_t>> resolved_of_gone_;
  // A change is the alert's id and the state it changed to; TakeChanges copies the alert then
  // (not at every change: a burst of changes nobody drains would hold a copy of each alert).
  struct Change {
    std::string id;
    AlertState state = AlertState::kFiring;
    ResolveReason reason = ResolveReason::kNone;
    int64_t resolved_real_ns = 0;
  };
  std::deque<Change> changes_;
  uint64_t evicted_ = 0;
};

}  // namespace sentinel::collector
