// See inflight_hang_alert.h.
#include "collector/aggregate/alerts/inflight_hang_alert.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "collector/aggregate/alerts/alert_key.h"

namespace sentinel::collector {

Alert InFlightHangAlert(const CommState& comm, const HangVerdict& v, const std::string& host,
                        const Config& config) {
  Alert a;
  for (int rank : v.waiting) {  // raised from the waiting ranks' own state
    auto it = comm.index.find(rank);
    if (it != comm.index.end()) {
      a.source = comm.members[static_cast<size_t>(it->second)]->client;
      break;
    }
  }
  a.id = AlertKey::Hang(comm.hash).Id();
  a.kind = AlertKind::kHang;
  a.severity = AlertSeverity::kCritical;
  a.comm = CommLabel(comm.hash);
  a.owner_uid = comm.uid;
  a.ranks = v.culprits;
  a.host = host;
  nlohmann::json ranks = nlohmann::json::array();
  std::vector<std::string> parts;
  std::vector<std::string> elsewhere;
  for (const HangRank& r : v.ranks) {
    nlohmann::json j = {{"rank", r.rank},
                        {"role", HangRoleName(r.role)},
                        {"enqueued", r.enqueued},
                        {"gpu_started", r.gpu_started},
                        {"completed", r.completed}};
    if (r.role == HangRole::kWaitingElsewhere) {
      j["inside_comm"] = CommLabel(r.elsewhere_comm);
      j["inside_ordinal"] = r.elsewhere_ordinal;
      j["inside_s"] = static_cast<double>(r.elsewhere_ns) / 1e9;
      elsewhere.push_back(absl::StrFormat("rank %d is inside comm %s's collective #%d for %.0f s",
                                          r.rank, CommLabel(r.elsewhere_comm), r.elsewhere_ordinal,
                                          static_cast<double>(r.elsewhere_ns) / 1e9));
    }
    std::string alive;
    if (r.role == HangRole::kPausedOutsideNccl) {
      // What the kernel shows of the paused process, where /proc was read.
      if (r.proc_state != '?') j["proc_state"] = std::string(1, r.proc_state);
      if (r.cpu_share >= 0) j["cpu_share"] = r.cpu_share;
      if (r.io_bytes_per_s >= 0) j["io_bytes_per_s"] = r.io_bytes_per_s;
      alive = absl::StrCat("; working outside NCCL, nothing in flight:",
                           ProcessText(r.proc_state, r.cpu_share, r.io_bytes_per_s));
    }
    ranks.push_back(std::move(j));
    if (IsCulprit(r.role)) {
      parts.push_back(absl::StrFormat("rank %d %s (enqueued %d, gpu_started %d, completed %d%s)",
                                      r.rank, HangRoleName(r.role), r.enqueued, r.gpu_started,
                                      r.completed, alive));
    }
  }
  std::string verdict;
  if (!v.mismatch.empty()) {
    verdict =
        absl::StrCat("mismatched collectives: ", v.mismatch, " (", absl::StrJoin(parts, "; "), ")");
  } else if (!parts.empty()) {
    verdict = absl::StrJoin(parts, "; ");
  } else if (v.outside_node && !elsewhere.empty()) {
    verdict = absl::StrCat("waiting on a rank outside this node (no local rank is behind: ",
                           absl::StrJoin(elsewhere, "; "), ", which waits for another node)");
  } else if (v.outside_node) {
    verdict = "waiting on a rank outside this node (no local rank is behind)";
  } else {
    verdict = "every rank is inside it and none is behind (a device or network fault)";
  }
  if (v.any_busy) {
    absl::StrAppend(&verdict,
                    " (busy_outside_nccl: alive and working outside NCCL, e.g. a checkpoint or an "
                    "evaluation; no abort for it before ",
                    static_cast<double>(config.hang_timeout_busy_ns) / 1e9, " s)");
  }
  if (!v.cycle.empty()) {
    absl::StrAppend(&verdict, "; deadlock, a wait cycle across communicators: ", v.cycle);
  }
  bool any_paused = false;
  for (const HangRank& r : v.ranks) any_paused |= r.role == HangRole::kPausedOutsideNccl;
  if (any_paused) {
    absl::StrAppend(&verdict,
                    " (paused_outside_nccl: working outside NCCL with nothing in flight for "
                    "longer than --hang-timeout-paused, ",
                    static_cast<double>(config.hang_timeout_paused_ns) / 1e9,
                    " s: a pause that long is taken for a hang)");
  }
  a.summary = absl::StrFormat(
      "hang on comm %s: %d local rank(s) stuck for %.0f s in %s (collective #%d, NCCL seq %d): %s",
      a.comm, v.waiting.size(), static_cast<double>(v.waiting_ns) / 1e9, FuncName(v.func),
      v.ordinal, v.seq, verdict);
  a.evidence = {
      {"source", "inflight"},
      {"func", FuncName(v.func)},
      {"seq", v.seq},
      {"ordinal", v.ordinal},
      {"culprits", v.culprits},
      {"waiting_ranks", v.waiting},
      {"waiting_elsewhere_ranks", v.waiting_elsewhere},
      {"ranks", ranks},
      {"outside_node", v.outside_node},
      {"mismatch", v.mismatch},
      {"cycle", v.cycle},
      {"waiting_s", static_cast<double>(v.waiting_ns) / 1e9},
      {"hang_timeout_s", static_cast<double>(config.hang_timeout_ns) / 1e9},
      {"hang_timeout_paused_s", static_cast<double>(config.hang_timeout_paused_ns) / 1e9}};
  a.runbook = absl::StrCat(config.runbook_base, "alert-hang");
  return a;
}

}  // namespace sentinel::collector
