// The SENTINEL_* registry's parser: the one reading of a process's environment, each value
// checked under its row of the table (sentinel_env.cc); bad values and unknown names go to the
// problem list (sentinel_env_problems.cc). See sentinel_env.h.
#include <strings.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/base/attributes.h"

#include "common/env_bool.h"
#include "common/sentinel_env.h"
#include "common/sentinel_env_internal.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, not in every header

namespace sentinel::rules {
namespace {

using env_internal::Problems;

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

bool StartsWith(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

// Written once under the magic static below (or by tests).
ABSL_CONST_INIT SentinelEnv g_process_env;

}  // namespace

bool SentinelEnv::ChoiceIs(Var v, const char* word) const noexcept {
  const EnvVarSpec& spec = Spec(v);
  if (spec.type != EnvType::kEnum || spec.choices == nullptr || word == nullptr) return false;
  return FindChoice(spec.choices, word) == (*this)[v].choice;
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
  for (size_t i = 0; i < kVarCount; ++i) {
    const EnvVarSpec& spec = EnvRegistry()[i];
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
    for (size_t i = 0; i < kVarCount; ++i) {
      const EnvVarSpec& s = EnvRegistry()[i];
      if (std::strlen(s.name) == len && std::strncmp(s.name, entry, len) == 0) spec = &s;
    }
    if (spec == nullptr) {
      if (!env_internal::IsInternalName(entry)) env_internal::ReportUnknown(entry, len, &problems);
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
      env_internal::ReportBad(*spec, text, &problems);
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
