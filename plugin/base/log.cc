// spdlog wiring of the plugin logger (header-only spdlog and fmt, hidden inside the .so).
#include "plugin/base/log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/attributes.h"
#include "spdlog/logger.h"
#include "spdlog/sinks/base_sink.h"

#include "plugin/base/no_destructor.h"
#include "plugin/base/raw_log.h"

namespace sentinel::plugin {
namespace {

// relaxed: a logger pointer is published once and the function it points to is immutable.
ABSL_CONST_INIT std::atomic<SentinelNcclLogger> g_nccl_logfn{nullptr};
ABSL_CONST_INIT std::atomic<uint64_t> g_log_errors{0};

// Writes each formatted line to NCCL's logger when one is set, else to stderr.
class NcclForwardSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    std::string line(formatted.data(), formatted.size());
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    SentinelNcclLogger fn = g_nccl_logfn.load(std::memory_order_acquire);
    if (fn != nullptr) {
      SentinelNcclLogLevel nl = kSentinelNcclLogInfo;
      if (msg.level >= spdlog::level::warn) nl = kSentinelNcclLogWarn;
      if (msg.level == spdlog::level::trace) nl = kSentinelNcclLogTrace;
      fn(nl, SENTINEL_NCCL_SUBSYS_PROFILE | SENTINEL_NCCL_SUBSYS_INIT, "sentinel", 0, "%s",
         line.c_str());
      return;
    }
    line.push_back('\n');
    RawWriteStderr(line.data(), line.size());  // prefixed above, by the pattern
  }
  void flush_() override {}
};

struct LoggerState {
  // The prefix is common/raw_log.h's "[sentinel <pid>] " (the rank after the pid once known).
  LoggerState() : logger("sentinel", std::make_shared<NcclForwardSink>()) {
    logger.set_pattern("[sentinel %P] %v");
    logger.set_level(spdlog::level::warn);
    logger.set_error_handler(
        [](const std::string&) { g_log_errors.fetch_add(1, std::memory_order_relaxed); });
  }
  spdlog::logger logger;
};

LoggerState* State() noexcept {
  // Leaked on purpose: usable from atexit handlers and late threads.
  static NoDestructor<LoggerState>* state = [] {
    try {
      return new NoDestructor<LoggerState>();
    } catch (...) {
      return static_cast<NoDestructor<LoggerState>*>(nullptr);
    }
  }();
  return state == nullptr ? nullptr : state->get();
}

spdlog::level::level_enum ToSpd(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return spdlog::level::trace;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::warn;
}

}  // namespace

void ConfigureLog(LogLevel level) noexcept {
  try {
    if (LoggerState* s = State()) s->logger.set_level(ToSpd(level));
  } catch (...) {
    g_log_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

void SetNcclLogger(SentinelNcclLogger logfn) noexcept {
  SentinelNcclLogger expected = nullptr;
  // acq_rel/acquire pairs with the sink's acquire load; the first logger given wins.
  g_nccl_logfn.compare_exchange_strong(expected, logfn, std::memory_order_acq_rel,
                                       std::memory_order_acquire);
}

void SetLogRank(int rank) noexcept {
  try {
    if (LoggerState* s = State()) {
      s->logger.set_pattern("[sentinel %P " + std::to_string(rank) + "] %v");
    }
  } catch (...) {
    g_log_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

void Log(LogLevel level, const char* fmt, ...) noexcept {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0) return;
  try {
    LoggerState* s = State();
    if (s == nullptr) {
      RawLog("%s", buf);
      return;
    }
    s->logger.log(ToSpd(level), "{}", static_cast<const char*>(buf));
  } catch (...) {
    g_log_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

uint64_t LogErrorCount() noexcept { return g_log_errors.load(std::memory_order_relaxed); }

bool LogRateLimiter::Allow(int64_t now_ns, uint64_t* suppressed) noexcept {
  // acquire/release: the holder's writes of the fields are seen by the next holder.
  while (busy_.exchange(true, std::memory_order_acquire)) {
  }
  bool allow = false;
  uint64_t told = 0;
  if (used_ == 0 || now_ns - window_start_ns_ >= window_ns_ || now_ns < window_start_ns_) {
    window_start_ns_ = now_ns;
    used_ = 0;
  }
  if (used_ < burst_) {
    ++used_;
    allow = true;
    told = suppressed_;
    suppressed_ = 0;
  } else {
    ++suppressed_;
  }
  busy_.store(false, std::memory_order_release);
  if (suppressed != nullptr) *suppressed = told;
  return allow;
}

}  // namespace sentinel::plugin
