// NCCL log capture: constructor-time redirection to a memfd, a forwarder thread that reproduces the
// user's own view of the log, and the parser feed (see log_capture.h and plugin/guard/README.md).
#include "plugin/guard/log_capture.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/base/attributes.h"

#include "common/env_bool.h"
#include "plugin/base/no_destructor.h"
#include "plugin/base/thread.h"
#include "plugin/guard/expect_source.h"

namespace sentinel::guard {
namespace {

constexpr const char* kOrigPrefix = "SENTINEL_ORIG_";
constexpr const char* kVars[] = {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"};

// Set by the constructor (plain data only: no global constructors, nothing to destroy).
// g_mode is read by other threads after the constructor ran; relaxed is enough because the
// dynamic loader runs constructors before any thread of ours exists.
ABSL_CONST_INIT std::atomic<int> g_mode{static_cast<int>(CaptureMode::kOff)};
ABSL_CONST_INIT int g_fd = -1;
ABSL_CONST_INIT int g_user_level = 0;
ABSL_CONST_INIT pid_t g_pid = 0;
// The log forwarder; joined at exit by its own process.
ABSL_CONST_INIT std::thread* g_forwarder = nullptr;
ABSL_CONST_INIT bool g_user_file_set = false;
ABSL_CONST_INIT char g_user_file[1024];
ABSL_CONST_INIT const char* g_unavailable = "";

bool IsWarnLine(std::string_view line) {
  return line.find(" NCCL WARN ") != std::string_view::npos;
}

// Forwards to the user's destination. NCCL writes its log to the process's `stdout` FILE* (with
// no flush) unless NCCL_DEBUG_FILE names a file: we go through the same FILE*, so NCCL's lines
// keep their place among the program's own buffered output.
void WriteAll(int fd, const std::string& bytes);
void Emit(int fd, const std::string& bytes) {
  if (bytes.empty()) return;
  if (fd == STDOUT_FILENO) {
    (void)std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    return;
  }
  WriteAll(fd, bytes);
}

void WriteAll(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the user's destination is gone; nothing sensible to do
    off += static_cast<size_t>(n);
  }
}

// Stash the user's value of `name` as SENTINEL_ORIG_<name> ("=value" or "!" for unset).
// The environment is changed only here and in the install below, on the thread that creates the
// first communicator, before NCCL reads its logging variables (hence the NOLINTs).
void Stash(const char* name) {
  char key[64];
  std::snprintf(key, sizeof key, "%s%s", kOrigPrefix, name);
  const char* v = getenv(name);
  if (v == nullptr) {
    setenv(key, "!", 1);  // NOLINT(concurrency-mt-unsafe)
    return;
  }
  char buf[2048];
  std::snprintf(buf, sizeof buf, "=%s", v);
  setenv(key, buf, 1);  // NOLINT(concurrency-mt-unsafe)
}

// A child that inherited our modified environment: put the user's settings back first.
void RestoreOriginals() {
  for (const char* name : kVars) {
    char key[64];
    std::snprintf(key, sizeof key, "%s%s", kOrigPrefix, name);
    const char* v = getenv(key);
    if (v == nullptr) continue;
    if (v[0] == '=') {
      setenv(name, v + 1, 1);  // NOLINT(concurrency-mt-unsafe)
    } else {
      unsetenv(name);  // NOLINT(concurrency-mt-unsafe)
    }
    unsetenv(key);  // NOLINT(concurrency-mt-unsafe)
  }
}

// SENTINEL_EXPECT, SENTINEL_EXPECT_FILE, or sentineld's node default file next to the socket:
// getenv and one stat(2), cheap enough for a constructor that runs in every child process.
bool ExpectationConfigured() { return ExpectationMayApply(); }

struct CaptureState {
  std::mutex mu;
  LineForwarder forwarder{CaptureMode::kOff, 0};
  LogEvidence evidence;
  int out_fd = -1;
  uint64_t offset = 0;
  bool finished = false;
};

CaptureState& State() {
  // Never destroyed: used during exit.
  static plugin::NoDestructor<CaptureState> state;
  static const bool ready = [] {
    state->forwarder = LineForwarder(
        static_cast<CaptureMode>(g_mode.load(std::memory_order_relaxed)), g_user_level);
    return true;
  }();
  (void)ready;
  return *state;
}

std::string ExpandUserFile() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  if (char* dot = std::strchr(host, '.')) *dot = '\0';
  std::string path;
  for (const char* p = g_user_file; *p != '\0'; ++p) {
    if (*p == '%' && p[1] != '\0') {
      ++p;
      if (*p == 'h') {
        path += host;
      } else if (*p == 'p') {
        path += std::to_string(getpid());
      } else if (*p == '%') {
        path += '%';
      } else {
        path += '%';
        path += *p;
      }
    } else {
      path += *p;
    }
  }
  return path;
}

// Caller holds s.mu. Opens the user's destination the way NCCL would have (truncating).
void OpenOutputLocked(CaptureState& s) {
  if (s.out_fd >= 0) return;
  s.out_fd = 1;
  if (g_user_file_set && g_user_level > 1) {
    int fd = open(ExpandUserFile().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd >= 0) s.out_fd = fd;
  }
}

// Caller holds s.mu. True when NCCL had written something new.
bool DrainLocked(CaptureState& s) {
  if (g_fd < 0 || s.finished) return false;
  const uint64_t before = s.offset;
  OpenOutputLocked(s);
  char buf[64 * 1024];
  std::string out;
  for (;;) {
    ssize_t n = pread(g_fd, buf, sizeof buf, static_cast<off_t>(s.offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    s.offset += static_cast<uint64_t>(n);
    out.clear();
    s.forwarder.Feed(std::string_view(buf, static_cast<size_t>(n)), &s.evidence, &out);
    Emit(s.out_fd, out);
  }
  // Give back the memory of what was consumed (NCCL keeps writing at its own offset).
  uint64_t punch = s.offset & ~static_cast<uint64_t>(4095);
  if (punch > 0) {
    (void)fallocate(g_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(punch));
  }
  return s.offset != before;
}

bool Active() {
  auto mode = static_cast<CaptureMode>(g_mode.load(std::memory_order_relaxed));
  return (mode == CaptureMode::kFilter || mode == CaptureMode::kVerbatim) && g_fd >= 0 &&
         getpid() == g_pid;
}

}  // namespace

ABSL_CONST_INIT std::atomic<bool> g_drain_after_collectives{false};
ABSL_CONST_INIT std::atomic<int> g_collective_drains{0};

int NcclDebugLevel(const char* value) {
  if (value == nullptr) return 0;
  if (strcasecmp(value, "VERSION") == 0) return 1;
  if (strcasecmp(value, "WARN") == 0) return 2;
  if (strcasecmp(value, "INFO") == 0) return 3;
  if (strcasecmp(value, "ABORT") == 0) return 4;
  if (strcasecmp(value, "TRACE") == 0) return 5;
  return 0;
}

bool SubsysShowsInit(const char* value) {
  if (value == nullptr) return true;  // default INIT,BOOTSTRAP,ENV
  bool invert = value[0] == '^';
  if (invert) ++value;
  bool listed = false;
  const char* p = value;
  while (*p != '\0') {
    const char* comma = std::strchr(p, ',');
    size_t len = comma == nullptr ? std::strlen(p) : static_cast<size_t>(comma - p);
    if ((len == 4 && strncasecmp(p, "INIT", 4) == 0) ||
        (len == 3 && strncasecmp(p, "ALL", 3) == 0)) {
      listed = true;
    }
    if (comma == nullptr) break;
    p = comma + 1;
  }
  return invert ? !listed : listed;
}

bool SubsysShowsPerCallLines(const char* value) {
  if (value == nullptr) return false;  // INIT,BOOTSTRAP,ENV: nothing per collective
  if (value[0] == '^') return true;    // everything but a few
  const char* p = value;
  while (*p != '\0') {
    const char* comma = std::strchr(p, ',');
    size_t len = comma == nullptr ? std::strlen(p) : static_cast<size_t>(comma - p);
    bool quiet = (len == 4 && strncasecmp(p, "INIT", 4) == 0) ||
                 (len == 9 && strncasecmp(p, "BOOTSTRAP", 9) == 0) ||
                 (len == 3 && strncasecmp(p, "ENV", 3) == 0) || len == 0;
    if (!quiet) return true;
    if (comma == nullptr) break;
    p = comma + 1;
  }
  return false;
}

CaptureMode DecideCaptureMode(const char* nccl_debug, const char* nccl_debug_subsys) {
  int level = NcclDebugLevel(nccl_debug);
  if (level < 3) return CaptureMode::kFilter;
  return SubsysShowsInit(nccl_debug_subsys) ? CaptureMode::kVerbatim : CaptureMode::kUnavailable;
}

void LineForwarder::Feed(std::string_view bytes, LogEvidence* ev, std::string* out) {
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(bytes.data(), bytes.size());
      return;
    }
    if (partial_.empty()) {
      Line(bytes.substr(0, nl), true, ev, out);
    } else {
      partial_.append(bytes.data(), nl);
      std::string line;
      line.swap(partial_);
      Line(line, true, ev, out);
    }
    bytes.remove_prefix(nl + 1);
  }
}

void LineForwarder::Finish(LogEvidence* ev, std::string* out) {
  if (!partial_.empty()) {
    std::string line;
    line.swap(partial_);
    Line(line, false, ev, out);
  }
}

void LineForwarder::Line(std::string_view line, bool had_newline, LogEvidence* ev,
                         std::string* out) {
  ParseNcclLogLine(line, ev);
  if (mode_ == CaptureMode::kVerbatim) {
    out->append(line.data(), line.size());
    if (had_newline) out->push_back('\n');
    return;
  }
  if (mode_ != CaptureMode::kFilter) return;
  if (line.empty()) {
    ++pending_blank_;
    return;
  }
  int blanks = pending_blank_;
  pending_blank_ = 0;
  if (user_level_ >= 2 && IsWarnLine(line)) {
    out->append(static_cast<size_t>(blanks), '\n');
    out->append(line.data(), line.size());
    if (had_newline) out->push_back('\n');
    return;
  }
  // The version line: an INFO line now, a bare line at the user's VERSION/WARN level
  // (docs/nccl-facts.md "8.2 Initialisation sequence").
  size_t info = line.find(" NCCL INFO NCCL version ");
  if (user_level_ >= 1 && info != std::string_view::npos) {
    out->append("NCCL version ");
    std::string_view v = line.substr(info + 24);
    out->append(v.data(), v.size());
    if (had_newline) out->push_back('\n');
  }
}

void InstallLogCapture(bool preloaded) noexcept {
  if (rules::SentinelDisabled()) {  // the one boolean rule (common/env_bool.h)
    RestoreOriginals();
    return;
  }
  RestoreOriginals();
  if (!preloaded || !ExpectationConfigured()) return;
  const char* level = getenv("NCCL_DEBUG");
  const char* subsys = getenv("NCCL_DEBUG_SUBSYS");
  CaptureMode mode = DecideCaptureMode(level, subsys);
  g_user_level = NcclDebugLevel(level);
  if (mode == CaptureMode::kUnavailable) {
    g_unavailable =
        "NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS excluding INIT: the user's log "
        "settings were left alone";
    g_mode.store(static_cast<int>(mode), std::memory_order_relaxed);
    return;
  }
  int fd = memfd_create("sentinel-nccl-log", MFD_CLOEXEC);
  if (fd < 0) {
    g_unavailable = "memfd_create failed";
    g_mode.store(static_cast<int>(CaptureMode::kUnavailable), std::memory_order_relaxed);
    return;
  }
  const char* file = getenv("NCCL_DEBUG_FILE");
  g_user_file_set = file != nullptr;
  if (file != nullptr) std::snprintf(g_user_file, sizeof g_user_file, "%s", file);
  for (const char* name : kVars) Stash(name);
  if (mode == CaptureMode::kFilter) {
    setenv("NCCL_DEBUG", "INFO", 1);             // NOLINT(concurrency-mt-unsafe)
    setenv("NCCL_DEBUG_SUBSYS", "INIT,ENV", 1);  // NOLINT(concurrency-mt-unsafe)
  }
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  setenv("NCCL_DEBUG_FILE", path, 1);  // NOLINT(concurrency-mt-unsafe)
  g_fd = fd;
  g_pid = getpid();
  g_drain_after_collectives.store(mode == CaptureMode::kVerbatim && SubsysShowsPerCallLines(subsys),
                                  std::memory_order_relaxed);
  g_mode.store(static_cast<int>(mode), std::memory_order_relaxed);
}

plugin::Status StartLogForwarder() noexcept {
  if (!Active()) return plugin::Status::Ok();
  static std::once_flag once;
  static plugin::Status started;  // written once, inside call_once
  std::call_once(once, [] {
    {
      CaptureState& s = State();
      std::lock_guard<std::mutex> lock(s.mu);
      OpenOutputLocked(s);  // NCCL creates its file at its first log call: so do we
    }
    // plugin::StartThread blocks every signal in the thread (the host's handlers stay the
    // host's); DrainLogCaptureAtExit joins it.
    g_forwarder = plugin::StartThread("sentinel-logfwd", [] {
      for (;;) {
        usleep(20 * 1000);
        if (getpid() != g_pid) return;
        CaptureState& s = State();
        std::lock_guard<std::mutex> lock(s.mu);
        DrainLocked(s);
        if (s.finished) return;
      }
    });
    if (g_forwarder == nullptr) {
      started = plugin::Status(plugin::StatusCode::kResourceExhausted,
                               "cannot start the log forwarder thread");
    }
  });
  return started;
}

plugin::Status SnapshotLogEvidence(LogEvidence* out) {
  using plugin::Status;
  using plugin::StatusCode;
  auto mode = static_cast<CaptureMode>(g_mode.load(std::memory_order_relaxed));
  if (mode == CaptureMode::kOff) {
    return Status(StatusCode::kFailedPrecondition,
                  "no log capture (not preloaded, or no expectation at process start)");
  }
  if (mode == CaptureMode::kUnavailable) {
    return Status(StatusCode::kUnavailable, g_unavailable);  // always a literal
  }
  if (getpid() != g_pid) {
    return Status(StatusCode::kFailedPrecondition,
                  "forked child: the log capture belongs to the parent");
  }
  CaptureState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  DrainLocked(s);
  *out = s.evidence;
  return Status::Ok();
}

void DrainLogAfterCall() noexcept {
  if (!Active()) return;
  try {
    CaptureState& s = State();
    std::lock_guard<std::mutex> lock(s.mu);
    DrainLocked(s);
    // NCCL connects lazily: the first collectives after a creation print their connection lines.
    g_collective_drains.store(kCollectiveDrainsAfterQuiet, std::memory_order_relaxed);
  } catch (...) {
  }
}

void DrainLogAfterCollectiveSlow() noexcept {
  if (!Active()) return;
  try {
    CaptureState& s = State();
    std::lock_guard<std::mutex> lock(s.mu);
    if (DrainLocked(s)) {
      g_collective_drains.store(kCollectiveDrainsAfterQuiet, std::memory_order_relaxed);
    } else if (g_collective_drains.load(std::memory_order_relaxed) > 0) {
      g_collective_drains.fetch_sub(1, std::memory_order_relaxed);
    }
  } catch (...) {
  }
}

void DrainLogCaptureAtExit() noexcept {
  if (!Active()) return;
  bool finished = false;
  try {
    CaptureState& s = State();
    std::lock_guard<std::mutex> lock(s.mu);
    DrainLocked(s);
    std::string out;
    s.forwarder.Finish(&s.evidence, &out);
    Emit(s.out_fd, out);
    s.finished = finished = true;
  } catch (...) {
  }
  // Outside the lock: the forwarder sees `finished` within one 20 ms nap and returns. A forked
  // child has no forwarder thread of its own to join.
  if (finished && getpid() == g_pid) plugin::JoinThread(g_forwarder);
}

CaptureMode CurrentCaptureMode() {
  return static_cast<CaptureMode>(g_mode.load(std::memory_order_relaxed));
}

}  // namespace sentinel::guard
