// SENTINEL_ON_HANG=abort (issue 10 §5): when sentineld confirms a hang and tells this process
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
// Nothing here runs on NCCL's hot path except HangAbortIsAborted (one relaxed load while nothing
// was aborted). Never throws.
#pragma once

#include <atomic>
#include <cstdint>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::plugin {

enum class OnHangMode : uint8_t { kOff, kAbort };
// SENTINEL_ON_HANG: unset, "off" or "report" = kOff (the verdict is logged); "abort" = kAbort.
// Anything else is kOff, with *bad = true.
OnHangMode ParseOnHang(const char* value, bool* bad);

// The abort message: one line naming the communicator, the stuck collective, the culprit ranks
// and hosts, and the exclusion list. Pure (tests).
void FormatHangAbortMessage(const SentinelWireHangVerdict& v, bool aborting, char* out, size_t cap);

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
// Waits (bounded) for aborts in progress; for tests.
bool HangAbortWaitIdle(int64_t timeout_ms) noexcept;

}  // namespace sentinel::plugin
