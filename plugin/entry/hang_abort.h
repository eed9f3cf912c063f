// SENTINEL_ON_HANG=abort: when sentineld confirms a hang and tells this process
// (wire type 13 on the plugin's own connection, read by the collector sink on the drainer
// thread), abort the waiting rank's communicator with NCCL's ncclCommAbort, from a thread of our
// own, so that the job fails within seconds instead of at NCCL's or PyTorch's watchdog.
//
// Only the LD_PRELOAD interposer sees ncclComm_t handles: a communicator created by a blocking
// create call on the application's thread is paired with the commHash/rank NCCL hands the
// profiler's init on that same thread. Without LD_PRELOAD, abort mode says once that it needs it
// and stays passive. After we aborted a communicator, the interposer answers the application's
// own calls on that (freed) handle: destroy/abort succeed without reaching NCCL, the async error
// is ncclRemoteError, collectives return ncclRemoteError.
//
// A verdict is evidence from a peer, not an order: before acting (or reporting) the plugin checks
// it against its own in-flight state (plugin/core/in_flight.h). It acts only when the verdict names
// this rank's own oldest incomplete collective on that communicator (the ordinal and the NCCL
// seqNumber both) and the rank's own CLOCK_MONOTONIC says it has been inside it at least as long as
// the verdict claims (sentineld tells each waiting rank its own time, measured from the entry time
// that rank reported), less a small fixed tolerance for clock reading and transfer delay
// (kVerdictClockToleranceNs). The claim must also reach half the daemon's own --hang-timeout,
// carried in the verdict (kVerdictTimeoutShareDivisor), and that timeout must be at least
// kMinVerdictHangTimeoutNs: without both, a claim of a few nanoseconds would pass the clock check
// for any collective in flight. Otherwise
// it counts the verdict (HangVerdictsIgnored), writes that it ignored it (rate limited) and goes
// on. Every wire string is escaped (common/wire_text.h) before it reaches stderr or the log.
//
// Nothing here runs on NCCL's hot path except HangAbortIsAborted (one relaxed load while nothing
// was aborted). Never throws.
#pragma once

#include <atomic>
#include <cstdint>

#include "plugin/core/in_flight.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {

enum class OnHangMode : uint8_t { kOff, kAbort };
// SENTINEL_ON_HANG: unset, "off" or "report" = kOff (the verdict is logged); "abort" = kAbort.
// Anything else is kOff, with *bad = true.
OnHangMode ParseOnHang(const char* value, bool* bad);

// The abort message: one line naming the communicator, the stuck collective, the culprit ranks
// and hosts, and the exclusion list (wire strings escaped: control bytes as \xNN). Pure (tests).
void FormatHangAbortMessage(const SentinelWireHangVerdict& v, bool aborting, char* out, size_t cap);

// How a verdict compares with the rank's own state.
enum class VerdictCheck : uint8_t {
  kConfirmed,        // its own oldest incomplete collective, in it at least as long as claimed
  kUnknownComm,      // no live communicator context with that (comm_hash, rank) in this process
  kNothingInFlight,  // the rank has no incomplete collective on it
  kUnverifiable,     // its oldest one's ring entry was overwritten (over 256 queued behind it)
  kOtherCollective,  // another ordinal or another NCCL seqNumber than its oldest incomplete one
  kTooYoung,         // inside it for less than claimed, by the rank's own clock
  kBelowTimeout,     // the claim is under half the daemon's --hang-timeout it carries
  kTimeoutTooShort,  // that --hang-timeout is below kMinVerdictHangTimeoutNs
};
// How much longer than the rank's own time inside the collective a verdict may claim: sentineld
// measures from the very entry time the rank reported, before the rank reads its clock, so the
// claim is normally shorter; this covers clock reading and a cached entry time (50 ms).
inline constexpr int64_t kVerdictClockToleranceNs = 50'000'000;
// The shortest --hang-timeout a verdict may carry (1 s): the plugin sends its in-flight state
// at least once a second (InFlight, schemas/wire/wire_format.md), so sentineld cannot
// have told a stuck collective from a slow one in less; below it the clock check above would be
// all tolerance.
inline constexpr int64_t kMinVerdictHangTimeoutNs = 1'000'000'000;
// The claim must be at least the carried --hang-timeout divided by this. sentineld confirms a
// hang when its first waiting rank passes the timeout and tells every waiting rank its own time,
// so a rank that entered later is told less: half the timeout leaves room for ranks that arrived
// up to half the timeout after the first, and a forged claim still needs this rank inside the
// collective for half the daemon's timeout (0.5 s at the floor) by its own clock.
inline constexpr int64_t kVerdictTimeoutShareDivisor = 2;
// Pure (tests): `found`/`snap` = the rank's own state, `now_ns` its CLOCK_MONOTONIC. *own_ns: how
// long it has been in its oldest incomplete collective (0 when nothing is in flight).
VerdictCheck CheckHangVerdict(const SentinelWireHangVerdict& v, bool found,
                              const InFlightSnapshot& snap, int64_t now_ns, int64_t* own_ns);
// The rank's own state of (comm_hash, rank); false when this process has no such live context.
using InFlightLookupFn = bool (*)(uint64_t comm_hash, int rank, InFlightSnapshot* out);
// Tests replace the lookup (null: the profiler core's SnapshotInFlight).
void HangAbortSetInFlightLookup(InFlightLookupFn fn) noexcept;

using CommAbortFn = int (*)(void* comm);
// The interposer's NCCL pncclCommAbort (its presence means LD_PRELOAD is in effect).
void HangAbortSetAbortFn(CommAbortFn fn) noexcept;
// Around a communicator-creation call on the application's thread.
void HangAbortBeginCreate() noexcept;
void HangAbortNoteProfilerInit(uint64_t comm_hash, int rank) noexcept;  // profiler init
void HangAbortEndCreate(void* comm) noexcept;                           // the created handle
// The application destroys or aborts `comm` itself. True: we already aborted it (the handle is
// freed): do not call NCCL with it.
bool HangAbortHostTeardown(void* comm) noexcept;

extern std::atomic<int> g_hang_aborted_comms;
bool HangAbortIsAbortedSlow(void* comm) noexcept;
inline bool HangAbortIsAborted(void* comm) noexcept {
  return g_hang_aborted_comms.load(std::memory_order_relaxed) != 0 && HangAbortIsAbortedSlow(comm);
}

// A verdict from sentineld (drainer thread). Decides, logs, and starts the abort thread.
void OnHangVerdict(const SentinelWireHangVerdict& verdict) noexcept;
// Verdicts this process refused (any VerdictCheck but kConfirmed), since it started.
uint64_t HangVerdictsIgnored() noexcept;
// Waits (bounded) for aborts in progress; for tests.
bool HangAbortWaitIdle(int64_t timeout_ms) noexcept;

}  // namespace sentinel::plugin
