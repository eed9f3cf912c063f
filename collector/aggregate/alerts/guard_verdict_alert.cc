// See guard_verdict_alert.h.
#include "collector/aggregate/alerts/guard_verdict_alert.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

#include "collector/aggregate/alerts/alert_key.h"
#include "collector/aggregate/snapshot.h"
#include "collector/aggregate/wire_fields.h"
#include "common/choice_words.h"

namespace sentinel::collector {

bool GuardVerdictKind(uint16_t wire_kind, AlertKind* kind) {
  switch (wire_kind) {
    case kSentinelVerdictTransport:
      *kind = AlertKind::kTransport;
      return true;
    case kSentinelVerdictPlacement:
      *kind = AlertKind::kPlacement;
      return true;
    case kSentinelVerdictLinkDegraded:
      *kind = AlertKind::kLinkDegraded;
      return true;
    default:
      return false;
  }
}

Alert GuardVerdictAlert(const SentinelWireVerdict& v, AlertKind kind_id, const Alert* existing,
                        bool rank_owned, const std::string& host, int client,
                        const std::string& runbook_base, int64_t now_real_ns) {
  const char* kind = AlertKindName(kind_id);
  Alert a;
  if (existing != nullptr && existing->firing()) a = *existing;
  a.id = AlertKey::GuardVerdict(kind_id, v.comm_hash).Id();
  a.kind = kind_id;
  a.severity =
      v.outcome == kSentinelOutcomeWarn ? AlertSeverity::kWarning : AlertSeverity::kCritical;
  a.comm = CommLabel(v.comm_hash);
  // Only a rank the client owns is listed (bounded by its ranks; AlertBook caps the list).
  if (rank_owned && std::find(a.ranks.begin(), a.ranks.end(), v.rank) == a.ranks.end()) {
    a.ranks.push_back(v.rank);
  }
  std::sort(a.ranks.begin(), a.ranks.end());
  a.host = host;  // this node: the peer's own word on its host is not identity
  a.source = client;
  const std::string expected = SafeString(v.expected, sizeof(v.expected));
  const std::string found = SafeString(v.found, sizeof(v.found));
  const std::string cause = SafeString(v.cause, sizeof(v.cause));
  std::vector<std::string> lines =
      absl::StrSplit(SafeString(v.evidence, sizeof(v.evidence)), '\n', absl::SkipEmpty());
  a.summary = absl::StrFormat("%s mismatch on comm %s (%d rank(s)): expected '%s', found '%s'",
                              kind, a.comm, a.ranks.size(), expected, found);
  a.evidence = {{"expected", expected},
                {"found", found},
                {"cause", cause},
                {"lines", lines},
                {"outcome", rules::OutcomeWord(v.outcome)},
                {"nranks", v.nranks}};
  a.runbook = absl::StrCat(runbook_base, "alert-", kind);
  if (a.started_real_ns == 0) a.started_real_ns = now_real_ns;
  return a;
}

}  // namespace sentinel::collector
