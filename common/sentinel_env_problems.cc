// The SENTINEL_* registry's problem reporting: the texts for a bad value and an unknown name
// ("did you mean"), and telling them once per process, through the other sentinel library when
// both are loaded (see sentinel_env.h). The table is sentinel_env.cc, the parser
// sentinel_env_parse.cc.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "common/raw_log.h"
#include "common/sentinel_env.h"
#include "common/sentinel_env_internal.h"

namespace sentinel::rules {
namespace env_internal {

void Problems::Add(const char* fmt, ...) {
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

namespace {
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

}  // namespace

void ReportUnknown(const char* name, size_t len, Problems* p) {
  const EnvVarSpec* best = nullptr;
  size_t best_d = 3;  // suggest only a near miss (a typo)
  for (size_t i = 0; i < kVarCount; ++i) {
    const EnvVarSpec& s = EnvRegistry()[i];
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

}  // namespace env_internal

namespace {
using EnvTeller = void (*)(const char*, size_t);

std::atomic<EnvProblemWriter> g_writer{nullptr};

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
    const EnvProblemWriter writer = g_writer.load(std::memory_order_acquire);
    if (writer != nullptr) {
      writer(line, n);
    } else {
      RawLogText(line, n);
    }
  }
}

void SetEnvProblemWriter(EnvProblemWriter writer) noexcept {
  g_writer.store(writer, std::memory_order_release);
}

}  // namespace sentinel::rules
