// The one registry of every SENTINEL_* variable: every SENTINEL_* variable is parsed once, in one
// place, with one boolean rule. The table in sentinel_env.cc names each variable, its
// type, default, range or choices and a one-line doc; README.md's variable table must list the
// same names (tests/unit/common/sentinel_env_test.cc checks both ways).
//
// The process reads its environment once, at the first ProcessSentinelEnv() (thread-safe first
// use), into one immutable SentinelEnv; every part of the plugin reads that instead of getenv.
// Problems (a bad value, out of range, an unknown SENTINEL_* name) are told once on stderr
// whatever NCCL_DEBUG is. No allocation anywhere here: the LD_PRELOAD constructor reads it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sentinel::rules {

// Every variable, in table order. Add a row in sentinel_env.cc and README.md with a new one.
enum class Var : uint8_t {
  kDisable,
  kEvents,
  kSocket,
  kDaemonUser,
  kDump,
  kJobId,
  kLogLevel,
  kExpect,
  kExpectFile,
  kOnMismatch,
  kOnHang,
  kSysfsRoot,
  kDevRoot,  // SENTINEL_DEVFS_ROOT (not under SENTINEL_DEV_, whose names the registry ignores)
  kVerbs,
  kPoolSize,
  kRings,
  kRingRecords,
  kDrainIntervalMs,
  kProxyGraceMs,
  kMaxComms,
  kInflightStuckMs,
  kCupti,
  kCuptiPath,
  kCuptiWindowMs,
  kCuptiFlushMs,
  kCuptiStarveMs,
  kCuptiRearmS,
  kCuptiBufferKib,
  kCuptiBuffers,
  kCuptiAttributions,
  kCuptiCommKernels,
  kStepNvtx,
  kBaselineNccl,
  kBaselineCudart,
  kBaselinePort,
  kBaselineToken,
  kChainProfiler,
  kNetWrap,
  kNetReportMs,
  kBudget,
  kAddr,  // sentinelctl's address (collector/README.md)
  kCount
};
inline constexpr size_t kVarCount = static_cast<size_t>(Var::kCount);

enum class EnvType : uint8_t {
  kBool,      // the one boolean rule (env_bool.h)
  kInt,       // decimal integer in [lo, hi]
  kDuration,  // decimal integer in [lo, hi], the unit is the name's suffix (_MS, _S)
  kPercent,   // a real number in [lo, hi], optionally followed by '%'
  kEnum,      // one of `choices` ("a|b|c"), case-insensitive
  kString,
  kPath,
};

// Where a variable is documented: README.md's table, or elsewhere (not user settings of the job).
enum class EnvDoc : uint8_t { kReadme, kElsewhere };

struct EnvVarSpec {
  Var id;
  const char* name;
  EnvType type;
  const char* default_text;  // "" when computed elsewhere (SENTINEL_SOCKET) or unset
  int64_t lo;
  int64_t hi;
  const char* choices;  // kEnum only: "off|report|abort"
  bool bool_aliases;    // kEnum only: a boolean spelling means the "on"/"off" choice
  EnvDoc doc_place;
  const char* doc;
};

// The registry: kVarCount rows, row i describes Var(i).
const EnvVarSpec* EnvRegistry() noexcept;
const EnvVarSpec& Spec(Var v) noexcept;
// The row named `name` (exact), or nullptr.
const EnvVarSpec* FindEnvVar(const char* name) noexcept;

// One variable's reading. When unset, empty or bad, the parsed fields hold the default.
struct EnvValue {
  const char* text = nullptr;  // the raw value (points into the environment); nullptr if unset/""
  bool bad = false;            // set but not valid: the default is used and a problem is told
  bool flag = false;           // kBool
  int64_t number = 0;          // kInt, kDuration
  double real = 0;             // kPercent
  int choice = 0;              // kEnum: index into `choices`
};

inline constexpr size_t kEnvProblemsMax = 4096;

struct SentinelEnv {
  EnvValue values[kVarCount];
  // One line per problem, '\n'-terminated, "NAME='value' ...; using X" (truncated if huge).
  char problems[kEnvProblemsMax] = {};
  size_t problems_len = 0;

  const EnvValue& operator[](Var v) const noexcept { return values[static_cast<size_t>(v)]; }
  [[nodiscard]] bool Set(Var v) const noexcept { return (*this)[v].text != nullptr; }
  [[nodiscard]] const char* Text(Var v) const noexcept { return (*this)[v].text; }
  [[nodiscard]] bool Flag(Var v) const noexcept { return (*this)[v].flag; }
  [[nodiscard]] int64_t Number(Var v) const noexcept { return (*this)[v].number; }
  [[nodiscard]] double Real(Var v) const noexcept { return (*this)[v].real; }
  [[nodiscard]] int Choice(Var v) const noexcept { return (*this)[v].choice; }
  // Whether a kEnum variable's value (or its default) is `word` as the registry spells it
  // (case-insensitive). Read choices by name, never by position: see ChoiceByName.
  [[nodiscard]] bool ChoiceIs(Var v, const char* word) const noexcept;
};

// One word of a kEnum variable and what it means to its reader.
template <typename E>
struct ChoiceName {
  const char* word;
  E value;
};

// The reader's value for a kEnum variable's chosen word: reordering or adding a word in the
// registry's "a|b|c" can never swap one feature for another. A word the table lacks gives
// `fallback` (each reader's test checks that its table covers every word).
template <typename E, size_t N>
E ChoiceByName(const SentinelEnv& env, Var v, const ChoiceName<E> (&table)[N],
               E fallback) noexcept {
  for (const ChoiceName<E>& row : table) {
    if (env.ChoiceIs(v, row.word)) return row.value;
  }
  return fallback;
}

// One value of `v` under the registry's rule for its type (the rule ParseSentinelEnv applies):
// false when `text` is not valid (then *out is unchanged). `text` must not be nullptr.
[[nodiscard]] bool ParseEnvValue(Var v, const char* text, EnvValue* out) noexcept;

// The pure parse (the test seam): `envp` is a nullptr-terminated "NAME=value" list like environ.
// The result points into envp's strings: keep them alive while it is used.
void ParseSentinelEnv(const char* const* envp, SentinelEnv* out) noexcept;

// This process's environment, parsed at the first call (thread-safe), problems told once on
// stderr then. Never destroyed.
const SentinelEnv& ProcessSentinelEnv() noexcept;

// Writes each "\n"-terminated line of `lines` to stderr as "[sentinel] <line>" unless this
// process already told that line. Thread-safe. The profiler .so and the net .so each carry a copy
// of this registry (and NCCL loads them RTLD_LOCAL), so when the other one is loaded in this
// process the lines go to its teller (kEnvTellerSymbol) and one "told" set serves the process;
// whichever library is loaded first keeps the set, the second delegates to it.
void TellEnvProblemsOnce(const char* lines, size_t len) noexcept;

// This copy's own teller (no delegation): what each library exports as kEnvTellerSymbol.
void TellEnvProblemsHere(const char* lines, size_t len) noexcept;

// Where this copy's teller writes each problem line (`len` bytes, no newline). Null (the default):
// stderr with the one prefix (common/raw_log.h). sentineld sets its own log here, so that every
// line it writes has its --log-format; set it before the first ProcessSentinelEnv() to catch the
// lines told then. Thread-safe.
using EnvProblemWriter = void (*)(const char* line, size_t len);
void SetEnvProblemWriter(EnvProblemWriter writer) noexcept;

// The C symbol each sentinel library exports for TellEnvProblemsOnce, and the libraries (by
// soname) that carry one.
inline constexpr const char* kEnvTellerSymbol = "sentinelTellEnvProblems";
inline constexpr const char* kEnvTellerLibraries[] = {"libnccl-profiler-sentinel.so",
                                                      "libnccl-net-sentinel.so"};

namespace testing {
// Tests only, with no other thread reading: re-reads the environment into the process instance
// (after a test's setenv). Not told on stderr.
void ReloadProcessSentinelEnv() noexcept;
}  // namespace testing

}  // namespace sentinel::rules

// kEnvTellerSymbol: defined (and exported) by each sentinel library as a call of
// TellEnvProblemsHere; nothing calls it directly, TellEnvProblemsOnce finds it with dlsym.
extern "C" void sentinelTellEnvProblems(const char* lines, size_t len);
