// Parsing of the SENTINEL_* environment variables (slow path, first init only).
#include "plugin/base/env_config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/env_bool.h"
#include "common/host_name.h"
#include "plugin/core/event_mask.h"

namespace sentinel::plugin {
namespace {

// Reads an unsigned integer variable in [lo, hi]; anything else keeps the default.
void ReadUint(const char* name, uint32_t lo, uint32_t hi, uint32_t* value, std::string* errors) {
  const char* v = getenv(name);  // NOLINT(concurrency-mt-unsafe): first init, nobody sets env
  if (v == nullptr || *v == '\0') return;
  char* end = nullptr;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || n < lo || n > hi) {
    *errors += std::string(name) + "='" + v + "' is not an integer in [" + std::to_string(lo) +
               ", " + std::to_string(hi) + "]; using " + std::to_string(*value) + "\n";
    return;
  }
  *value = static_cast<uint32_t>(n);
}

// SENTINEL_EVENTS must parse as core/event_mask.h reads it; say precisely why it does not.
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

// SENTINEL_BUDGET: a percentage of the job's time in [0, 100], "0.5" or "0.5%"; 0 = no budget.
void ReadBudgetPercent(double* value, std::string* errors) {
  const char* v = getenv("SENTINEL_BUDGET");  // NOLINT(concurrency-mt-unsafe): first init
  if (v == nullptr || *v == '\0') return;
  char* end = nullptr;
  errno = 0;
  double d = strtod(v, &end);
  if (end != v && *end == '%') ++end;
  if (errno != 0 || end == v || *end != '\0' || !(d >= 0.0 && d <= 100.0)) {
    *errors += std::string("SENTINEL_BUDGET='") + v + "' is not a percentage in [0, 100]; using " +
               std::to_string(*value) + "\n";
    return;
  }
  *value = d;
}

}  // namespace

void ReportEnvProblems(const std::string& errors) {
  static std::mutex mu;
  static std::string* told = new std::string();  // leaked: reports may come during exit
  std::lock_guard<std::mutex> lock(mu);
  size_t pos = 0;
  while (pos < errors.size()) {
    size_t nl = errors.find('\n', pos);
    if (nl == std::string::npos) nl = errors.size();
    const std::string line = errors.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty() || told->find(line + "\n") != std::string::npos) continue;
    *told += line + "\n";
    const std::string out = "[sentinel] " + line + "\n";
    (void)!write(STDERR_FILENO, out.data(), out.size());
  }
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

EnvConfig ParseEnvConfig(std::string* errors) {
  EnvConfig c;
  // NOLINTBEGIN(concurrency-mt-unsafe): read once at the first init.
  if (const char* v = getenv("SENTINEL_DISABLE"); v != nullptr && *v != '\0') {
    const rules::EnvBool b = rules::ParseEnvBool(v);  // the rule the guard applies too
    c.disable = b == rules::EnvBool::kTrue;
    if (b == rules::EnvBool::kInvalid) {
      *errors += std::string("SENTINEL_DISABLE='") + v +
                 "' is not 1/true/yes/on or 0/false/no/off; sentinel stays on\n";
    }
  }
  if (const char* v = getenv("SENTINEL_EVENTS"); v != nullptr && *v != '\0') c.events = v;
  if (const char* v = getenv("SENTINEL_LOG_LEVEL"); v != nullptr && *v != '\0') {
    struct {
      const char* name;
      LogLevel level;
    } const kLevels[] = {{"trace", LogLevel::kTrace},  {"debug", LogLevel::kDebug},
                         {"info", LogLevel::kInfo},    {"warn", LogLevel::kWarn},
                         {"warning", LogLevel::kWarn}, {"error", LogLevel::kError},
                         {"off", LogLevel::kOff}};
    bool found = false;
    for (const auto& l : kLevels) {
      if (strcasecmp(v, l.name) == 0) {
        c.log_level = l.level;
        found = true;
      }
    }
    if (!found) *errors += std::string("SENTINEL_LOG_LEVEL='") + v + "' is unknown; using warn\n";
  }
  if (const char* v = getenv("SENTINEL_DUMP"); v != nullptr && *v != '\0') {
    char host[256];
    rules::ShortHostName(host, sizeof(host));
    c.dump_path = ExpandDumpPath(v, static_cast<int>(getpid()), host);
    CheckDump(c.dump_path, errors);
  }
  // NOLINTEND(concurrency-mt-unsafe)
  ReadUint("SENTINEL_POOL_SIZE", 16, 1u << 20, &c.pool_size, errors);
  // Fewer rings than the threads NCCL records from (the application's, the proxy's) sends every
  // other thread's records to the shared overflow, where they are dropped.
  ReadUint("SENTINEL_RINGS", 8, 4096, &c.rings, errors);
  ReadUint("SENTINEL_RING_RECORDS", 2, 1u << 20, &c.ring_records, errors);
  ReadUint("SENTINEL_DRAIN_INTERVAL_MS", 1, 1000, &c.drain_interval_ms, errors);
  ReadUint("SENTINEL_PROXY_GRACE_MS", 1, 60000, &c.proxy_grace_ms, errors);
  ReadUint("SENTINEL_MAX_COMMS", 1, 1u << 16, &c.max_comms, errors);
  ReadUint("SENTINEL_INFLIGHT_STUCK_MS", 0, 86400000, &c.inflight_stuck_ms, errors);
  ReadBudgetPercent(&c.budget_percent, errors);
  uint32_t pow2 = 2;
  while (pow2 < c.ring_records) pow2 <<= 1;
  c.ring_records = pow2;
  CheckEvents(&c, errors);
  ReportEnvProblems(*errors);
  return c;
}

}  // namespace sentinel::plugin
