// The guard verdict alerts: a rank's guard (transport, placement or link check at CommInit) found
// a mismatch, one alert per communicator and check, listing the local ranks that reported it.
#pragma once

#include <cstdint>
#include <string>

#include "collector/aggregate/alert_book.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

// The alert kind of a verdict's wire kind (kSentinelVerdict*): false for a kind we do not know.
bool GuardVerdictKind(uint8_t wire_kind, AlertKind* kind);

// The alert for verdict `v` (not a pass) of check `kind` from `client`. `existing` is the firing
// alert of that key, if any: its ranks and start are kept and `v.rank` is added when
// `rank_owned` (the client owns that rank). `now_real_ns` starts a new one.
Alert GuardVerdictAlert(const SentinelWireVerdict& v, AlertKind kind, const Alert* existing,
                        bool rank_owned, const std::string& host, int client,
                        const std::string& runbook_base, int64_t now_real_ns);

}  // namespace sentinel::collector
