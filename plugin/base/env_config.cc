// Parsing of the SENTINEL_* environment variables (slow path, first init only).
#include "plugin/base/env_config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

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
    if (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0) {
      c.disable = true;
    } else if (strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0 && strcasecmp(v, "no") != 0) {
      *errors += std::string("SENTINEL_DISABLE='") + v + "' is not 0/1; the plugin stays on\n";
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
    char host[256] = {0};
    if (gethostname(host, sizeof(host) - 1) != 0) strcpy(host, "unknown");
    if (char* dot = strchr(host, '.')) *dot = '\0';
    c.dump_path = ExpandDumpPath(v, static_cast<int>(getpid()), host);
  }
  // NOLINTEND(concurrency-mt-unsafe)
  ReadUint("SENTINEL_POOL_SIZE", 16, 1u << 20, &c.pool_size, errors);
  ReadUint("SENTINEL_RINGS", 1, 4096, &c.rings, errors);
  ReadUint("SENTINEL_RING_RECORDS", 2, 1u << 20, &c.ring_records, errors);
  ReadUint("SENTINEL_DRAIN_INTERVAL_MS", 1, 1000, &c.drain_interval_ms, errors);
  ReadUint("SENTINEL_PROXY_GRACE_MS", 1, 60000, &c.proxy_grace_ms, errors);
  ReadUint("SENTINEL_MAX_COMMS", 1, 1u << 16, &c.max_comms, errors);
  ReadUint("SENTINEL_INFLIGHT_STUCK_MS", 0, 86400000, &c.inflight_stuck_ms, errors);
  ReadBudgetPercent(&c.budget_percent, errors);
  uint32_t pow2 = 2;
  while (pow2 < c.ring_records) pow2 <<= 1;
  c.ring_records = pow2;
  return c;
}

}  // namespace sentinel::plugin
