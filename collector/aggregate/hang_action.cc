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
    case HangAction::kAct:
      return "act";
    case HangAction::kDone:
      return "done";
  }
  return "unknown";
}

namespace {

// Every local rank still in the communicator reports, or is definitively gone (disconnected).
bool AllLive(const std::vector<InFlightView>& ranks, int64_t now_ns, int64_t live_ns) {
  bool any = false;
  for (const InFlightView& r : ranks) {
    if (r.ended || !r.connected) continue;
    if (!r.has_state || now_ns - r.last_update_ns > live_ns) return false;
    any = true;
  }
  return any;
}

}  // namespace

HangAction DecideHangAction(const std::vector<InFlightView>& ranks, const HangVerdict& verdict,
                            int64_t now_ns, const HangActionParams& params,
                            HangActionState* state) {
  const bool live = AllLive(ranks, now_ns, params.live_ns);
  if (!live) {
    state->live_since_ns = 0;
  } else if (state->live_since_ns == 0) {
    state->live_since_ns = now_ns;
  }
  if (!verdict.hung) return HangAction::kNone;
  if (verdict.culprits.empty() || verdict.waiting.empty()) return HangAction::kNoCulprit;
  if (!live) return HangAction::kNotLive;
  if (state->acted_ordinal == verdict.ordinal) return HangAction::kDone;
  const int64_t stuck_live = std::min(verdict.waiting_ns, now_ns - state->live_since_ns);
  if (stuck_live < params.timeout_ns) return HangAction::kConfirming;
  state->acted_ordinal = verdict.ordinal;
  return HangAction::kAct;
}

}  // namespace sentinel::collector
