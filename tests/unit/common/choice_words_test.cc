// common/choice_words.h: the mismatch-mode and log-level words, one table each, shared by the
// registry (SENTINEL_ON_MISMATCH, SENTINEL_LOG_LEVEL), the guard, the plugin's log and sentineld.
#include "common/choice_words.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::rules {
namespace {

std::vector<std::string> Words(const char* bar_list) {
  std::vector<std::string> out;
  std::string s = bar_list;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t bar = std::min(s.find('|', start), s.size());
    out.push_back(s.substr(start, bar - start));
    start = bar + 1;
  }
  return out;
}

const SentinelEnv& Parsed(const std::string& entry, std::unique_ptr<SentinelEnv>* keep) {
  static std::string text;
  text = entry;
  const char* envp[] = {text.c_str(), nullptr};
  *keep = std::make_unique<SentinelEnv>();
  ParseSentinelEnv(envp, keep->get());
  return **keep;
}

TEST(OnMismatch, EveryWordParsesAndRoundTrips) {
  for (const std::string& w : Words(kOnMismatchWords)) {
    OnMismatch m;
    ASSERT_TRUE(ParseOnMismatch(w.c_str(), &m)) << w;
    EXPECT_EQ(OnMismatchWord(m), w);
  }
  OnMismatch m = OnMismatch::kWarn;
  EXPECT_FALSE(ParseOnMismatch("Fail", &m)) << "files and flags take the exact word";
  EXPECT_FALSE(ParseOnMismatch("", &m));
  EXPECT_FALSE(ParseOnMismatch(nullptr, &m));
  EXPECT_EQ(m, OnMismatch::kWarn) << "unchanged on failure";
}

TEST(OnMismatch, TheRegistryOffersExactlyTheseWords) {
  EXPECT_STREQ(FindEnvVar("SENTINEL_ON_MISMATCH")->choices, kOnMismatchWords);
  std::unique_ptr<SentinelEnv> env;
  EXPECT_EQ(OnMismatchFromEnv(Parsed("SENTINEL_ON_MISMATCH=ABORT", &env), OnMismatch::kFail),
            OnMismatch::kAbort);
  EXPECT_EQ(OnMismatchFromEnv(Parsed("SENTINEL_ON_MISMATCH=warn", &env), OnMismatch::kFail),
            OnMismatch::kWarn);
  EXPECT_EQ(OnMismatchFromEnv(Parsed("SENTINEL_ON_MISMATCH=maybe", &env), OnMismatch::kFail),
            OnMismatch::kFail);
  EXPECT_EQ(OnMismatchFromEnv(Parsed("OTHER=1", &env), OnMismatch::kFail), OnMismatch::kFail);
}

TEST(OnMismatch, OutcomeOnTheWireAndItsWord) {
  EXPECT_EQ(OutcomeOf(OnMismatch::kFail), kSentinelOutcomeFail);
  EXPECT_EQ(OutcomeOf(OnMismatch::kWarn), kSentinelOutcomeWarn);
  EXPECT_EQ(OutcomeOf(OnMismatch::kAbort), kSentinelOutcomeAbort);
  EXPECT_STREQ(OutcomeWord(kSentinelOutcomePass), "pass");
  EXPECT_STREQ(OutcomeWord(kSentinelOutcomeWarn), "warn");
  EXPECT_STREQ(OutcomeWord(kSentinelOutcomeFail), "fail");
  EXPECT_STREQ(OutcomeWord(kSentinelOutcomeAbort), "abort");
  EXPECT_STREQ(OutcomeWord(4), "unknown");
  EXPECT_STREQ(OutcomeWord(0xffff), "unknown");
}

TEST(LogLevel, EveryWordOfBothListsParses) {
  for (const char* list : {kPluginLogLevelWords, kDaemonLogLevelWords}) {
    for (const std::string& w : Words(list)) {
      LogLevelWord l;
      EXPECT_TRUE(ParseLogLevel(w.c_str(), &l)) << w;
    }
  }
  LogLevelWord l = LogLevelWord::kOff;
  ASSERT_TRUE(ParseLogLevel("warning", &l));
  EXPECT_EQ(l, LogLevelWord::kWarn);
  ASSERT_TRUE(ParseLogLevel("critical", &l));
  EXPECT_EQ(l, LogLevelWord::kCritical);
  EXPECT_FALSE(ParseLogLevel("verbose", &l));
  EXPECT_FALSE(ParseLogLevel("INFO", &l)) << "sentineld's flag takes the exact word";
  EXPECT_FALSE(ParseLogLevel(nullptr, &l));
  EXPECT_EQ(l, LogLevelWord::kCritical) << "unchanged on failure";
}

TEST(LogLevel, TheRegistryReadsThePluginWordsByName) {
  EXPECT_STREQ(FindEnvVar("SENTINEL_LOG_LEVEL")->choices, kPluginLogLevelWords);
  std::unique_ptr<SentinelEnv> env;
  EXPECT_EQ(LogLevelFromEnv(Parsed("SENTINEL_LOG_LEVEL=Debug", &env), LogLevelWord::kWarn),
            LogLevelWord::kDebug);
  EXPECT_EQ(LogLevelFromEnv(Parsed("SENTINEL_LOG_LEVEL=warning", &env), LogLevelWord::kInfo),
            LogLevelWord::kWarn);
  EXPECT_EQ(LogLevelFromEnv(Parsed("SENTINEL_LOG_LEVEL=critical", &env), LogLevelWord::kWarn),
            LogLevelWord::kWarn)
      << "not a plugin level: the registry refuses it and keeps its default";
  EXPECT_EQ(LogLevelFromEnv(Parsed("OTHER=1", &env), LogLevelWord::kInfo), LogLevelWord::kWarn)
      << "unset: the registry's default, warn";
}

}  // namespace
}  // namespace sentinel::rules
