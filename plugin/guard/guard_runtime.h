// The guard's process-wide state and its two entry paths: the LD_PRELOAD interposer (fail-fast at
// communicator creation and at the first collective) and the profiler plugin (profiler-only mode:
// warnings and alerts, never failing). Thread-safe; every entry point is noexcept.
#pragma once

#include <atomic>
#include <string>

#include "plugin/guard/expect_source.h"
#include "plugin/guard/expectation.h"
#include "plugin/guard/guard_hooks.h"
#include "plugin/guard/verdict.h"

namespace sentinel::guard {

struct GuardConfig {
  bool disabled = false;  // SENTINEL_DISABLE=1
  bool active = false;    // an expectation is set (or failed to parse)
  Expectation expect;
  Mode mode = Mode::kFail;  // SENTINEL_ON_MISMATCH, else sentineld's on_mismatch, else fail
  ExpectSourceKind source_kind = ExpectSourceKind::kNone;
  std::string source;       // "SENTINEL_EXPECT", the file path, or the node default file
  std::string parse_error;  // non-empty: the expectation did not parse (message with caret)
  // The node default could not be read: said once as a warning, never fails a job (the job did
  // not ask for it; the operator's file is broken).
  bool error_is_warning = false;
};

// Loaded once from the environment (SENTINEL_EXPECT, SENTINEL_EXPECT_FILE, the node default file
// published by sentineld, SENTINEL_ON_MISMATCH). Never fails; problems end up in parse_error.
const GuardConfig& Config();
void ResetForTest();

// NCCL's pncclCommAbort, to abort a communicator we refuse.
using AbortCommFn = int (*)(void* comm);

// The interposer calls these around every communicator-creation API.
void OnCreateBegin() noexcept;
// `comms`/`ncomms`: the communicators the call created (nulls allowed). Returns the result the
// application must see: `result`, or ncclInvalidUsage (5) after aborting them in fail mode.
int OnCreateEnd(const char* api, int result, void* const* comms, int ncomms,
                AbortCommFn abort_fn) noexcept;

// First-collective (runtime connect) check. The fast path is one relaxed load: the counter is
// only a hint that some communicator still has a deferred check; the slow path takes the lock.
extern std::atomic<int> g_pending_collective_checks;
inline bool CollectiveCheckPending() {
  return g_pending_collective_checks.load(std::memory_order_relaxed) != 0;
}
// After a collective on `comm` returned `result`: the result the application must see.
int OnCollectiveEnd(const char* api, void* comm, int result) noexcept;

// Where verdict records go. The guard does not know the plugin core: whoever wires the plugin
// together (plugin/entry/plugin_wiring.cc) points this at the core's EnqueueControlRecord when the
// .so loads; tests point it at a recorder. Null (the default): records are not sent. Returns false
// when the record was refused (counted in ControlRecordsDropped()).
using ControlRecordFn = bool (*)(uint16_t type, const void* payload, size_t size);
void SetControlRecordFn(ControlRecordFn fn) noexcept;
uint64_t ControlRecordsDropped() noexcept;

}  // namespace sentinel::guard
