// See join_hang_alert.h.
#include "collector/aggregate/alerts/join_hang_alert.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "collector/aggregate/alerts/alert_key.h"

namespace sentinel::collector {

Alert JoinHangAlert(const HangSuspect& h, const CommState* comm, const std::string& host,
                    const Config& config, int64_t now_real_ns) {
  const uint64_t hash = h.comm_hash;
  Alert a;
  a.id = AlertKey::Hang(hash).Id();
  a.kind = AlertKind::kHang;
  a.severity = AlertSeverity::kCritical;
  a.comm = CommLabel(hash);
  a.owner_uid = h.uid;
  a.ranks = h.missing;
  a.host = host;
  if (comm != nullptr && !comm->members.empty()) {
    a.source = comm->members.front()->client;
  }
  a.summary = absl::StrFormat(
      "%s seq %d on comm %s: %d local rank(s) arrived and rank(s) %s have not, for %.0f s",
      FuncName(h.func), h.seq, a.comm, h.arrived.size(), absl::StrJoin(h.missing, ","),
      static_cast<double>(h.waiting_ns) / 1e9);
  a.evidence = {{"source", "join"},
                {"func", FuncName(h.func)},
                {"seq", h.seq},
                {"arrived_ranks", h.arrived},
                {"missing_ranks", h.missing},
                {"waiting_s", static_cast<double>(h.waiting_ns) / 1e9},
                {"hang_timeout_s", static_cast<double>(config.hang_timeout_ns) / 1e9}};
  a.runbook = absl::StrCat(config.runbook_base, "alert-hang");
  a.started_real_ns = now_real_ns;
  return a;
}

}  // namespace sentinel::collector
