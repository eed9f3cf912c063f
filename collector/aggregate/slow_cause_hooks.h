// Where the aggregator hands SlowCause (slow_cause.h) what it needs, under its lock: each fully
// joined collective, each net-plugin link report, and the settling (with the network findings)
// after a NIC poll and on every tick. One call at each place, so the aggregator's own files hold
// no slow-cause logic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

struct State;
struct CommState;
struct JoinSlot;
struct JoinCell;

// A collective of `comm` joined with every active local rank (not a partial join): its slot and
// cells (one per local index). Judged only when every rank has its GPU times.
void SlowCauseObserveJoin(State* state, const CommState& comm, int func, const JoinSlot& slot,
                          const JoinCell* cells);
// A NetConnStats report already taken by State::net (its send end: latency over time).
void SlowCauseNoteLink(State* state, const SentinelWireNetConnStats& stats);
// Settles what can be settled at `now_mono_ns` and fires / resolves the network findings
// (alerts/slow_network_alert.h) in state->alerts.
void SlowCauseSettle(State* state, int64_t now_mono_ns, int64_t now_real_ns,
                     const std::string& runbook_base);

}  // namespace sentinel::collector
