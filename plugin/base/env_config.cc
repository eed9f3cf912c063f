// The plugin core's configuration from the one SENTINEL_* reading (common/sentinel_env.h).
#include "plugin/base/env_config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/choice_words.h"
#include "common/errno_text.h"
#include "common/host_name.h"
#include "common/sentinel_env.h"
#include "plugin/base/event_mask.h"

namespace sentinel::plugin {
namespace {

// The dump's directory must exist and be writable now, not at the first record.
Status CheckDump(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  if (access(dir.c_str(), W_OK) != 0) {
    return Status::Format(StatusCode::kUnavailable, "directory %s is not writable (%s)",
                          dir.c_str(), rules::ErrnoText(errno));
  }
  return Status::Ok();
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

Status ParseEnvConfig(const rules::SentinelEnv& env, EnvConfig* out) {
  using rules::Var;
  EnvConfig& c = *out;
  c = EnvConfig();
  // Every value below was checked (type, range) by the registry; a bad one holds the default
  // and its problem line is in env.problems.
  std::string problems(env.problems, env.problems_len);
  c.disable = env.Flag(Var::kDisable);
  if (env.Set(Var::kEvents)) c.events = env.Text(Var::kEvents);
  c.log_level = PluginLogLevel(rules::LogLevelFromEnv(env, rules::LogLevelWord::kWarn));
  if (env.Set(Var::kDump)) {
    char host[256];
    rules::ShortHostName(host, sizeof(host));
    c.dump_path = ExpandDumpPath(env.Text(Var::kDump), static_cast<int>(getpid()), host);
    const Status dump = CheckDump(c.dump_path);
    if (!dump.ok())
      problems += "SENTINEL_DUMP='" + c.dump_path + "': " + dump.message() + "; no dump\n";
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
  // SENTINEL_EVENTS must parse as base/event_mask.h reads it; the status says precisely why it
  // does not, in words that follow the quoted value.
  uint32_t events_mask = 0;
  const Status events = ParseEventMask(c.events.c_str(), &events_mask);
  if (!events.ok()) {
    problems += "SENTINEL_EVENTS='" + c.events + "' " + events.message() + "; using 'default'\n";
    c.events = "default";
  }
  ReportEnvProblems(problems);
  if (problems.empty()) return Status::Ok();
  return Status::Copy(StatusCode::kInvalidArgument, problems.c_str());
}

Status ParseEnvConfig(EnvConfig* out) { return ParseEnvConfig(rules::ProcessSentinelEnv(), out); }

}  // namespace sentinel::plugin
