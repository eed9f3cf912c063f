// SENTINEL_ON_HANG=abort: see hang_abort.h.
#include "plugin/entry/hang_abort.h"

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/attributes.h"

#include "common/sentinel_env.h"
#include "common/wire_text.h"
#include "plugin/base/clock.h"
#include "plugin/base/log.h"
#include "plugin/base/no_destructor.h"
#include "plugin/base/raw_log.h"
#include "plugin/base/thread.h"
#include "plugin/core/in_flight_monitor.h"
#include "plugin/core/names.h"
#include "plugin/core/profiler_core.h"
#include "plugin/transport/collector_sink.h"

namespace sentinel::plugin {

ABSL_CONST_INIT std::atomic<int> g_hang_aborted_comms{0};

namespace {

constexpr int kSlots = 256;

// One communicator created through the interposer. Writers hold Registry::mu; the collective
// path reads `comm`/`aborted` without it (atomics).
struct Slot {
  std::atomic<void*> comm{nullptr};
  uint64_t comm_hash = 0;
  int rank = -1;
  std::atomic<bool> aborted{false};
};

struct Registry {
  std::mutex mu;
  Slot slots[kSlots];
  std::atomic<CommAbortFn> abort_fn{nullptr};
  std::atomic<int> in_progress{0};
};

Registry& R() {
  static NoDestructor<Registry> r;  // never destroyed: the abort thread may outlive static teardown
  return *r;
}

// The profiler init NCCL ran on this thread during the current create call.
ABSL_CONST_INIT thread_local bool tls_init_seen = false;
ABSL_CONST_INIT thread_local uint64_t tls_init_hash = 0;
ABSL_CONST_INIT thread_local int tls_init_rank = -1;

OnHangMode Mode() {
  // A bad value was told once on stderr by the registry (common/sentinel_env.h).
  static const OnHangMode mode = [] {
    bool bad = false;
    return ParseOnHang(rules::ProcessSentinelEnv().Text(rules::Var::kOnHang), &bad);
  }();
  return mode;
}

// The profiler core's view of one communicator context (drainer thread: allocates a little).
bool CoreInFlightLookup(uint64_t comm_hash, int rank, InFlightSnapshot* out) {
  static NoDestructor<std::vector<InFlightSample>> samples;  // never destroyed, like the thread
  SnapshotInFlight(samples.get());
  for (const InFlightSample& s : *samples) {
    if (s.comm_hash == comm_hash && s.rank == rank) {
      *out = s.snap;
      return true;
    }
  }
  return false;
}

ABSL_CONST_INIT std::atomic<InFlightLookupFn> g_lookup{&CoreInFlightLookup};

// Lines a peer can cause: a few per minute, with the count of the ones left out. Verdicts this
// rank acts on are bounded by themselves (one abort per communicator).
ABSL_CONST_INIT LogRateLimiter g_ignored_lines(5, 60'000'000'000);
ABSL_CONST_INIT LogRateLimiter g_reported_lines(5, 60'000'000'000);
ABSL_CONST_INIT std::atomic<uint64_t> g_ignored{0};

const char* CheckText(VerdictCheck c) {
  switch (c) {
    case VerdictCheck::kConfirmed:
      return "confirmed";
    case VerdictCheck::kUnknownComm:
      return "this process has no such communicator rank";
    case VerdictCheck::kNothingInFlight:
      return "this rank has no incomplete collective on it";
    case VerdictCheck::kUnverifiable:
      return "this rank cannot tell which collective is its oldest incomplete one";
    case VerdictCheck::kOtherCollective:
      return "it is not this rank's oldest incomplete collective";
    case VerdictCheck::kTooYoung:
      return "this rank has not been inside it that long by its own clock";
    case VerdictCheck::kBelowTimeout:
      return "the claimed time is under half the --hang-timeout it carries";
    case VerdictCheck::kTimeoutTooShort:
      return "the --hang-timeout it carries is below the 1 s a rank accepts";
  }
  return "unknown";
}

void LogIgnored(const SentinelWireHangVerdict& v, VerdictCheck c, const InFlightSnapshot& snap,
                int64_t own_ns) {
  g_ignored.fetch_add(1, std::memory_order_relaxed);
  uint64_t suppressed = 0;
  if (!g_ignored_lines.Allow(MonoNs(), &suppressed)) return;
  char own[160] = "";
  if (c == VerdictCheck::kBelowTimeout || c == VerdictCheck::kTimeoutTooShort) {
    std::snprintf(own, sizeof(own), " (claimed %.3f s, --hang-timeout %.3f s)",
                  static_cast<double>(v.waiting_ns) / 1e9,
                  static_cast<double>(v.hang_timeout_ns) / 1e9);
  } else if (c == VerdictCheck::kOtherCollective || c == VerdictCheck::kTooYoung) {
    const uint64_t oldest = snap.completed + 1;
    std::snprintf(
        own, sizeof(own), " (its oldest incomplete: collective #%llu, NCCL seq %llu, for %.1f s)",
        static_cast<unsigned long long>(oldest), static_cast<unsigned long long>(snap.oldest_seq),
        static_cast<double>(own_ns) / 1e9);
  }
  char more[64] = "";
  if (suppressed > 0) {
    std::snprintf(more, sizeof(more), " [%llu similar lines suppressed]",
                  static_cast<unsigned long long>(suppressed));
  }
  RawLog(
      "ignored a hang verdict from sentineld for communicator 0x%016llx rank %d: collective "
      "#%llu (NCCL seq %llu) stuck %.1f s: %s%s; nothing done%s",
      static_cast<unsigned long long>(v.comm_hash), v.rank,
      static_cast<unsigned long long>(v.ordinal), static_cast<unsigned long long>(v.seq),
      static_cast<double>(v.waiting_ns) / 1e9, CheckText(c), own, more);
}

void AbortThread(void* comm, SentinelWireHangVerdict v) {
  Registry& r = R();
  const CommAbortFn fn = r.abort_fn.load(std::memory_order_acquire);
  const int rc = fn != nullptr ? fn(comm) : -1;
  RawLog("SENTINEL_ON_HANG=abort: ncclCommAbort of communicator 0x%016llx rank %d returned %d",
         static_cast<unsigned long long>(v.comm_hash), v.rank, rc);
  r.in_progress.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace

OnHangMode ParseOnHang(const char* value, bool* bad) {
  *bad = false;
  if (value == nullptr || value[0] == '\0') return OnHangMode::kOff;
  rules::EnvValue v;  // off|report|abort, the registry's rule
  if (!rules::ParseEnvValue(rules::Var::kOnHang, value, &v)) {
    *bad = true;
    return OnHangMode::kOff;
  }
  return v.choice == 2 ? OnHangMode::kAbort : OnHangMode::kOff;
}

void FormatHangAbortMessage(const SentinelWireHangVerdict& v, bool aborting, char* out,
                            size_t cap) {
  // The strings come from the wire: bounded, whatever their terminators, and escaped (a peer's
  // newline or terminal escape must not reach a person's screen as such).
  char culprits[sizeof(v.culprits) + 64];
  char exclude[sizeof(v.exclude) + 64];
  rules::EscapeWireText(v.culprits, sizeof(v.culprits), culprits, sizeof(culprits));
  rules::EscapeWireText(v.exclude, sizeof(v.exclude), exclude, sizeof(exclude));
  std::snprintf(out, cap,
                "%s communicator 0x%016llx rank %d: sentineld confirmed a hang in %s (collective "
                "#%llu, NCCL seq %llu), stuck %.1f s (--hang-timeout %.1f s); culprit: %s; "
                "exclude on restart: %s",
                aborting ? "SENTINEL_ON_HANG=abort: aborting" : "hang reported on",
                static_cast<unsigned long long>(v.comm_hash), v.rank, FuncName(v.func),
                static_cast<unsigned long long>(v.ordinal), static_cast<unsigned long long>(v.seq),
                static_cast<double>(v.waiting_ns) / 1e9,
                static_cast<double>(v.hang_timeout_ns) / 1e9,
                culprits[0] != '\0' ? culprits : "unknown", exclude[0] != '\0' ? exclude : "none");
}

VerdictCheck CheckHangVerdict(const SentinelWireHangVerdict& v, bool found,
                              const InFlightSnapshot& snap, int64_t now_ns, int64_t* own_ns) {
  *own_ns = 0;
  if (!found) return VerdictCheck::kUnknownComm;
  if (snap.enqueued <= snap.completed) return VerdictCheck::kNothingInFlight;
  if (!snap.oldest_valid || snap.oldest_since_ns <= 0) return VerdictCheck::kUnverifiable;
  *own_ns = now_ns - snap.oldest_since_ns;
  if (v.ordinal != snap.completed + 1 || v.seq != snap.oldest_seq) {
    return VerdictCheck::kOtherCollective;
  }
  if (v.waiting_ns <= 0) return VerdictCheck::kTooYoung;  // nothing to confirm
  // The daemon's own bar: a bar under the floor makes any claim a few ticks of this rank's
  // clock, and a claim far under the bar is no hang by the daemon's rules.
  if (v.hang_timeout_ns < kMinVerdictHangTimeoutNs) return VerdictCheck::kTimeoutTooShort;
  if (v.waiting_ns < v.hang_timeout_ns / kVerdictTimeoutShareDivisor) {
    return VerdictCheck::kBelowTimeout;
  }
  // The claim is this rank's own time (sentineld sends each waiting rank its own): only the
  // fixed tolerance, no share of the claim.
  if (*own_ns < v.waiting_ns - kVerdictClockToleranceNs) return VerdictCheck::kTooYoung;
  return VerdictCheck::kConfirmed;
}

void HangAbortSetInFlightLookup(InFlightLookupFn fn) noexcept {
  g_lookup.store(fn != nullptr ? fn : &CoreInFlightLookup, std::memory_order_release);
}

void HangAbortSetAbortFn(CommAbortFn fn) noexcept {
  R().abort_fn.store(fn, std::memory_order_release);
}

void HangAbortBeginCreate() noexcept {
  tls_init_seen = false;
  tls_init_rank = -1;
}

void HangAbortNoteProfilerInit(uint64_t comm_hash, int rank) noexcept {
  tls_init_seen = true;
  tls_init_hash = comm_hash;
  tls_init_rank = rank;
}

void HangAbortEndCreate(void* comm) noexcept {
  // Inits that ran elsewhere (groups, nonblocking communicators) leave nothing to pair with.
  if (comm == nullptr || !tls_init_seen) return;
  tls_init_seen = false;
  Registry& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  Slot* free_slot = nullptr;
  for (Slot& s : r.slots) {
    void* c = s.comm.load(std::memory_order_relaxed);
    if (c == comm) {
      free_slot = &s;  // a handle NCCL reused after a destroy we did not see
      break;
    }
    if (c == nullptr && free_slot == nullptr) free_slot = &s;
  }
  if (free_slot == nullptr) {
    SENTINEL_LOG_ONCE(LogLevel::kWarn,
                      "SENTINEL_ON_HANG: more than %d live communicators; later ones cannot be "
                      "aborted on a hang",
                      kSlots);
    return;
  }
  free_slot->comm_hash = tls_init_hash;
  free_slot->rank = tls_init_rank;
  free_slot->aborted.store(false, std::memory_order_relaxed);
  free_slot->comm.store(comm, std::memory_order_release);
}

bool HangAbortHostTeardown(void* comm) noexcept {
  if (comm == nullptr) return false;
  Registry& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  for (Slot& s : r.slots) {
    if (s.comm.load(std::memory_order_relaxed) != comm) continue;
    const bool ours = s.aborted.load(std::memory_order_relaxed);
    // Ours stays registered (the application may ask again); theirs is forgotten.
    if (!ours) s.comm.store(nullptr, std::memory_order_relaxed);
    return ours;
  }
  return false;
}

bool HangAbortIsAbortedSlow(void* comm) noexcept {
  if (comm == nullptr) return false;
  for (const Slot& s : R().slots) {
    if (s.comm.load(std::memory_order_acquire) == comm) {
      return s.aborted.load(std::memory_order_acquire);
    }
  }
  return false;
}

void OnHangVerdict(const SentinelWireHangVerdict& verdict) noexcept {
  char line[1400];
  Registry& r = R();
  // The rank's own evidence first: a verdict about anything else is not acted on or repeated.
  InFlightSnapshot snap;
  const bool found =
      g_lookup.load(std::memory_order_acquire)(verdict.comm_hash, verdict.rank, &snap);
  int64_t own_ns = 0;
  const VerdictCheck check = CheckHangVerdict(verdict, found, snap, MonoNs(), &own_ns);
  if (check != VerdictCheck::kConfirmed) {
    LogIgnored(verdict, check, snap, own_ns);
    return;
  }
  if (Mode() != OnHangMode::kAbort) {
    if (!g_reported_lines.Allow(MonoNs(), nullptr)) return;
    FormatHangAbortMessage(verdict, false, line, sizeof(line));
    RawLog("%s", line);
    Log(LogLevel::kWarn, "%s", line);
    return;
  }
  if (r.abort_fn.load(std::memory_order_acquire) == nullptr) {
    if (!g_reported_lines.Allow(MonoNs(), nullptr)) return;
    FormatHangAbortMessage(verdict, false, line, sizeof(line));
    RawLog("%s", line);
    static std::atomic<bool> said{false};
    if (!said.exchange(true, std::memory_order_relaxed)) {
      RawLog(
          "SENTINEL_ON_HANG=abort needs LD_PRELOAD=<libnccl-profiler-sentinel.so> (only the "
          "interposer sees communicator handles): not aborting, the hang is only reported");
    }
    return;
  }
  void* comm = nullptr;
  Slot* slot = nullptr;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (Slot& s : r.slots) {
      void* c = s.comm.load(std::memory_order_relaxed);
      if (c == nullptr || s.comm_hash != verdict.comm_hash || s.rank != verdict.rank) continue;
      if (s.aborted.exchange(true, std::memory_order_acq_rel)) return;  // already on its way
      comm = c;
      slot = &s;
      break;
    }
    if (comm != nullptr) g_hang_aborted_comms.fetch_add(1, std::memory_order_relaxed);
  }
  if (comm == nullptr) {
    if (!g_reported_lines.Allow(MonoNs(), nullptr)) return;
    FormatHangAbortMessage(verdict, false, line, sizeof(line));
    RawLog(
        "%s; not aborting: this communicator was not created by a blocking create call we "
        "interpose",
        line);
    return;
  }
  FormatHangAbortMessage(verdict, true, line, sizeof(line));
  RawLog("%s", line);
  Log(LogLevel::kWarn, "%s", line);
  // Our own thread: ncclCommAbort may take a while, and it finalizes the profiler context, which
  // may stop the drainer thread this verdict arrived on.
  r.in_progress.fetch_add(1, std::memory_order_acq_rel);
  // Detached on purpose, the one detached thread of the tree (DETACH_OK in
  // scripts/check_single_rules.py): it ends a hung communicator, not the process, and joining it at
  // exit would make the process wait on a hung NCCL. HangAbortWaitIdle (tests) and `in_progress`
  // say when it is done.
  std::thread* abort_thread =
      StartThread("sentinel-abort", [comm, verdict] { AbortThread(comm, verdict); });
  if (abort_thread != nullptr) {
    abort_thread->detach();
    delete abort_thread;
  } else {
    r.in_progress.fetch_sub(1, std::memory_order_acq_rel);
    {
      std::lock_guard<std::mutex> lock(r.mu);
      slot->aborted.store(false, std::memory_order_release);
      g_hang_aborted_comms.fetch_sub(1, std::memory_order_relaxed);
    }
    RawLog("SENTINEL_ON_HANG=abort: cannot start the abort thread; not aborting");
  }
}

uint64_t HangVerdictsIgnored() noexcept { return g_ignored.load(std::memory_order_relaxed); }

bool HangAbortWaitIdle(int64_t timeout_ms) noexcept {
  for (int64_t waited = 0; waited <= timeout_ms; ++waited) {
    if (R().in_progress.load(std::memory_order_acquire) == 0) return true;
    timespec ts{0, 1000000};
    nanosleep(&ts, nullptr);
  }
  return false;
}

namespace {
// Registered with the collector sink when the plugin .so loads: verdicts arrive on its thread.
__attribute__((constructor)) void RegisterHangVerdictHandler() {
  SetHangVerdictHandler(&OnHangVerdict);
}
}  // namespace

}  // namespace sentinel::plugin
