// Node exclusion for the scheduler: from the alert book's firing and recently
// resolved alerts, the hosts a restart should avoid, each with the alert kinds and ids that put it
// on the list. Served at GET /v1/exclude, exported as sentinel_exclude_host on /metrics, printed by
// `sentinelctl exclude`. Pure functions over the alert book: the caller holds the aggregator lock.
//
// Excluding a node acts on every job that would run there, so it rests only on evidence sentineld
// measured itself or can check itself, never on one client's word:
// - an alert from sentineld's own measurements (source -1: the NIC counters and port rates it polls
//   from sysfs) counts as it is, with every host it names;
// - an alert raised from a client's data (straggler, hang, a guard verdict, a net link's latency)
//   is that job's own view. It counts only when corroborated, and then names this node only (its
//   own host, never a far end):
//   - a guard link_degraded verdict that names a port ("mlx5_0:1", or a device) which sentineld's
//     own last poll finds degraded: ACTIVE but slower than the node's fastest ACTIVE port of its
//     link layer, or with error counters growing. The verdict's own threshold is the job's
//     expectation, not the node's; a port that is merely down is not enough (sentineld cannot tell
//     an unused, uncabled port from a failed one);
//   - or client alerts of counted kinds from at least kExcludeCorroboratingUids different kernel
//     uids (SO_PEERCRED) live at the same time: two users' jobs seeing trouble on the node.
// The alerts themselves fire and are shown either way; only the exclusion list is held back.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "collector/aggregate/alert_book.h"
#include "collector/base/alert_kind.h"

namespace sentinel::collector {

struct State;  // aggregator.h

struct ExcludePolicy {
  uint32_t kinds = 0;   // bit (1 << AlertKind) set = alerts of that kind count
  int64_t hold_ns = 0;  // a host stays listed this long after its last alert resolved

  bool Counts(AlertKind kind) const { return (kinds & (1u << static_cast<int>(kind))) != 0; }
};

// ParseExcludeKinds, ExcludeKindsText, kDefaultExcludeKinds: collector/base/alert_kind.h.

struct ExcludedHost {
  std::string host;
  std::vector<std::string> reasons;    // alert kind names, sorted, unique
  std::vector<std::string> alert_ids;  // sorted
  bool firing = false;                 // at least one of its alerts still fires
  int64_t until_real_ns = 0;           // 0 while firing; else last resolution + hold
};

// The hosts an alert names: its host, and for link alerts both ends (evidence send_host /
// recv_host). Unknown ends ("?", empty) are left out.
std::vector<std::string> AlertHosts(const Alert& alert);

// Different kernel uids whose client-raised alerts, live together, corroborate each other.
inline constexpr size_t kExcludeCorroboratingUids = 2;

// What sentineld measured itself, against which client-raised alerts are checked.
struct NodeEvidence {
  // (device, port) of the ports its own NIC poll finds degraded (empty with --nic-poll 0).
  std::vector<std::pair<std::string, int>> degraded_ports;
};
// From the aggregator's state (the caller holds its lock).
NodeEvidence NodeEvidenceOf(const State& state);

// True when the guard verdict alert `alert` (evidence "found") names one of `node`'s degraded
// ports, as "device:port" or as a bare device.
bool VerdictNamesDegradedPort(const Alert& alert, const NodeEvidence& node);

// Hosts to exclude at `now_real_ns`, sorted by host name, by the rule above.
std::vector<ExcludedHost> DeriveExclusions(const AlertBook& book, const ExcludePolicy& policy,
                                           int64_t now_real_ns,
                                           const NodeEvidence& node = NodeEvidence{});
// The same over the aggregator's state: its alert book and its own NIC readings.
std::vector<ExcludedHost> DeriveExclusions(const State& state, const ExcludePolicy& policy,
                                           int64_t now_real_ns);

// The GET /v1/exclude body (schemas/api/exclude.schema.json). The /metrics family is
// ExcludePrometheus (export/prometheus_text.h).
nlohmann::json ExcludeJson(const std::vector<ExcludedHost>& hosts, const ExcludePolicy& policy);

}  // namespace sentinel::collector
