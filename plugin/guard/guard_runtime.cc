// Guard state, evidence assembly and outcomes (fail / warn / abort); see guard_runtime.h.
#include "plugin/guard/guard_runtime.h"

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/base/attributes.h"

#include "common/choice_words.h"
#include "common/env_bool.h"
#include "common/raw_log.h"
#include "common/sentinel_env.h"
#include "plugin/base/clock.h"
#include "plugin/base/no_destructor.h"
#include "plugin/guard/host_probe.h"
#include "plugin/guard/log_capture.h"
#include "plugin/guard/nccl_env.h"
#include "plugin/guard/verdict_text.h"
#include "plugin/guard/verdict_wire.h"

namespace sentinel::guard {

ABSL_CONST_INIT std::atomic<int> g_pending_collective_checks{0};

namespace {

constexpr int kInvalidUsage = 5;
constexpr int kMaxComms = 512;
constexpr int kMaxCollectiveTries = 8;  // collectives inside a group connect only at GroupEnd

struct ProfilerComm {
  uint64_t comm_hash = 0;
  int rank = -1;
  int nranks = 0;
  int nnodes = 0;
};

struct PendingComm {
  void* comm = nullptr;
  int tries = 0;
};

struct Runtime {
  std::mutex mu;
  GuardConfig config;
  bool loaded = false;
  std::vector<ProfilerComm> profiler_comms;  // guarded by mu
  std::vector<PendingComm> pending;          // guarded by mu
  std::vector<std::string> printed;          // messages already shown (once each)
  SentinelNcclLogger logfn = nullptr;
  ControlRecordFn record_fn = nullptr;  // set by the plugin's wiring (plugin/entry)
  uint64_t records_dropped = 0;         // verdict records the seam refused (queue full, off)
  std::atomic<uint64_t> forwarder_failures{0};  // the log forwarder thread could not start
  bool interposer_seen = false;
};

Runtime& R() {
  // Never destroyed: used until the very end of the process.
  static plugin::NoDestructor<Runtime> r;
  return *r;
}

thread_local uint64_t tls_last_profiler_hash = 0;

// One message (any number of lines) behind the one stderr prefix (common/raw_log.h). A text that
// starts with the bare tag "[sentinel] " (FormatVerdict's) gets the prefix instead, not both.
void WriteStderr(const std::string& s) {
  static constexpr char kBareTag[] = "[sentinel] ";
  const size_t skip = s.compare(0, sizeof(kBareTag) - 1, kBareTag) == 0 ? sizeof(kBareTag) - 1 : 0;
  rules::RawLogText(s.data() + skip, s.size() - skip);
}

// Caller holds R().mu.
void LoadConfigLocked(Runtime& r) {
  if (r.loaded) return;
  r.loaded = true;
  GuardConfig& c = r.config;
  c.disabled = rules::SentinelDisabled();  // the one boolean rule (common/env_bool.h)
  if (c.disabled) return;
  ExpectSource src = ResolveExpectSource(ExpectSourceInputsFromEnv());
  // An untrusted expectation file: said once (this runs once per process), never enforced.
  if (!src.ignored.empty()) WriteStderr(src.ignored);
  if (src.kind == ExpectSourceKind::kNone)
    return;  // no expectation: the guard stays out of the way
  c.source_kind = src.kind;
  c.source = src.name;
  // The job's own SENTINEL_ON_MISMATCH wins over the operator's node default.
  const rules::SentinelEnv& env = rules::ProcessSentinelEnv();
  if (env.Set(rules::Var::kOnMismatch)) {
    // fail|warn|abort under the registry's rule; a bad value was told once there: fail.
    c.mode = rules::OnMismatchFromEnv(env, Mode::kFail);
  } else if (!src.on_mismatch.empty() &&
             !rules::ParseOnMismatch(src.on_mismatch.c_str(), &c.mode)) {
    WriteStderr("unknown on_mismatch='" + src.on_mismatch + "' in " + src.name + " (" +
                rules::kOnMismatchWords + "): using " + rules::OnMismatchWord(Mode::kFail));
  }
  c.active = true;
  if (!src.read_error.empty()) {
    c.parse_error = src.read_error;
    c.error_is_warning = src.kind == ExpectSourceKind::kNodeDefault;
    return;
  }
  const plugin::Status parsed = ParseExpectation(src.text, &c.expect);
  if (!parsed.ok()) {
    c.parse_error = "invalid expectation: " + FormatParseError(c.source, parsed);
    c.error_is_warning = src.kind == ExpectSourceKind::kNodeDefault;
    if (c.error_is_warning) c.parse_error += "\n  (node default from sentineld: not enforced)";
  } else if (c.expect.Empty()) {
    c.active = false;  // only comments/blank
  }
  c.expect.source = src.description;
}

const ProfilerComm* FindProfilerCommLocked(Runtime& r, uint64_t hash) {
  for (const ProfilerComm& p : r.profiler_comms) {
    if (p.comm_hash == hash && hash != 0) return &p;
  }
  return nullptr;
}

void SendRecords(Runtime& r, const std::vector<SentinelWireVerdict>& records) {
  for (const SentinelWireVerdict& w : records) {
    // Unwired (the guard's own unit tests, the collector's use of the rules): nowhere to send.
    if (r.record_fn != nullptr && !r.record_fn(kSentinelWireVerdict, &w, sizeof w)) {
      ++r.records_dropped;
    }
  }
}

// Builds the evidence for `comm_ptr` (0 if unknown) and evaluates. Caller holds R().mu.
Verdict EvaluateLocked(Runtime& r, Stage stage, void* comm_ptr, uint64_t comm_hash_hint,
                       Evidence* ev, LogEvidence* log) {
  const Expectation& x = r.config.expect;
  const plugin::Status captured = SnapshotLogEvidence(log);
  if (captured.ok()) {
    ev->log = log;
  } else {
    ev->log_unavailable_reason = captured.message();
  }
  if (x.WantsRdma() || x.net != NetKind::kAny) ev->host = &CachedHostFacts(x.WantsRdma());
  ev->env = ReadNcclEnv();
  uint64_t hash = comm_hash_hint;
  if (ev->log != nullptr && comm_ptr != nullptr) {
    for (const LogComm& c : log->comms) {
      if (c.comm_ptr == reinterpret_cast<uintptr_t>(comm_ptr)) {
        if (c.comm_hash != 0) hash = c.comm_hash;
        ev->rank = c.rank;
        ev->nranks = c.nranks;
        ev->nnodes = c.nnodes;
        ev->local_ranks = c.local_ranks;
      }
    }
  }
  if (x.affinity != Affinity::kAny && ev->log != nullptr) {
    // The GPU of this communicator's rank, from the Init line NCCL printed for it.
    for (const LogComm& c : log->comms) {
      if (c.comm_ptr == reinterpret_cast<uintptr_t>(comm_ptr) || comm_ptr == nullptr) {
        if (!c.bus_id.empty()) ev->gpu.bdf = BusIdToBdf(c.bus_id);
      }
    }
    if (!ev->gpu.bdf.empty()) {
      ev->gpu = ProbePciDevice(ProbeOptionsFromEnv(false).sysfs_root, ev->gpu.bdf);
    }
  }
  if (hash == 0) hash = tls_last_profiler_hash;
  if (const ProfilerComm* p = FindProfilerCommLocked(r, hash)) {
    ev->rank = p->rank;
    ev->nranks = p->nranks;
    if (p->nnodes > 0) ev->nnodes = p->nnodes;
  }
  ev->comm_hash = hash;
  ev->net_plugin = ReadNetPluginEvidence();  // empty unless libnccl-net-sentinel.so is loaded
  return Evaluate(x, *ev, stage);
}

// Prints (once per distinct message), sends the alerts, and returns true when the caller must fail.
bool ReportLocked(Runtime& r, const Verdict& v, const Evidence& ev, const std::string& where,
                  Mode mode) {
  if (v.Passed()) return false;
  std::string msg = FormatVerdict(v, r.config.expect, ev, mode, where);
  bool seen = false;
  for (const std::string& p : r.printed) seen = seen || p == msg;
  if (!seen) {
    r.printed.push_back(msg);
    WriteStderr(msg);
    if (r.logfn != nullptr) {
      // One line on NCCL's own WARN path; the full explanation is on stderr.
      r.logfn(kSentinelNcclLogWarn, ~0UL, __FILE__, __LINE__,
              "[sentinel] transport/placement expectation not met: %s: %s (details on stderr)",
              v.mismatches.front().term.c_str(), v.mismatches.front().found.c_str());
    }
  }
  SendRecords(r, ToWireVerdicts(v, r.config.expect, ev, rules::OutcomeOf(mode), plugin::MonoNs()));
  if (mode == Mode::kAbort) std::abort();  // the user asked for it (SENTINEL_ON_MISMATCH=abort)
  return mode == Mode::kFail;
}

// The expectation did not parse: say so once; in fail/abort mode refuse like a mismatch.
bool ReportParseErrorLocked(Runtime& r) {
  bool seen = false;
  for (const std::string& p : r.printed) seen = seen || p == r.config.parse_error;
  if (!seen) {
    r.printed.push_back(r.config.parse_error);
    WriteStderr(r.config.parse_error);
  }
  if (r.config.error_is_warning) return false;
  if (r.config.mode == Mode::kAbort) std::abort();
  return r.config.mode == Mode::kFail;
}

void AddPendingLocked(Runtime& r, void* comm) {
  if (comm == nullptr || static_cast<int>(r.pending.size()) >= kMaxComms) return;
  r.pending.push_back(PendingComm{comm, 0});
  // Relaxed: the counter is a hint for the fast path; the list itself is read under the lock.
  g_pending_collective_checks.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

const GuardConfig& Config() {
  Runtime& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  LoadConfigLocked(r);
  return r.config;
}

void ResetForTest() {
  Runtime& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  r.config = GuardConfig();
  r.loaded = false;
  r.profiler_comms.clear();
  r.pending.clear();
  r.printed.clear();
  r.logfn = nullptr;
  r.interposer_seen = false;
  g_pending_collective_checks.store(0, std::memory_order_relaxed);
}

void SetControlRecordFn(ControlRecordFn fn) noexcept {
  Runtime& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  r.record_fn = fn;
}

uint64_t ControlRecordsDropped() noexcept {
  Runtime& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.records_dropped;
}

void OnCreateBegin() noexcept {
  try {
    Runtime& r = R();
    {
      std::lock_guard<std::mutex> lock(r.mu);
      LoadConfigLocked(r);
      if (r.config.disabled || !r.config.active) return;
      r.interposer_seen = true;
    }
    plugin::Status forwarder = StartLogForwarder();
    // No forwarder thread is not fatal: the evidence is drained at verdict time and at exit.
    if (!forwarder.ok()) r.forwarder_failures.fetch_add(1, std::memory_order_relaxed);
  } catch (...) {
  }
}

namespace {
int CheckCreated(const char* api, int result, void* const* comms, int ncomms,
                 AbortCommFn abort_fn) noexcept;
}  // namespace

int OnCreateEnd(const char* api, int result, void* const* comms, int ncomms,
                AbortCommFn abort_fn) noexcept {
  int r = CheckCreated(api, result, comms, ncomms, abort_fn);
  DrainLogAfterCall();  // what NCCL printed during the call goes out before the program prints
  return r;
}

namespace {
int CheckCreated(const char* api, int result, void* const* comms, int ncomms,
                 AbortCommFn abort_fn) noexcept {
  try {
    Runtime& r = R();
    bool fail = false;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      LoadConfigLocked(r);
      if (r.config.disabled || !r.config.active) return result;
      void* first = ncomms > 0 ? comms[0] : nullptr;
      if (!r.config.parse_error.empty()) {
        fail = result == 0 && ReportParseErrorLocked(r);
      } else if (result == 7 /* ncclInProgress: nonblocking init still running */) {
        for (int i = 0; i < ncomms; ++i) AddPendingLocked(r, comms[i]);
        return result;
      } else {
        Evidence ev;
        LogEvidence log;
        Verdict v = EvaluateLocked(r, Stage::kInit, first, 0, &ev, &log);
        if (result != 0) {
          // NCCL refused by itself (e.g. NCCL_NET=IB without IB): explain why, change nothing.
          ReportLocked(r, v, ev, std::string(api) + " (which already failed)", Mode::kWarn);
          return result;
        }
        fail = ReportLocked(r, v, ev, api, r.config.mode);
        if (!fail && !v.deferred.empty()) {
          for (int i = 0; i < ncomms; ++i) AddPendingLocked(r, comms[i]);
        }
      }
    }
    if (!fail) return result;
    // Without the lock: aborting runs the profiler's finalize, which comes back into the guard
    // (OnProfilerFinalize) on this thread.
    for (int i = 0; i < ncomms; ++i) {
      if (comms[i] != nullptr && abort_fn != nullptr) abort_fn(comms[i]);
    }
    return kInvalidUsage;
  } catch (...) {
    return result;  // the host always wins
  }
}
}  // namespace

int OnCollectiveEnd(const char* api, void* comm, int result) noexcept {
  try {
    Runtime& r = R();
    std::lock_guard<std::mutex> lock(r.mu);
    size_t i = 0;
    while (i < r.pending.size() && r.pending[i].comm != comm) ++i;
    if (i == r.pending.size()) return result;
    Evidence ev;
    LogEvidence log;
    Verdict v = EvaluateLocked(r, Stage::kFirstCollective, comm, 0, &ev, &log);
    bool channels_seen = log.AnyChannelLines() || ev.log == nullptr;
    if (v.Passed() && !channels_seen && ++r.pending[i].tries < kMaxCollectiveTries) {
      return result;  // inside a group: the connection happens at ncclGroupEnd; look again later
    }
    r.pending.erase(r.pending.begin() + static_cast<std::ptrdiff_t>(i));
    g_pending_collective_checks.fetch_sub(1, std::memory_order_relaxed);
    bool fail = ReportLocked(r, v, ev, std::string("the first ") + api + " (runtime connect)",
                             r.config.mode);
    return fail && result == 0 ? kInvalidUsage : result;
  } catch (...) {
    return result;
  }
}

// Profiler plugin hooks (guard_hooks.h).
void OnProfilerInit(const ProfilerInitInfo& info) noexcept {
  try {
    Runtime& r = R();
    std::lock_guard<std::mutex> lock(r.mu);
    LoadConfigLocked(r);
    if (info.logfn != nullptr) r.logfn = info.logfn;
    if (r.config.disabled || !r.config.active) return;
    if (FindProfilerCommLocked(r, info.comm_hash) == nullptr &&
        static_cast<int>(r.profiler_comms.size()) < kMaxComms) {
      r.profiler_comms.push_back(
          ProfilerComm{info.comm_hash, info.rank, info.nranks, info.n_nodes});
    }
    tls_last_profiler_hash = info.comm_hash;
    if (r.interposer_seen || !r.config.parse_error.empty()) return;  // the interposer decides
    // Profiler-only mode: what the plugin can see (init args, host probe, environment, and the
    // log if a capture exists); warnings and alerts only, never failing the communicator.
    Evidence ev;
    LogEvidence log;
    Verdict v = EvaluateLocked(r, Stage::kProfilerInit, nullptr, info.comm_hash, &ev, &log);
    ev.rank = info.rank;
    ev.nranks = info.nranks;
    ReportLocked(r, v, ev, "profiler init (profiler-only mode: warning only)", Mode::kWarn);
  } catch (...) {
  }
}

void OnProfilerFinalize(uint64_t comm_hash, int rank) noexcept {
  (void)rank;
  try {
    Runtime& r = R();
    std::lock_guard<std::mutex> lock(r.mu);
    for (size_t i = 0; i < r.profiler_comms.size(); ++i) {
      if (r.profiler_comms[i].comm_hash == comm_hash) {
        r.profiler_comms.erase(r.profiler_comms.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
  } catch (...) {
  }
}

}  // namespace sentinel::guard
