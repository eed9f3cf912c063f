// The plugin's logger: one leaked, synchronous spdlog logger named "sentinel" (spdlog stays inside
// log.cc). Lines go to NCCL's logger when NCCL gave us one (so NCCL_DEBUG governs them), else to
// stderr. Slow paths only: never log from startEvent/stopEvent/recordEventState.
#pragma once

#include <atomic>
#include <cstdint>

#include "plugin/abi/nccl_profiler_abi.h"

namespace sentinel::plugin {

enum class LogLevel : int { kTrace = 0, kDebug = 1, kInfo = 2, kWarn = 3, kError = 4, kOff = 6 };

// Sets the level (from SENTINEL_LOG_LEVEL) and creates the logger. Safe to call more than once.
void ConfigureLog(LogLevel level) noexcept;
// Forwards later lines to NCCL's logger (null: back to stderr). The first one given wins.
void SetNcclLogger(SentinelNcclLogger logfn) noexcept;
// The rank shown in the "[sentinel pid rank]" prefix (the first communicator's rank).
void SetLogRank(int rank) noexcept;
// printf-style; never throws, never allocates on failure paths that matter.
__attribute__((format(printf, 2, 3))) void Log(LogLevel level, const char* fmt, ...) noexcept;
// Number of logging failures swallowed by the error handler.
uint64_t LogErrorCount() noexcept;

// A limit on how often one kind of line may be written: at most `burst` lines in each window of
// `window_ns` (fixed windows, CLOCK_MONOTONIC). For every line whose text a peer or a file can
// cause (a hang verdict from the socket, ...): a peer that sends the same thing a million times
// gets a few lines and a count, never a flood on the job's stderr. Thread-safe, no allocation.
class LogRateLimiter {
 public:
  constexpr LogRateLimiter(uint32_t burst, int64_t window_ns) noexcept
      : burst_(burst), window_ns_(window_ns) {}
  // True when a line may be written at `now_ns`; then *suppressed (if not null) is the number of
  // lines refused since the last one allowed, for the caller to say ("N more suppressed").
  bool Allow(int64_t now_ns, uint64_t* suppressed) noexcept;

 private:
  const uint32_t burst_;
  const int64_t window_ns_;
  std::atomic<bool> busy_{false};  // a tiny spin lock: the fields below change together
  int64_t window_start_ns_ = 0;
  uint32_t used_ = 0;
  uint64_t suppressed_ = 0;
};

}  // namespace sentinel::plugin

// Logs once per call site for the life of the process.
#define SENTINEL_LOG_ONCE(level, ...)                                        \
  do {                                                                       \
    static std::atomic<bool> sentinel_log_once_done{false};                  \
    if (!sentinel_log_once_done.exchange(true, std::memory_order_relaxed)) { \
      ::sentinel::plugin::Log(level, __VA_ARGS__);                           \
    }                                                                        \
  } while (0)
