// Node exclusion for the scheduler: from the alert book's firing and recently
// resolved alerts, the hosts a restart should avoid, each with the alert kinds and ids that put it
// on the list. Served at GET /v1/exclude, exported as sentinel_exclude_host on /metrics, printed by
// `sentinelctl exclude`. Pure functions over the alert book: the caller holds the aggregator lock.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collector/aggregate/alert_book.h"
#include "collector/base/alert_kind.h"

namespace sentinel::collector {

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

// Hosts to exclude at `now_real_ns`, sorted by host name.
std::vector<ExcludedHost> DeriveExclusions(const AlertBook& book, const ExcludePolicy& policy,
                                           int64_t now_real_ns);

// The GET /v1/exclude body (schemas/api/exclude.schema.json).
nlohmann::json ExcludeJson(const std::vector<ExcludedHost>& hosts, const ExcludePolicy& policy);
// sentinel_exclude_host{host,reason} 1 per listed host and reason, with HELP/TYPE.
std::string ExcludePrometheus(const std::vector<ExcludedHost>& hosts);

}  // namespace sentinel::collector
