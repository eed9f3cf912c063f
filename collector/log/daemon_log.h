// sentineld's own log, as a system daemon's should be: one line per event, with its level, to
// stderr (journald stores it), as text or as JSON lines (--log-format), and rate-limited so that
// no client, however broken, can flood the journal.
#ifndef SENTINEL_COLLECTOR_LOG_DAEMON_LOG_H_
#define SENTINEL_COLLECTOR_LOG_DAEMON_LOG_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "spdlog/sinks/sink.h"

namespace sentinel::collector {

enum class LogFormat { kText, kJson };

absl::Status ParseLogFormat(absl::string_view text, LogFormat* out);

// Token bucket over all lines: `burst` lines at once, then `per_second`. Lines over the limit
// are counted, and the count is logged (one warning) before the next line that passes.
struct LogRateLimit {
  int burst = 200;
  double per_second = 20;
};

// One formatted line, newline included: text "2026-01-02T03:04:05.678Z warning sentineld: msg",
// JSON {"ts":...,"level":...,"logger":...,"msg":...}. Control characters in the message are
// escaped, so every event stays on one line.
std::string FormatLogLine(LogFormat format, int64_t unix_ns, absl::string_view level,
                          absl::string_view logger, absl::string_view message);

// A sink writing each line with one write(2) to `fd`, under `limit`. `now_ns` (monotonic) is
// replaceable for tests; nullptr = CLOCK_MONOTONIC.
std::shared_ptr<spdlog::sinks::sink> MakeDaemonLogSink(LogFormat format, int fd, LogRateLimit limit,
                                                       int64_t (*now_ns)() = nullptr);

// Makes a logger named "sentineld" on stderr with this format and level the default logger, and
// sends the SENTINEL_* problem lines (common/sentinel_env.h) to it from then on, as warnings.
// Lines held by HoldStartupLines are written first, in this format.
absl::Status ConfigureDaemonLog(absl::string_view format, absl::string_view level);

// Holds the SENTINEL_* problem lines told before the log exists (while the command line is read:
// the socket default and the trusted uids read the environment), so that even sentineld's first
// line has the format --log-format asks for. Call first thing in main.
void HoldStartupLines();

// The value of the last --log-format on the command line ("--log-format X" or "--log-format=X"),
// or `fallback` when there is none: the format of the one line a refused command line gets.
std::string LogFormatFromArgs(int argc, const char* const* argv, absl::string_view fallback);

}  // namespace sentinel::collector

#endif  // SENTINEL_COLLECTOR_LOG_DAEMON_LOG_H_
