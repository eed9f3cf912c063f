// sentineld's log lines (collector/log/daemon_log.h): shape, escaping, and the rate limit, with a
// fake clock and a pipe standing in for stderr.
#include "collector/log/daemon_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "spdlog/spdlog.h"

namespace sentinel::collector {
namespace {

int64_t g_now_ns = 0;
int64_t FakeNow() { return g_now_ns; }

TEST(DaemonLogTest, JsonLineIsOneEscapedObject) {
  const std::string line = FormatLogLine(LogFormat::kJson, 1700000000123456789, "warning",
                                         "sentineld", "a \"quoted\"\nsecond\\line\x01");
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["ts"], "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["logger"], "sentineld");
  EXPECT_EQ(j["msg"], "a \"quoted\"\nsecond\\line\x01");
}

TEST(DaemonLogTest, TextLineStaysOnOneLine) {
  EXPECT_EQ(FormatLogLine(LogFormat::kText, 0, "info", "sentineld", "two\nlines"),
            "1970-01-01T00:00:00.000Z info sentineld: two\\nlines\n");
}

TEST(DaemonLogTest, ParseLogFormat) {
  LogFormat f = LogFormat::kText;
  EXPECT_TRUE(ParseLogFormat("json", &f).ok());
  EXPECT_EQ(f, LogFormat::kJson);
  EXPECT_FALSE(ParseLogFormat("xml", &f).ok());
}

// The format of the one line a refused command line gets: the last --log-format given, in either
// spelling, not a value of another option.
TEST(DaemonLogTest, LogFormatFromArgs) {
  const char* const plain[] = {"sentineld", "--tick", "0"};
  EXPECT_EQ(LogFormatFromArgs(3, plain, "text"), "text");
  const char* const spaced[] = {"sentineld", "--log-format", "json", "--tick", "0"};
  EXPECT_EQ(LogFormatFromArgs(5, spaced, "text"), "json");
  const char* const joined[] = {"sentineld", "--tick=0", "--log-format=json"};
  EXPECT_EQ(LogFormatFromArgs(3, joined, "text"), "json");
  const char* const last[] = {"sentineld", "--log-format=json", "--log-format", "text"};
  EXPECT_EQ(LogFormatFromArgs(4, last, "json"), "text");
  const char* const value[] = {"sentineld", "--socket", "--log-format", "--tick", "0"};
  EXPECT_EQ(LogFormatFromArgs(5, value, "text"), "text");
  const char* const dangling[] = {"sentineld", "--log-format"};
  EXPECT_EQ(LogFormatFromArgs(2, dangling, "json"), "json");
}

TEST(DaemonLogTest, RateLimitDropsCountsAndReports) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_NONBLOCK), 0);
  g_now_ns = 1000000000;
  auto logger = std::make_shared<spdlog::logger>(
      "t", MakeDaemonLogSink(LogFormat::kText, fds[1], LogRateLimit{10, 5}, FakeNow));
  for (int i = 0; i < 1000; ++i) logger->warn("flood {}", i);  // burst: 10 pass
  g_now_ns += 1000000000;                                      // +1 s: 5 tokens
  for (int i = 0; i < 100; ++i) logger->warn("later {}", i);
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;)
    out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 16u);  // 10 + the suppression report + 5
  EXPECT_NE(lines[9].find("flood 9"), std::string::npos);
  EXPECT_NE(lines[10].find("990 log line(s) suppressed"), std::string::npos) << lines[10];
  EXPECT_NE(lines[11].find("later 0"), std::string::npos);
  EXPECT_NE(lines[15].find("later 4"), std::string::npos);
}

}  // namespace
}  // namespace sentinel::collector
