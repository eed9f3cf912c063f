// The alert book: every alert sentineld raised, firing or recently resolved. Fire and resolve
// (with a reason), time- and count-bounded retention of resolved alerts, and the queue of state
// changes that the Alertmanager pusher drains. Not thread-safe: the aggregator owns it under its
// lock.
#pragma once

#include <array>
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

// A uid no client has (no such client, or no user behind an alert): SO_PEERCRED never reports it.
inline constexpr uint32_t kNoUid = UINT32_MAX;

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
  // The owner uid of its communicator (kNoUid: a node-level alert). An alert is identified by
  // (owner_uid, id): two users' communicators of one hash raise two alerts of one id.
  uint32_t owner_uid = kNoUid;
  // Raised on a client's own word (a guard verdict), not judged by sentineld from measurements:
  // such alerts hold at most half the firing table, so they never crowd out sentineld's own.
  bool client_verdict = false;

  bool firing() const { return state == AlertState::kFiring; }
};

// What identifies an alert in the book: (owner uid, id).
using AlertRef = std::pair<uint32_t, std::string>;
inline AlertRef RefOf(const Alert& a) { return {a.owner_uid, a.id}; }

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

  // Raises `alert`, or refreshes the firing alert of its (owner uid, id) (summary, evidence; the
  // start time and source are kept). A resolved alert of the same identity is replaced by the new
  // firing one. Returns true when the alert newly fired; false for a refresh, and for a new alert
  // over the bounds, which is dropped and counted in refused(). The bounds: kMaxFiringPerSource
  // for its source client (sentineld's own alerts, source -1, have none), max_firing in total, of
  // which client verdicts (client_verdict) hold at most half. When the table (or the verdicts'
  // half) is full, an alert of a uid holding less than an equal share of it takes the room of the
  // newest alert of the uid holding the most (counted in refused() too), so one user at the bound
  // never keeps another's alerts out; a judged alert takes a verdict's room first.
  bool Fire(Alert alert, int64_t now_real_ns);
  // Resolves the firing alert (owner_uid, id); false when none is firing.
  bool Resolve(uint32_t owner_uid, const std::string& id, ResolveReason reason,
               int64_t now_real_ns);
  // A node-level alert (owner kNoUid).
  bool Resolve(const std::string& id, ResolveReason reason, int64_t now_real_ns) {
    return Resolve(kNoUid, id, reason, now_real_ns);
  }
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

  bool IsFiring(uint32_t owner_uid, const std::string& id) const;
  const Alert* Find(uint32_t owner_uid, const std::string& id) const;
  // Any owner's alert of that id (the node-level one first): for callers that know only one user.
  bool IsFiring(const std::string& id) const;
  const Alert* Find(const std::string& id) const;
  const absl::flat_hash_map<AlertRef, Alert>& all() const { return alerts_; }
  int FiringCount() const;

  // Alerts whose state changed since the last call (bounded: nobody may be draining).
  std::vector<Alert> TakeChanges();
  // Evicted for the count bound or the retention (sentinel_evicted_total{what="alert"}).
  uint64_t evicted() const { return evicted_; }
  // New alerts dropped for the firing bounds.
  uint64_t refused() const { return refused_; }
  size_t FiringOf(int source) const;
  // Firing alerts charged to `uid` (the source client's uid, else the owner's).
  size_t FiringOfUid(uint32_t uid) const;

 private:
  void PushChange(const Alert& alert);
  void CountFiring(const Alert& alert, int delta);
  void ForgetResolved(const Alert& alert);
  // Room for `alert` in a full table or verdicts' half, taken from another uid (see Fire); false
  // when its uid already holds its share.
  bool MakeRoom(const Alert& alert, bool total_full);
  static uint32_t ChargedUid(const Alert& alert) {
    return alert.source >= 0 ? alert.source_uid : alert.owner_uid;
  }

  int64_t retention_ns_;
  size_t max_resolved_;
  size_t max_firing_;
  size_t max_firing_per_source_;
  size_t firing_ = 0;
  size_t firing_verdicts_ = 0;
  absl::flat_hash_map<int, size_t> firing_by_source_;
  // Firing alerts per charged uid: [0] judged by sentineld, [1] client verdicts.
  std::array<absl::flat_hash_map<uint32_t, size_t>, 2> firing_by_uid_;
  absl::flat_hash_map<int, std::deque<AlertRef>> resolved_by_source_;  // oldest first
  uint64_t refused_ = 0;
  absl::flat_hash_map<AlertRef, Alert> alerts_;
  std::deque<AlertRef> resolved_order_;  // oldest resolution first
  // Resolved alerts of clients that left: (alert, resolved_real_ns), oldest first. The time tells
  // the resolution apart from a later one of the same alert.
  std::deque<std::pair<AlertRef, int64_t>> resolved_of_gone_;
  // A change is the alert's identity and the state it changed to; TakeChanges copies the alert
  // then (not at every change: a burst of changes nobody drains would hold a copy of each alert).
  struct Change {
    AlertRef id;
    AlertState state = AlertState::kFiring;
    ResolveReason reason = ResolveReason::kNone;
    int64_t resolved_real_ns = 0;
  };
  std::deque<Change> changes_;
  uint64_t evicted_ = 0;
};

}  // namespace sentinel::collector
