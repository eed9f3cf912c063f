// NCCL-format logging of the fake NCCL; see debug_log.h.
#include "tests/fakes/fake_nccl/debug_log.h"

#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace sentinel::testing {
namespace {

struct LogState {
  std::mutex mu;
  bool initialized = false;
  int level = kLogNone;
  unsigned long subsys = kSubInit | kSubBootstrap | kSubEnv;  // default INIT,BOOTSTRAP,ENV
  FILE* out = nullptr;  // stdout unless NCCL_DEBUG_FILE opened
  bool version_shown = false;
  char host[256] = {0};
};

LogState& State() {
  static LogState* state = new LogState();  // leaked: logging may run during exit
  return *state;
}

thread_local int tls_device = 0;

struct SubsysName {
  const char* name;
  unsigned long bit;
};
constexpr SubsysName kSubsysNames[] = {{"INIT", 0x1},         {"COLL", 0x2},    {"P2P", 0x4},
                                       {"SHM", 0x8},          {"NET", 0x10},    {"GRAPH", 0x20},
                                       {"TUNING", 0x40},      {"ENV", 0x80},    {"ALLOC", 0x100},
                                       {"CALL", 0x200},       {"PROXY", 0x400}, {"NVLS", 0x800},
                                       {"BOOTSTRAP", 0x1000}, {"REG", 0x2000},  {"PROFILE", 0x4000},
                                       {"RAS", 0x8000},       {"ALL", ~0UL}};

unsigned long ParseSubsys(const char* value) {
  bool invert = value[0] == '^';
  if (invert) ++value;
  unsigned long mask = 0;
  std::string list(value);
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    std::string token = list.substr(pos, comma - pos);
    for (const SubsysName& s : kSubsysNames) {
      if (strcasecmp(token.c_str(), s.name) == 0) mask |= s.bit;
    }
    pos = comma + 1;
  }
  return invert ? ~mask : mask;
}

// Caller holds State().mu.
void InitLocked(LogState& s) {
  if (s.initialized) return;
  s.initialized = true;
  char host[sizeof(s.host)] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) strcpy(host, "localhost");
  char* dot = strchr(host, '.');
  if (dot != nullptr) *dot = '\0';
  snprintf(s.host, sizeof(s.host), "%s", host);

  s.level = kLogNone;
  const char* level = getenv("NCCL_DEBUG");
  if (level != nullptr) {
    if (strcasecmp(level, "VERSION") == 0)
      s.level = kLogVersion;
    else if (strcasecmp(level, "WARN") == 0)
      s.level = kLogWarn;
    else if (strcasecmp(level, "INFO") == 0)
      s.level = kLogInfo;
    else if (strcasecmp(level, "ABORT") == 0)
      s.level = kLogAbort;
    else if (strcasecmp(level, "TRACE") == 0)
      s.level = kLogTrace;
  }
  s.subsys = kSubInit | kSubBootstrap | kSubEnv;
  const char* subsys = getenv("NCCL_DEBUG_SUBSYS");
  if (subsys != nullptr) s.subsys = ParseSubsys(subsys);

  if (s.out != nullptr && s.out != stdout) fclose(s.out);
  s.out = stdout;
  const char* file = getenv("NCCL_DEBUG_FILE");
  if (file != nullptr && s.level > kLogVersion) {
    // %h = short hostname, %p = pid, %% = '%', any other %x copied verbatim (docs/nccl-facts.md
    // docs/nccl-facts.md "8.5 `NCCL_DEBUG`").
    std::string path;
    for (const char* p = file; *p != '\0'; ++p) {
      if (*p == '%' && p[1] != '\0') {
        ++p;
        if (*p == 'h')
          path += s.host;
        else if (*p == 'p')
          path += std::to_string(getpid());
        else if (*p == '%')
          path += '%';
        else {
          path += '%';
          path += *p;
        }
      } else {
        path += *p;
      }
    }
    // mode "w": truncated (docs/nccl-facts.md "8.5 `NCCL_DEBUG`")
    FILE* f = fopen(path.c_str(), "we");
    if (f != nullptr) {
      setvbuf(f, nullptr, _IOLBF, 4096);  // line-buffered
      s.out = f;
    }
  }
}

}  // namespace

void SetThreadDevice(int dev) { tls_device = dev; }

const char* ShortHostname() {
  LogState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  InitLocked(s);
  return s.host;
}

void ResetDebugInit() {
  LogState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.initialized = false;
}

void DebugLog(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  LogState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  InitLocked(s);
  if (level > s.level) return;
  if (level == kLogInfo || level == kLogTrace) {
    if ((flags & s.subsys) == 0) return;
  }
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  long tid = syscall(SYS_gettid);
  if (level == kLogWarn) {
    // WARN: a leading empty line, a timestamp, then file:line
    // (docs/nccl-facts.md "8.1 Line prefix").
    char stamp[32];
    time_t now = time(nullptr);
    struct tm tm_now;
    localtime_r(&now, &tm_now);
    strftime(stamp, sizeof(stamp), "[%Y-%m-%d %H:%M:%S] ", &tm_now);
    const char* base = strrchr(file, '/');
    base = base != nullptr ? base + 1 : file;
    fprintf(s.out, "\n%s%s:%d:%ld [%d] %s:%d NCCL WARN %s\n", stamp, s.host, getpid(), tid,
            tls_device, base, line, msg);
  } else if (level == kLogTrace) {
    const char* base = strrchr(file, '/');
    base = base != nullptr ? base + 1 : file;
    fprintf(s.out, "%s:%d:%ld [%d] 0.000000 %s:%d NCCL TRACE %s\n", s.host, getpid(), tid,
            tls_device, base, line, msg);
  } else {
    fprintf(s.out, "%s:%d:%ld [%d] NCCL INFO %s\n", s.host, getpid(), tid, tls_device, msg);
  }
  fflush(s.out);
}

void ShowVersionOnce() {
  LogState& s = State();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    InitLocked(s);
    if (s.version_shown) return;
    s.version_shown = true;
    if (s.level == kLogVersion || s.level == kLogWarn) {
      // No prefix at VERSION/WARN level (docs/nccl-facts.md "8.1 Line prefix",
      // "8.2 Initialisation sequence").
      fprintf(s.out, "NCCL version 2.28.9+cuda13.0\n");
      fflush(s.out);
      return;
    }
  }
  FAKE_INFO(kSubAll, "NCCL version 2.28.9+cuda13.0");
}

}  // namespace sentinel::testing
