// The SENTINEL_* registry and its single parse: see sentinel_env.h.
#include "common/sentinel_env.h"

#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/choice_words.h"
#include "common/env_bool.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, not in every header

namespace sentinel::rules {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
// Shorthands for the table's columns only.
// NOLINTBEGIN(readability-identifier-naming)
constexpr EnvType B = EnvType::kBool;
constexpr EnvType I = EnvType::kInt;
constexpr EnvType D = EnvType::kDuration;
constexpr EnvType P = EnvType::kPercent;
constexpr EnvType E = EnvType::kEnum;
constexpr EnvType S = EnvType::kString;
constexpr EnvType F = EnvType::kPath;
constexpr EnvDoc R = EnvDoc::kReadme;
constexpr EnvDoc O = EnvDoc::kElsewhere;
// NOLINTEND(readability-identifier-naming)

// id, name, type, default, lo, hi, choices, bool aliases, documented in, doc.
// NOLINTNEXTLINE(cert-err58-cpp): constant initialisation only (no constructor runs).
constexpr EnvVarSpec kRegistry[] = {
    {Var::kDisable, "SENTINEL_DISABLE", B, "0", 0, 0, nullptr, false, R, "turn everything off"},
    {Var::kEvents, "SENTINEL_EVENTS", S, "default", 0, 0, nullptr, false, R,
     "NCCL event mask (checked by plugin/base/event_mask.h)"},
    {Var::kSocket, "SENTINEL_SOCKET", F, "", 0, 0, nullptr, false, R,
     "sentineld's socket; none = no streaming"},
    {Var::kDaemonUser, "SENTINEL_DAEMON_USER", S, "sentinel", 0, 0, nullptr, false, R,
     "the system sentineld's user, trusted beside you and root"},
    {Var::kDump, "SENTINEL_DUMP", F, "", 0, 0, nullptr, false, R, "JSONL dump file (%p, %h)"},
    {Var::kJobId, "SENTINEL_JOB_ID", S, "", 0, 0, nullptr, false, R, "job id sent to sentineld"},
    {Var::kLogLevel, "SENTINEL_LOG_LEVEL", E, "warn", 0, 0, kPluginLogLevelWords, false, R,
     "the plugin's log level"},
    {Var::kExpect, "SENTINEL_EXPECT", S, "", 0, 0, nullptr, false, R,
     "transport/placement expectation"},
    {Var::kExpectFile, "SENTINEL_EXPECT_FILE", F, "", 0, 0, nullptr, false, R,
     "a file holding the expectation"},
    {Var::kOnMismatch, "SENTINEL_ON_MISMATCH", E, "fail", 0, 0, kOnMismatchWords, false, R,
     "what a failed expectation does"},
    {Var::kOnHang, "SENTINEL_ON_HANG", E, "off", 0, 0, "off|report|abort", false, R,
     "what a confirmed hang does"},
    {Var::kSysfsRoot, "SENTINEL_SYSFS_ROOT", F, "/sys", 0, 0, nullptr, false, R,
     "root of the host probe's sysfs"},
    {Var::kDevRoot, "SENTINEL_DEV_ROOT", F, "/dev", 0, 0, nullptr, false, R,
     "root of the host probe's /dev"},
    {Var::kVerbs, "SENTINEL_VERBS", B, "1", 0, 0, nullptr, false, R, "dlopen libibverbs"},
    {Var::kPoolSize, "SENTINEL_POOL_SIZE", I, "1024", 16, kMiB / 16, nullptr, false, R,
     "event slots per collective-level pool"},
    {Var::kRings, "SENTINEL_RINGS", I, "256", 8, 4096, nullptr, false, R,
     "per-thread record rings"},
    {Var::kRingRecords, "SENTINEL_RING_RECORDS", I, "1024", 2, kMiB / 16, nullptr, false, R,
     "records per ring (rounded up to a power of 2)"},
    {Var::kDrainIntervalMs, "SENTINEL_DRAIN_INTERVAL_MS", D, "25", 1, 1000, nullptr, false, R,
     "period of the drainer"},
    {Var::kProxyGraceMs, "SENTINEL_PROXY_GRACE_MS", D, "200", 1, 60000, nullptr, false, R,
     "wait for proxy children of a stopped collective"},
    {Var::kMaxComms, "SENTINEL_MAX_COMMS", I, "1024", 1, 65536, nullptr, false, R,
     "communicators profiled at once"},
    {Var::kInflightStuckMs, "SENTINEL_INFLIGHT_STUCK_MS", D, "0", 0, 86400000, nullptr, false, R,
     "in-flight time that counts as stuck; 0 = adaptive"},
    {Var::kCupti, "SENTINEL_CUPTI", E, "auto", 0, 0, "auto|on|off", true, R,
     "GPU kernel activity through CUPTI"},
    {Var::kCuptiPath, "SENTINEL_CUPTI_PATH", F, "", 0, 0, nullptr, false, R,
     "the libcupti to load"},
    {Var::kCuptiWindowMs, "SENTINEL_CUPTI_WINDOW_MS", D, "1000", 10, 600000, nullptr, false, R,
     "GPU window length"},
    {Var::kCuptiFlushMs, "SENTINEL_CUPTI_FLUSH_MS", D, "100", 5, 60000, nullptr, false, R,
     "period of the CUPTI flush thread"},
    {Var::kCuptiStarveMs, "SENTINEL_CUPTI_STARVE_MS", D, "3000", 10, 3600000, nullptr, false, R,
     "no activity this long: another tool owns CUPTI"},
    {Var::kCuptiRearmS, "SENTINEL_CUPTI_REARM_S", D, "30", 0, 86400, nullptr, false, R,
     "re-take CUPTI after stepping aside; 0 = never"},
    {Var::kCuptiBufferKib, "SENTINEL_CUPTI_BUFFER_KIB", I, "1024", 64, 65536, nullptr, false, R,
     "activity buffer size"},
    {Var::kCuptiBuffers, "SENTINEL_CUPTI_BUFFERS", I, "8", 2, 256, nullptr, false, R,
     "activity buffer count"},
    {Var::kCuptiAttributions, "SENTINEL_CUPTI_ATTRIBUTIONS", I, "256", 0, 100000, nullptr, false, R,
     "kernel attribution records per window"},
    {Var::kCuptiCommKernels, "SENTINEL_CUPTI_COMM_KERNELS", S, "", 0, 0, nullptr, false, R,
     "extra communication kernel-name substrings"},
    {Var::kStepNvtx, "SENTINEL_STEP_NVTX", S, "", 0, 0, nullptr, false, R,
     "NVTX range that starts a step"},
    {Var::kBaselineNccl, "SENTINEL_BASELINE_NCCL", F, "", 0, 0, nullptr, false, R,
     "sentinel-baseline's libnccl"},
    {Var::kBaselineCudart, "SENTINEL_BASELINE_CUDART", F, "", 0, 0, nullptr, false, R,
     "sentinel-baseline's libcudart"},
    {Var::kBaselinePort, "SENTINEL_BASELINE_PORT", S, "", 0, 0, nullptr, false, R,
     "sentinel-baseline's rendezvous port (tools/baseline checks it)"},
    {Var::kBaselineToken, "SENTINEL_BASELINE_TOKEN", S, "", 0, 0, nullptr, false, R,
     "sentinel-baseline's rendezvous secret (tools/baseline checks it)"},
    {Var::kChainProfiler, "SENTINEL_CHAIN_PROFILER", S, "", 0, 0, nullptr, false, R,
     "a second profiler plugin to forward to"},
    {Var::kNetWrap, "SENTINEL_NET_WRAP", S, "", 0, 0, nullptr, false, R,
     "the real net plugin the net wrapper wraps"},
    {Var::kNetReportMs, "SENTINEL_NET_REPORT_MS", D, "1000", 10, 600000, nullptr, false, R,
     "period of the net wrapper's records"},
    {Var::kBudget, "SENTINEL_BUDGET", P, "0.5", 0, 100, nullptr, false, R,
     "the plugin's CPU budget, % of wall time; 0 = none"},
    {Var::kAddr, "SENTINEL_ADDR", S, "", 0, 0, nullptr, false, O,
     "sentinelctl's HOST:PORT (collector/README.md)"},
};
static_assert(sizeof(kRegistry) / sizeof(kRegistry[0]) == kVarCount, "one row per Var");

// Not the product's and not user typos: names the plugin sets itself (log_capture's stash of the
// user's NCCL_DEBUG*), and the developers' knobs of tests, benchmarks and scripts
// (SENTINEL_DEV_JOBS, SENTINEL_DEV_BENCH_PLUGIN, ...; CONTRIBUTING.md lists them).
constexpr const char* kInternalPrefixes[] = {"SENTINEL_ORIG_", "SENTINEL_DEV_"};

struct Problems {
  SentinelEnv* env;
  void Add(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    const size_t room = kEnvProblemsMax - env->problems_len;
    if (room <= 1) return;
    va_list ap;
    va_start(ap, fmt);
    const int n = std::vsnprintf(env->problems + env->problems_len, room, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t used = static_cast<size_t>(n) < room ? static_cast<size_t>(n) : room - 1;
    if (used > 0 && env->problems[env->problems_len + used - 1] != '\n') {
      env->problems[env->problems_len + used - 1] = '\n';  // truncated: keep whole lines
    }
    env->problems_len += used;
  }
};

// The one number rule: a whole decimal number, nothing after it, in [lo, hi].
bool ParseInt(const char* text, int64_t lo, int64_t hi, int64_t* out) {
  if (text[0] == '-' || text[0] == '+' || text[0] == ' ') return false;
  char* end = nullptr;
  errno = 0;
  const auto n = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || n < lo || n > hi) return false;
  *out = n;
  return true;
}

bool ParsePercent(const char* text, double lo, double hi, double* out) {
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(text, &end);
  if (end != text && *end == '%') ++end;
  if (errno != 0 || end == text || *end != '\0' || !(d >= lo && d <= hi)) return false;
  *out = d;
  return true;
}

// Index of `text` in "a|b|c" (case-insensitive), or -1.
int FindChoice(const char* choices, const char* text) {
  const size_t len = std::strlen(text);
  int index = 0;
  for (const char* p = choices;; ++index) {
    const char* bar = std::strchr(p, '|');
    const size_t n = bar == nullptr ? std::strlen(p) : static_cast<size_t>(bar - p);
    if (n == len && strncasecmp(p, text, n) == 0) return index;
    if (bar == nullptr) return -1;
    p = bar + 1;
  }
}

// Parses `text` under spec's type into *v; false when it is not valid.
bool ParseValue(const EnvVarSpec& spec, const char* text, EnvValue* v) {
  switch (spec.type) {
    case EnvType::kBool: {
      const EnvBool b = ParseEnvBool(text);
      if (b == EnvBool::kInvalid) return false;
      v->flag = b == EnvBool::kTrue;
      return true;
    }
    case EnvType::kInt:
    case EnvType::kDuration:
      return ParseInt(text, spec.lo, spec.hi, &v->number);
    case EnvType::kPercent:
      return ParsePercent(text, static_cast<double>(spec.lo), static_cast<double>(spec.hi),
                          &v->real);
    case EnvType::kEnum: {
      int c = FindChoice(spec.choices, text);
      if (c < 0 && spec.bool_aliases) {
        const EnvBool b = ParseEnvBool(text);
        if (b != EnvBool::kInvalid) {
          c = FindChoice(spec.choices, b == EnvBool::kTrue ? "on" : "off");
        }
      }
      if (c < 0) return false;
      v->choice = c;
      return true;
    }
    case EnvType::kString:
    case EnvType::kPath:
      return true;
  }
  return false;
}

void ReportBad(const EnvVarSpec& spec, const char* text, Problems* p) {
  const char* def = spec.default_text[0] != '\0' ? spec.default_text : "the default";
  switch (spec.type) {
    case EnvType::kBool:
      p->Add("%s='%s' is not 1/true/yes/on or 0/false/no/off; using %s%s\n", spec.name, text, def,
             spec.id == Var::kDisable ? " (sentinel stays on)" : "");
      return;
    case EnvType::kInt:
    case EnvType::kDuration:
      p->Add("%s='%s' is not an integer in [%" PRId64 ", %" PRId64 "]; using %s\n", spec.name, text,
             spec.lo, spec.hi, def);
      return;
    case EnvType::kPercent:
      p->Add("%s='%s' is not a percentage in [%" PRId64 ", %" PRId64 "]; using %s\n", spec.name,
             text, spec.lo, spec.hi, def);
      return;
    case EnvType::kEnum:
      p->Add("%s='%s' is not one of %s; using %s\n", spec.name, text, spec.choices, def);
      return;
    case EnvType::kString:
    case EnvType::kPath:
      return;
  }
}

// Edit distance of two short names (for "did you mean"); large for long ones.
size_t Distance(const char* a, size_t la, const char* b, size_t lb) {
  constexpr size_t kMax = 64;
  if (la >= kMax || lb >= kMax) return kMax;
  size_t prev[kMax + 1];
  size_t cur[kMax + 1];
  for (size_t j = 0; j <= lb; ++j) prev[j] = j;
  for (size_t i = 1; i <= la; ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= lb; ++j) {
      const size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      const size_t del = prev[j] + 1;
      const size_t ins = cur[j - 1] + 1;
      cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
    }
    for (size_t j = 0; j <= lb; ++j) prev[j] = cur[j];
  }
  return prev[lb];
}

void ReportUnknown(const char* name, size_t len, Problems* p) {
  const EnvVarSpec* best = nullptr;
  size_t best_d = 3;  // suggest only a near miss (a typo)
  for (const EnvVarSpec& s : kRegistry) {
    const size_t d = Distance(name, len, s.name, std::strlen(s.name));
    if (d < best_d) {
      best_d = d;
      best = &s;
    }
  }
  if (best != nullptr) {
    p->Add("%.*s is not a variable sentinel knows (did you mean %s?); ignored\n",
           static_cast<int>(len), name, best->name);
  } else {
    p->Add("%.*s is not a variable sentinel knows (README.md lists them); ignored\n",
           static_cast<int>(len), name);
  }
}

bool StartsWith(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

SentinelEnv g_process_env;  // written once under the magic static below (or by tests)

}  // namespace

const EnvVarSpec* EnvRegistry() noexcept { return kRegistry; }

const EnvVarSpec& Spec(Var v) noexcept { return kRegistry[static_cast<size_t>(v)]; }

bool SentinelEnv::ChoiceIs(Var v, const char* word) const noexcept {
  const EnvVarSpec& spec = Spec(v);
  if (spec.type != EnvType::kEnum || spec.choices == nullptr || word == nullptr) return false;
  return FindChoice(spec.choices, word) == (*this)[v].choice;
}

const EnvVarSpec* FindEnvVar(const char* name) noexcept {
  for (const EnvVarSpec& s : kRegistry) {
    if (std::strcmp(s.name, name) == 0) return &s;
  }
  return nullptr;
}

bool ParseEnvValue(Var v, const char* text, EnvValue* out) noexcept {
  EnvValue parsed = *out;
  if (!ParseValue(Spec(v), text, &parsed)) return false;
  *out = parsed;
  return true;
}

void ParseSentinelEnv(const char* const* envp, SentinelEnv* out) noexcept {
  *out = SentinelEnv();
  Problems problems{out};
  for (const EnvVarSpec& spec : kRegistry) {
    EnvValue& v = out->values[static_cast<size_t>(spec.id)];
    if (spec.default_text[0] != '\0') (void)ParseValue(spec, spec.default_text, &v);
  }
  for (const char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
    const char* entry = *e;
    if (!StartsWith(entry, "SENTINEL_")) continue;
    const char* eq = std::strchr(entry, '=');
    if (eq == nullptr) continue;
    const auto len = static_cast<size_t>(eq - entry);
    const EnvVarSpec* spec = nullptr;
    for (const EnvVarSpec& s : kRegistry) {
      if (std::strlen(s.name) == len && std::strncmp(s.name, entry, len) == 0) spec = &s;
    }
    if (spec == nullptr) {
      bool internal = false;
      for (const char* prefix : kInternalPrefixes) internal = internal || StartsWith(entry, prefix);
      if (!internal) ReportUnknown(entry, len, &problems);
      continue;
    }
    const char* text = eq + 1;
    if (*text == '\0') continue;  // set but empty = unset, as before
    EnvValue& v = out->values[static_cast<size_t>(spec->id)];
    EnvValue parsed = v;
    parsed.text = text;
    if (ParseValue(*spec, text, &parsed)) {
      v = parsed;
    } else {
      v.text = text;
      v.bad = true;
      ReportBad(*spec, text, &problems);
    }
  }
}

namespace {
using EnvTeller = void (*)(const char*, size_t);

// The teller of another sentinel library loaded in this process (never loads one), or null.
EnvTeller OtherLibraryTeller() {
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&TellEnvProblemsHere), &self) == 0) return nullptr;
  for (const char* lib : kEnvTellerLibraries) {
    void* handle = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    auto teller = reinterpret_cast<EnvTeller>(dlsym(handle, kEnvTellerSymbol));
    dlclose(handle);  // only our reference: both libraries are linked -z nodelete
    Dl_info where{};
    if (teller != nullptr && dladdr(reinterpret_cast<void*>(teller), &where) != 0 &&
        where.dli_fbase != self.dli_fbase) {
      return teller;
    }
  }
  return nullptr;
}
}  // namespace

void TellEnvProblemsOnce(const char* lines, size_t len) noexcept {
  if (len == 0) return;
  // Looked up at each call (a rare, error-only path): the other library may load later.
  if (EnvTeller other = OtherLibraryTeller()) {
    other(lines, len);
    return;
  }
  TellEnvProblemsHere(lines, len);
}

void TellEnvProblemsHere(const char* lines, size_t len) noexcept {
  static std::mutex mu;
  static char told[kEnvProblemsMax];  // the lines already told, '\n'-terminated
  static size_t told_len = 0;
  std::lock_guard<std::mutex> lock(mu);
  size_t pos = 0;
  while (pos < len) {
    const char* nl = static_cast<const char*>(std::memchr(lines + pos, '\n', len - pos));
    const size_t end = nl == nullptr ? len : static_cast<size_t>(nl - lines);
    const size_t n = end - pos;
    const char* line = lines + pos;
    pos = end + 1;
    if (n == 0) continue;
    bool seen = false;
    for (size_t t = 0; t + n < told_len + 1 && !seen; ++t) {
      const bool at_start = t == 0 || told[t - 1] == '\n';
      seen = at_start && t + n < told_len && told[t + n] == '\n' &&
             std::memcmp(told + t, line, n) == 0;
    }
    if (seen) continue;
    if (told_len + n + 1 <= sizeof(told)) {
      std::memcpy(told + told_len, line, n);
      told[told_len + n] = '\n';
      told_len += n + 1;
    }
    char out[kEnvProblemsMax + 16];
    const int m = std::snprintf(out, sizeof(out), "[sentinel] %.*s\n", static_cast<int>(n), line);
    if (m > 0) {
      const size_t w =
          static_cast<size_t>(m) < sizeof(out) ? static_cast<size_t>(m) : sizeof(out) - 1;
      (void)!write(STDERR_FILENO, out, w);
    }
  }
}

const SentinelEnv& ProcessSentinelEnv() noexcept {
  // A function-local static: its initialisation runs once, and other threads wait for it.
  static const bool parsed = [] {
    ParseSentinelEnv(environ, &g_process_env);
    TellEnvProblemsOnce(g_process_env.problems, g_process_env.problems_len);
    return true;
  }();
  (void)parsed;
  return g_process_env;
}

namespace testing {
void ReloadProcessSentinelEnv() noexcept {
  (void)ProcessSentinelEnv();
  ParseSentinelEnv(environ, &g_process_env);
}
}  // namespace testing

}  // namespace sentinel::rules
