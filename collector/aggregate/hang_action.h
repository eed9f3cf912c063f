// When sentineld tells the waiting ranks of a hung communicator to act (wire type
// 13, SENTINEL_ON_HANG=abort in the plugin). Acting must never hit a communicator that is merely
// slow, so the hang detector's verdict is necessary but not enough:
//   - a culprit is named: some local rank is behind (never launched, kernel never started, or
//     gone). Every rank inside the collective (a long collective, a device or network fault) or
//     a culprit on another node is reported, never acted on from here;
//   - the evidence is live: every rank of the communicator on this node is still reporting its
//     in-flight state (a process that disconnected counts as gone, which is definitive). A paused
//     job (SIGSTOP, a debugger, a suspended container) goes silent, so it never qualifies;
//   - a culprit that is alive and busy outside NCCL (busy_outside_nccl: a checkpoint write, an
//     evaluation) is not acted on until the stuck time reaches busy_timeout_ns (much longer than
//     --hang-timeout), unless another culprit is stuck;
//   - a hang whose culprits are all alive outside NCCL with one of them paused (the verdict's
//     `paused`: a checkpoint, a long sleep) is not acted on while the verdict says so (until
//     --hang-timeout-paused);
//   - the stuck time counts only live, reported time: the waiting ranks have been in the
//     collective for --hang-timeout up to the oldest of the ranks' latest states, counted from
//     when the evidence last became live if that is later (a job resumed after a pause has a
//     stale "in flight since" and gets a full timeout again; a pause that began a moment ago,
//     not yet visible as silence, adds nothing).
// Decided once per stuck collective. Pure: the aggregator holds one HangActionState per
// communicator and calls DecideHangAction on every tick.
#pragma once

#include <cstdint>
#include <vector>

#include "collector/aggregate/hang_detector.h"

namespace sentinel::collector {

struct HangActionParams {
  int64_t timeout_ns = 30LL * 1000000000;  // --hang-timeout
  // A rank's in-flight state older than this is not live. The plugin sends one at least once a
  // second, so this tolerates one late state.
  int64_t live_ns = 2500LL * 1000000;
  // For a hang whose every culprit is busy_outside_nccl (--hang-timeout-busy).
  int64_t busy_timeout_ns = 30LL * 60 * 1000000000;
};

struct HangActionState {
  int64_t live_since_ns = 0;   // every local rank reporting since then (0: not live now)
  uint64_t acted_ordinal = 0;  // the stuck collective already acted on (0: none)
};

enum class HangAction : uint8_t {
  kNone,        // no hang
  kNoCulprit,   // hung, but no local rank is behind: report only
  kNotLive,     // some local rank stopped reporting (paused job): wait
  kConfirming,  // hung with live evidence, but not yet for --hang-timeout of live time
  kBusy,        // the only culprits are alive and busy outside NCCL: not yet for busy_timeout_ns
  kPaused,      // the culprits are alive outside NCCL, one paused: not yet (verdict.paused)
  kAct,         // tell the waiting ranks now
  kDone,        // already acted on this stuck collective
};
const char* HangActionName(HangAction action);

// `ranks`: the communicator's local ranks (as given to EvaluateHang), `verdict` its result at
// `now_ns`. Updates `state` (call it on every tick, hung or not).
HangAction DecideHangAction(const std::vector<InFlightView>& ranks, const HangVerdict& verdict,
                            int64_t now_ns, const HangActionParams& params, HangActionState* state);

}  // namespace sentinel::collector
