// Whether a hang verdict is acted on: see hang_action.h.
#include "collector/aggregate/hang_action.h"

#include <algorithm>

namespace sentinel::collector {

const char* HangActionName(HangAction action) {
  switch (action) {
    case HangAction::kNone:
      return "none";
    case HangAction::kNoCulprit:
      return "no_culprit";
    case HangAction::kNotLive:
      return "not_live";
    case HangAction::kConfirming:
      return "confirming";
    case HangAction::kBusy:
      return "busy";
    case HangAction::kPaused:
      return "paused";
    case HangAction::kAct:
      return "act";
    case HangAction::kDone:
      return "done";
  }
  return "unknown";
}

namespace {

// Every local rank still in the communicator reports, or is definitively gone (disconnected).
// *evidence_ns: the time up to which all of them have reported (their oldest latest state).
bool AllLive(const std::vector<InFlightView>& ranks, int64_t now_ns, int64_t live_ns,
             int64_t* evidence_ns) {
  bool any = false;
  *evidence_ns = now_ns;
  for (const InFlightView& r : ranks) {
    if (r.ended || !r.connected) continue;
    if (!r.has_state || now_ns - r.last_update_ns > live_ns) return false;
    *evidence_ns = std::min(*evidence_ns, r.last_update_ns);
    any = true;
  }
  return any;
}

}  // namespace

HangAction DecideHangAction(const std::vector<InFlightView>& ranks, const HangVerdict& verdict,
                            int64_t now_ns, const HangActionParams& params,
                            HangActionState* state) {
  int64_t evidence_ns = now_ns;
  const bool live = AllLive(ranks, now_ns, params.live_ns, &evidence_ns);
  if (!live) {
    state->live_since_ns = 0;
  } else if (state->live_since_ns == 0) {
    state->live_since_ns = now_ns;
  }
  if (!verdict.hung) return HangAction::kNone;
  if (verdict.culprits.empty() || verdict.waiting.empty()) return HangAction::kNoCulprit;
  if (!live) return HangAction::kNotLive;
  if (state->acted_ordinal == verdict.ordinal) return HangAction::kDone;
  if (verdict.paused) return HangAction::kPaused;
  // Stuck time as the ranks have shown it: from when the collective began (or the evidence
  // became live, if later) to the oldest of their latest states, never to `now`: time in which a
  // rank may already be paused without our knowing counts for nothing.
  const int64_t since = std::max(now_ns - verdict.waiting_ns, state->live_since_ns);
  const int64_t stuck_live = evidence_ns - since;
  if (stuck_live < params.timeout_ns) return HangAction::kConfirming;
  bool only_busy = true;
  for (const HangRank& r : verdict.ranks) {
    if (IsCulprit(r.role) && r.role != HangRole::kBusyOutsideNccl) only_busy = false;
  }
  if (only_busy && stuck_live < params.busy_timeout_ns) return HangAction::kBusy;
  state->acted_ordinal = verdict.ordinal;
  return HangAction::kAct;
}

}  // namespace sentinel::collector
