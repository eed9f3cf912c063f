// Captures NCCL's own log for the guard without changing what the user sees of it
// (plugin/guard/README.md "Log capture"). The preload constructor redirects NCCL's log to a memfd
// we own (NCCL can never block on it); a forwarder copies to the user's own destination exactly the
// bytes they would have seen, and feeds every line to the NCCL log parser.
#pragma once

#include <atomic>
#include <string>
#include <string_view>

#include "plugin/base/status.h"
#include "plugin/guard/nccl_log_parser.h"

namespace sentinel::guard {

enum class CaptureMode {
  kOff,          // no capture (no expectation, disabled, not preloaded)
  kFilter,       // user level below INFO: we raised it; forward only the lines their level shows
  kVerbatim,     // user asked for INFO with INIT: settings untouched, everything forwarded as is
  kUnavailable,  // user INFO without INIT: settings untouched, no log evidence
};

// NCCL_DEBUG value -> level 0 (unset/NONE) .. 5 (TRACE), as docs/nccl-facts.md "2.2 Log levels".
int NcclDebugLevel(const char* value);
// Whether NCCL_DEBUG_SUBSYS (null: unset, default INIT,BOOTSTRAP,ENV) shows INIT lines.
bool SubsysShowsInit(const char* value);
// Whether NCCL_DEBUG_SUBSYS (null: unset) shows lines during collectives (anything beyond INIT,
// BOOTSTRAP and ENV).
bool SubsysShowsPerCallLines(const char* value);
// The capture decision for the user's settings.
CaptureMode DecideCaptureMode(const char* nccl_debug, const char* nccl_debug_subsys);

// Turns captured bytes into (a) parsed evidence and (b) the bytes the user would have seen.
// Pure and testable; not thread-safe.
class LineForwarder {
 public:
  LineForwarder(CaptureMode mode, int user_level) : mode_(mode), user_level_(user_level) {}
  // Complete lines are parsed into `ev` and their visible form appended to `out`.
  void Feed(std::string_view bytes, LogEvidence* ev, std::string* out);
  // End of input: a trailing partial line is handled as a line.
  void Finish(LogEvidence* ev, std::string* out);

 private:
  void Line(std::string_view line, bool had_newline, LogEvidence* ev, std::string* out);

  CaptureMode mode_;
  int user_level_;
  std::string partial_;
  int pending_blank_ = 0;  // blank lines held back: NCCL prints one before every WARN line
};

// From the LD_PRELOAD constructor only: getenv/setenv/memfd_create, no threads, no allocation
// beyond the environment's. Does nothing unless an expectation is set and we are preloaded.
void InstallLogCapture(bool preloaded) noexcept;
// Starts the forwarder thread (once; called at the first interposed communicator creation). Not
// ok: no thread (the evidence is then drained synchronously at verdict time and at exit).
plugin::Status StartLogForwarder() noexcept;
// Drains what NCCL wrote so far and copies the evidence into `out`. False when no log evidence
// can exist (`reason` then says why).
plugin::Status SnapshotLogEvidence(LogEvidence* out);
// Drains on the application's thread at the return of an interposed NCCL call, so that what NCCL
// printed during the call reaches the user's stream before the program prints again.
void DrainLogAfterCall() noexcept;
// Set once by the constructor: the user's settings show lines during every collective.
extern std::atomic<bool> g_drain_after_collectives;
// Collectives left to drain after: refilled by every creation/teardown call and by every drain
// that found new lines (NCCL's lazy connection set-up prints during the first collectives), and
// run down by drains that found nothing, so a steady job pays one relaxed load per collective.
extern std::atomic<int> g_collective_drains;
constexpr int kCollectiveDrainsAfterQuiet = 32;
void DrainLogAfterCollectiveSlow() noexcept;
// At the return of a collective: drain only when it can have printed (an error, per-call
// subsystems the user asked for, or shortly after a creation).
inline void DrainLogAfterCollective(int result) noexcept {
  if (__builtin_expect(result != 0 || g_drain_after_collectives.load(std::memory_order_relaxed) ||
                           g_collective_drains.load(std::memory_order_relaxed) > 0,
                       0)) {
    DrainLogAfterCollectiveSlow();
  }
}
// Final drain (library destructor), so that the user's last lines are not lost.
void DrainLogCaptureAtExit() noexcept;
CaptureMode CurrentCaptureMode();

}  // namespace sentinel::guard
