#include "collector/log/daemon_log.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/sinks/base_sink.h"
#include "spdlog/spdlog.h"

#include "collector/base/clock.h"
#include "common/sentinel_env.h"

namespace sentinel::collector {
namespace {

// JSON string body: quotes, backslashes and control characters escaped.
void AppendEscaped(std::string* out, absl::string_view s, bool json) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' && json) {
      out->append("\\\"");
    } else if (c == '\\' && json) {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '\t') {
      out->append("\\t");
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppendFormat(out, "\\u%04x", c);
    } else {
      out->push_back(ch);
    }
  }
}

class DaemonLogSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  DaemonLogSink(LogFormat format, int fd, LogRateLimit limit, int64_t (*now_ns)())
      : format_(format),
        fd_(fd),
        limit_(limit),
        now_ns_(now_ns != nullptr ? now_ns : [] { return RealClock()->MonoNs(); }),
        tokens_(limit.burst),
        last_ns_(now_ns_()) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const int64_t now = now_ns_();
    tokens_ = std::min<double>(
        limit_.burst, tokens_ + static_cast<double>(now - last_ns_) / 1e9 * limit_.per_second);
    last_ns_ = now;
    if (tokens_ < 1) {
      ++suppressed_;
      return;
    }
    tokens_ -= 1;
    const int64_t unix_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(msg.time.time_since_epoch()).count();
    const absl::string_view logger(msg.logger_name.data(), msg.logger_name.size());
    std::string line;
    if (suppressed_ > 0) {
      line = FormatLogLine(format_, unix_ns, "warning", logger,
                           absl::StrCat(suppressed_, " log line(s) suppressed by the rate limit (",
                                        limit_.burst, " at once, then ", limit_.per_second, "/s)"));
      suppressed_ = 0;
    }
    const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
    line += FormatLogLine(format_, unix_ns, absl::string_view(level.data(), level.size()), logger,
                          absl::string_view(msg.payload.data(), msg.payload.size()));
    WriteAll(line);
  }
  void flush_() override {}

 private:
  void WriteAll(absl::string_view s) {
    while (!s.empty()) {
      const ssize_t n = write(fd_, s.data(), s.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // stderr gone: nothing better to do than drop the line
      s.remove_prefix(static_cast<size_t>(n));
    }
  }

  const LogFormat format_;
  const int fd_;
  const LogRateLimit limit_;
  int64_t (*const now_ns_)();
  double tokens_;
  int64_t last_ns_;
  uint64_t suppressed_ = 0;
};

// The SENTINEL_* problem lines told before the log exists, in order (HoldStartupLines).
struct HeldLines {
  std::mutex mu;
  std::vector<std::string> lines;
};
HeldLines& Held() {
  static auto* held = new HeldLines;  // never destroyed: a late line must not meet a dead vector
  return *held;
}

void HoldLine(const char* line, size_t len) {
  HeldLines& h = Held();
  std::lock_guard<std::mutex> lock(h.mu);
  h.lines.emplace_back(line, len);
}

void LogEnvProblem(const char* line, size_t len) { spdlog::warn("{}", std::string(line, len)); }

}  // namespace

absl::Status ParseLogFormat(absl::string_view text, LogFormat* out) {
  if (text == "text") {
    *out = LogFormat::kText;
  } else if (text == "json") {
    *out = LogFormat::kJson;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-format: expected text or json, got '", text, "'"));
  }
  return absl::OkStatus();
}

std::string FormatLogLine(LogFormat format, int64_t unix_ns, absl::string_view level,
                          absl::string_view logger, absl::string_view message) {
  const time_t secs = static_cast<time_t>(unix_ns / 1000000000);
  tm utc{};
  gmtime_r(&secs, &utc);
  const std::string ts = absl::StrFormat("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                                         utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min,
                                         utc.tm_sec, static_cast<int>(unix_ns / 1000000 % 1000));
  std::string out;
  if (format == LogFormat::kJson) {
    absl::StrAppend(&out, "{\"ts\":\"", ts, "\",\"level\":\"", level, "\",\"logger\":\"");
    AppendEscaped(&out, logger, true);
    out.append("\",\"msg\":\"");
    AppendEscaped(&out, message, true);
    out.append("\"}\n");
  } else {
    absl::StrAppend(&out, ts, " ", level, " ", logger, ": ");
    AppendEscaped(&out, message, false);
    out.push_back('\n');
  }
  return out;
}

std::shared_ptr<spdlog::sinks::sink> MakeDaemonLogSink(LogFormat format, int fd, LogRateLimit limit,
                                                       int64_t (*now_ns)()) {
  return std::make_shared<DaemonLogSink>(format, fd, limit, now_ns);
}

absl::Status ConfigureDaemonLog(absl::string_view format, absl::string_view level) {
  LogFormat f = LogFormat::kText;
  absl::Status s = ParseLogFormat(format, &f);
  if (!s.ok()) return s;
  auto logger = std::make_shared<spdlog::logger>(
      "sentineld", MakeDaemonLogSink(f, STDERR_FILENO, LogRateLimit{}));
  logger->set_level(spdlog::level::from_str(std::string(level)));
  spdlog::set_default_logger(std::move(logger));
  std::vector<std::string> held;
  {
    HeldLines& h = Held();
    std::lock_guard<std::mutex> lock(h.mu);
    held.swap(h.lines);
  }
  for (const std::string& line : held) LogEnvProblem(line.data(), line.size());
  rules::SetEnvProblemWriter(&LogEnvProblem);
  return absl::OkStatus();
}

void HoldStartupLines() { rules::SetEnvProblemWriter(&HoldLine); }

std::string LogFormatFromArgs(int argc, const char* const* argv, absl::string_view fallback) {
  std::string format(fallback);
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--log-format" && i + 1 < argc) {
      format = argv[++i];
    } else if (absl::StartsWith(arg, "--log-format=")) {
      format = std::string(arg.substr(sizeof("--log-format=") - 1));
    } else if (arg.size() > 2 && arg[0] == '-' && arg[1] == '-' &&
               arg.find('=') == absl::string_view::npos && i + 1 < argc) {
      ++i;  // another option's value, which may itself read "--log-format"
    }
  }
  return format;
}

}  // namespace sentinel::collector
