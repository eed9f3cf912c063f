// The plugin core's configuration from the one SENTINEL_* reading (common/sentinel_env.h).
#include "plugin/base/env_config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/choice_words.h"
#include "common/host_name.h"
#include "common/sentinel_env.h"
#include "plugin/base/event_mask.h"

namespace sentinel::plugin {
namespace {

// SENTINEL_EVENTS must parse as base/event_mask.h reads it; say precisely why it does not.
void CheckEvents(EnvConfig* c, std::string* errors) {
  uint32_t mask = 0;
  if (ParseEventMask(c->events.c_str(), &mask)) return;
  const std::string& v = c->events;
  std::string why;
  if (!v.empty() && v[0] >= '0' && v[0] <= '9') {
    errno = 0;
    char* end = nullptr;
    const unsigned long long n = strtoull(v.c_str(), &end, 0);
    if (errno == 0 && end != nullptr && *end == '\0' && n > 0x7FFF) {
      why = "sets bits above 0x7fff (the 15 event types of the profiler ABI)";
    } else {
      why = "is not a decimal or 0x number";
    }
  } else {
    // The first list item that is not an event name.
    size_t pos = 0;
    while (pos <= v.size()) {
      size_t comma = v.find(',', pos);
      if (comma == std::string::npos) comma = v.size();
      std::string item = v.substr(pos, comma - pos);
      while (!item.empty() && item.front() == ' ') item.erase(0, 1);
      while (!item.empty() && item.back() == ' ') item.pop_back();
      uint32_t one = 0;
      if (!ParseEventMask(item.c_str(), &one)) {
        why = "has unknown event '" + item + "' (presets: default, proxy, minimal, all, none)";
        break;
      }
      pos = comma + 1;
    }
    if (why.empty()) why = "is not a preset, an event list or a number";
  }
  *errors += "SENTINEL_EVENTS='" + v + "' " + why + "; using 'default'\n";
  c->events = "default";
}

// The dump's directory must exist and be writable now, not at the first record.
void CheckDump(const std::string& path, std::string* errors) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  if (access(dir.c_str(), W_OK) != 0) {
    char buf[128];
    *errors += "SENTINEL_DUMP='" + path + "': directory " + dir + " is not writable (" +
               strerror_r(errno, buf, sizeof(buf)) + "); no dump\n";
  }
}

// The plugin's level for a word of SENTINEL_LOG_LEVEL (common/choice_words.h). The registry offers
// no "critical" (the plugin has no such level); were it offered, it would mean errors only.
LogLevel PluginLogLevel(rules::LogLevelWord w) {
  switch (w) {
    case rules::LogLevelWord::kTrace:
      return LogLevel::kTrace;
    case rules::LogLevelWord::kDebug:
      return LogLevel::kDebug;
    case rules::LogLevelWord::kInfo:
      return LogLevel::kInfo;
    case rules::LogLevelWord::kWarn:
      return LogLevel::kWarn;
    case rules::LogLevelWord::kError:
    case rules::LogLevelWord::kCritical:
      return LogLevel::kError;
    case rules::LogLevelWord::kOff:
      return LogLevel::kOff;
  }
  return LogLevel::kWarn;
}

}  // namespace

void ReportEnvProblems(const std::string& errors) {
  rules::TellEnvProblemsOnce(errors.data(), errors.size());  // one "told" set per process
}

std::string ExpandDumpPath(const std::string& pattern, int pid, const char* short_host) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[i + 1];
      if (c == 'p') {
        out += std::to_string(pid);
        ++i;
        continue;
      }
      if (c == 'h') {
        out += short_host;
        ++i;
        continue;
      }
      if (c == '%') {
        out += '%';
        ++i;
        continue;
      }
    }
    out += pattern[i];
  }
  return out;
}

EnvConfig ParseEnvConfig(const rules::SentinelEnv& env, std::string* errors) {
  using rules::Var;
  EnvConfig c;
  // Every value below was checked (type, range) by the registry; a bad one holds the default
  // and its problem line is in env.problems.
  errors->append(env.problems, env.problems_len);
  c.disable = env.Flag(Var::kDisable);
  if (env.Set(Var::kEvents)) c.events = env.Text(Var::kEvents);
  c.log_level = PluginLogLevel(rules::LogLevelFromEnv(env, rules::LogLevelWord::kWarn));
  if (env.Set(Var::kDump)) {
    char host[256];
    rules::ShortHostName(host, sizeof(host));
    c.dump_path = ExpandDumpPath(env.Text(Var::kDump), static_cast<int>(getpid()), host);
    CheckDump(c.dump_path, errors);
  }
  c.pool_size = static_cast<uint32_t>(env.Number(Var::kPoolSize));
  // Fewer rings than the threads NCCL records from (the application's, the proxy's) sends every
  // other thread's records to the shared overflow, where they are dropped: hence at least 8.
  c.rings = static_cast<uint32_t>(env.Number(Var::kRings));
  c.ring_records = static_cast<uint32_t>(env.Number(Var::kRingRecords));
  c.drain_interval_ms = static_cast<uint32_t>(env.Number(Var::kDrainIntervalMs));
  c.proxy_grace_ms = static_cast<uint32_t>(env.Number(Var::kProxyGraceMs));
  c.max_comms = static_cast<uint32_t>(env.Number(Var::kMaxComms));
  c.inflight_stuck_ms = static_cast<uint32_t>(env.Number(Var::kInflightStuckMs));
  c.budget_percent = env.Real(Var::kBudget);
  uint32_t pow2 = 2;
  while (pow2 < c.ring_records) pow2 <<= 1;
  c.ring_records = pow2;
  CheckEvents(&c, errors);
  ReportEnvProblems(*errors);
  return c;
}

EnvConfig ParseEnvConfig(std::string* errors) {
  return ParseEnvConfig(rules::ProcessSentinelEnv(), errors);
}

}  // namespace sentinel::plugin
