// The one SENTINEL_* registry ("one parser"): README.md's variable table and the
// registry list the same variables, every part shares one boolean rule and one number rule, and a
// bad value or an unknown SENTINEL_* name becomes one problem line naming what was used instead.
#include "common/sentinel_env.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "common/env_bool.h"

namespace sentinel::rules {
namespace {

class SentinelEnvTest : public ::testing::Test {
 protected:
  const SentinelEnv& Env(std::initializer_list<const char*> entries) {
    envp_.assign(entries);
    envp_.push_back(nullptr);
    ParseSentinelEnv(envp_.data(), env_.get());
    return *env_;
  }
  std::string Problems() const { return std::string(env_->problems, env_->problems_len); }

 private:
  std::vector<const char*> envp_;
  std::unique_ptr<SentinelEnv> env_ = std::make_unique<SentinelEnv>();
};

// The names in the first column of README.md's "Every `SENTINEL_*` variable" table.
std::set<std::string> ReadmeTableNames() {
  std::ifstream in(SENTINEL_README_PATH);
  std::set<std::string> names;
  std::string line;
  bool in_section = false;
  const std::regex name_re("SENTINEL_[A-Z0-9_]+");
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line.find("SENTINEL_*") != std::string::npos;
    if (!in_section || line.rfind("| `SENTINEL_", 0) != 0) continue;
    const std::string first = line.substr(1, line.find('|', 1) - 1);
    for (std::sregex_iterator it(first.begin(), first.end(), name_re), end; it != end; ++it) {
      names.insert(it->str());
    }
  }
  return names;
}

TEST(SentinelEnvRegistryTest, ReadmeTableAndRegistryListTheSameVariables) {
  const std::set<std::string> readme = ReadmeTableNames();
  ASSERT_GT(readme.size(), 30u) << "README.md's table was not found at " << SENTINEL_README_PATH;
  std::set<std::string> registry;
  for (size_t i = 0; i < kVarCount; ++i) {
    const EnvVarSpec& s = EnvRegistry()[i];
    if (s.doc_place == EnvDoc::kReadme) registry.insert(s.name);
  }
  for (const std::string& n : readme) {
    EXPECT_NE(FindEnvVar(n.c_str()), nullptr) << n << " is in README.md but not in the registry";
    EXPECT_EQ(registry.count(n), 1u) << n << " is in README.md but not marked kReadme";
  }
  for (const std::string& n : registry) {
    EXPECT_EQ(readme.count(n), 1u) << n << " is in the registry but not in README.md's table";
  }
}

TEST(SentinelEnvRegistryTest, RowsAreConsistent) {
  std::set<std::string> names;
  for (size_t i = 0; i < kVarCount; ++i) {
    const EnvVarSpec& s = EnvRegistry()[i];
    SCOPED_TRACE(s.name);
    EXPECT_EQ(static_cast<size_t>(s.id), i) << "row order must follow enum Var";
    EXPECT_TRUE(names.insert(s.name).second) << "listed twice";
    EXPECT_EQ(std::string(s.name).rfind("SENTINEL_", 0), 0u);
    EXPECT_STRNE(s.doc, "");
    EXPECT_EQ(s.choices != nullptr, s.type == EnvType::kEnum);
    if (s.default_text[0] != '\0') {
      EnvValue v;
      EXPECT_TRUE(ParseEnvValue(s.id, s.default_text, &v)) << "the default breaks its own rule";
    }
    if (s.type == EnvType::kInt || s.type == EnvType::kDuration) {
      EXPECT_LE(s.lo, s.hi);
    }
  }
}

// A typo must not pass silently: it is named, with the nearest known name, and ignored.
TEST_F(SentinelEnvTest, UnknownNameIsReportedWithTheNearestKnownOne) {
  const SentinelEnv& env =
      Env({"SENTINEL_DISABEL=1", "SENTINEL_WHATEVER_ELSE_ENTIRELY=3",
           "SENTINEL_ORIG_NCCL_DEBUG==INFO", "SENTINEL_DEV_JOBS=2", "OTHER_VAR=1"});
  EXPECT_FALSE(env.Flag(Var::kDisable));
  const std::string p = Problems();
  EXPECT_NE(p.find("SENTINEL_DISABEL is not a variable sentinel knows (did you mean "
                   "SENTINEL_DISABLE?); ignored\n"),
            std::string::npos)
      << p;
  EXPECT_NE(p.find("SENTINEL_WHATEVER_ELSE_ENTIRELY is not a variable sentinel knows"),
            std::string::npos)
      << p;
  EXPECT_EQ(p.find("SENTINEL_ORIG_"), std::string::npos) << "the plugin's own stash: " << p;
  EXPECT_EQ(p.find("SENTINEL_DEV_"), std::string::npos) << "a developers' knob: " << p;
  EXPECT_EQ(p.find("OTHER_VAR"), std::string::npos) << p;
}

// No product variable lives under the developers' prefix, whose names are never checked: a typo
// of the host probe's /dev root is told like any other.
TEST_F(SentinelEnvTest, NoProductVariableUnderTheDevelopersPrefix) {
  for (size_t i = 0; i < kVarCount; ++i) {
    EXPECT_NE(std::string(EnvRegistry()[i].name).rfind("SENTINEL_DEV_", 0), 0u)
        << EnvRegistry()[i].name;
  }
  const SentinelEnv& env = Env({"SENTINEL_DEVFS_ROOT=/tmp/dev", "SENTINEL_DEVFS_RT=/tmp/x"});
  EXPECT_STREQ(env.Text(Var::kDevRoot), "/tmp/dev");
  const std::string p = Problems();
  EXPECT_NE(p.find("SENTINEL_DEVFS_RT is not a variable sentinel knows (did you mean "
                   "SENTINEL_DEVFS_ROOT?); ignored\n"),
            std::string::npos)
      << p;
}

// Every boolean variable (and SENTINEL_CUPTI's boolean spellings) follows env_bool's one rule.
TEST_F(SentinelEnvTest, OneBooleanRuleForEveryBooleanVariable) {
  for (const char* text : {"1", "true", "YES", "On", "0", "false", "no", "OFF", "maybe", "2"}) {
    const EnvBool rule = ParseEnvBool(text);
    for (size_t i = 0; i < kVarCount; ++i) {
      const EnvVarSpec& s = EnvRegistry()[i];
      if (s.type != EnvType::kBool) continue;
      SCOPED_TRACE(std::string(s.name) + "=" + text);
      EnvValue v;
      v.flag = false;
      EXPECT_EQ(ParseEnvValue(s.id, text, &v), rule != EnvBool::kInvalid);
      if (rule != EnvBool::kInvalid) {
        EXPECT_EQ(v.flag, rule == EnvBool::kTrue);
      }
    }
  }
  const SentinelEnv& on = Env({"SENTINEL_VERBS=off", "SENTINEL_CUPTI=yes"});
  EXPECT_FALSE(on.Flag(Var::kVerbs)) << "used to be only '0'";
  EXPECT_EQ(on.Choice(Var::kCupti), 1) << "auto|on|off: yes = on";
  EXPECT_EQ(Env({"SENTINEL_CUPTI=0"}).Choice(Var::kCupti), 2);
  EXPECT_EQ(Env({}).Choice(Var::kCupti), 0) << "default auto";
  EXPECT_TRUE(Env({}).Flag(Var::kVerbs)) << "default 1";
  const SentinelEnv& bad = Env({"SENTINEL_DISABLE=maybe"});
  EXPECT_FALSE(bad.Flag(Var::kDisable));
  EXPECT_TRUE(bad[Var::kDisable].bad);
  EXPECT_NE(Problems().find("SENTINEL_DISABLE='maybe' is not 1/true/yes/on or 0/false/no/off; "
                            "using 0 (sentinel stays on)"),
            std::string::npos)
      << Problems();
}

// One number rule: whole decimal numbers in the row's range; anything else keeps the default
// and says the variable, the value, the range and the value used.
// Choices are read by name: every word of every kEnum variable is found by ChoiceIs when set, and
// ChoiceByName maps words (never positions) to the reader's values.
TEST_F(SentinelEnvTest, ChoicesAreReadByName) {
  for (size_t i = 0; i < kVarCount; ++i) {
    const EnvVarSpec& s = EnvRegistry()[i];
    if (s.type != EnvType::kEnum) continue;
    const std::string choices = s.choices;
    size_t start = 0;
    while (start <= choices.size()) {
      const size_t bar = std::min(choices.find('|', start), choices.size());
      const std::string word = choices.substr(start, bar - start);
      const std::string entry = std::string(s.name) + "=" + word;
      const SentinelEnv& env = Env({entry.c_str()});
      EXPECT_TRUE(env.ChoiceIs(s.id, word.c_str())) << entry;
      EXPECT_FALSE(env.ChoiceIs(s.id, "no-such-word")) << entry;
      start = bar + 1;
    }
  }
  enum class Mode { kA, kB, kC, kFallback };
  static constexpr ChoiceName<Mode> kTable[] = {
      {"off", Mode::kC}, {"auto", Mode::kA}, {"on", Mode::kB}};  // any order
  EXPECT_EQ(ChoiceByName(Env({}), Var::kCupti, kTable, Mode::kFallback), Mode::kA);
  EXPECT_EQ(ChoiceByName(Env({"SENTINEL_CUPTI=OFF"}), Var::kCupti, kTable, Mode::kFallback),
            Mode::kC);
  EXPECT_EQ(ChoiceByName(Env({"SENTINEL_CUPTI=yes"}), Var::kCupti, kTable, Mode::kFallback),
            Mode::kB);
  static constexpr ChoiceName<Mode> kPartial[] = {{"auto", Mode::kA}};
  EXPECT_EQ(ChoiceByName(Env({"SENTINEL_CUPTI=on"}), Var::kCupti, kPartial, Mode::kFallback),
            Mode::kFallback);
  EXPECT_FALSE(Env({}).ChoiceIs(Var::kVerbs, "on")) << "not a kEnum variable";
}

TEST_F(SentinelEnvTest, NumbersOutOfRangeOrMalformedKeepTheDefault) {
  EXPECT_EQ(Env({"SENTINEL_RINGS=4096"}).Number(Var::kRings), 4096);
  EXPECT_EQ(Problems(), "");
  for (const char* text :
       {"7", "4097", "12abc", "-8", "+9", " 9", "0x10", "99999999999999999999"}) {
    const std::string entry = std::string("SENTINEL_RINGS=") + text;
    const SentinelEnv& env = Env({entry.c_str()});
    SCOPED_TRACE(entry);
    EXPECT_EQ(env.Number(Var::kRings), 256);
    EXPECT_TRUE(env[Var::kRings].bad);
    EXPECT_EQ(Problems(), std::string("SENTINEL_RINGS='") + text +
                              "' is not an integer in [8, 4096]; using 256\n");
  }
  const SentinelEnv& env =
      Env({"SENTINEL_BUDGET=101", "SENTINEL_NET_REPORT_MS=5", "SENTINEL_CUPTI_REARM_S=0"});
  EXPECT_DOUBLE_EQ(env.Real(Var::kBudget), 0.5);
  EXPECT_EQ(env.Number(Var::kNetReportMs), 1000);
  EXPECT_EQ(env.Number(Var::kCuptiRearmS), 0) << "0 is in range: never re-arm";
  EXPECT_NE(Problems().find("SENTINEL_BUDGET='101' is not a percentage in [0, 100]; using 0.5"),
            std::string::npos)
      << Problems();
  EXPECT_NE(Problems().find("SENTINEL_NET_REPORT_MS='5' is not an integer in [10, 600000]; "
                            "using 1000"),
            std::string::npos)
      << Problems();
  EXPECT_DOUBLE_EQ(Env({"SENTINEL_BUDGET=0.25%"}).Real(Var::kBudget), 0.25);
}

TEST_F(SentinelEnvTest, EnumsStringsAndEmptyValues) {
  const SentinelEnv& env =
      Env({"SENTINEL_ON_HANG=kill", "SENTINEL_ON_MISMATCH=Warn", "SENTINEL_EXPECT=net=ib gdr=on",
           "SENTINEL_DUMP=", "SENTINEL_RINGS="});
  EXPECT_EQ(env.Choice(Var::kOnHang), 0);
  EXPECT_NE(Problems().find("SENTINEL_ON_HANG='kill' is not one of off|report|abort; using off"),
            std::string::npos)
      << Problems();
  EXPECT_EQ(env.Choice(Var::kOnMismatch), 1) << "fail|warn|abort, case-insensitive";
  EXPECT_STREQ(env.Text(Var::kExpect), "net=ib gdr=on") << "the value after the first '='";
  EXPECT_FALSE(env.Set(Var::kDump)) << "empty = unset";
  EXPECT_EQ(env.Number(Var::kRings), 256);
  EXPECT_EQ(Problems().find("SENTINEL_RINGS"), std::string::npos) << "empty is not an error";
}

// The process reads its environment once: a later setenv changes nothing (tests reload).
TEST(SentinelProcessEnvTest, ReadOnceThenImmutable) {
  const SentinelEnv& first = ProcessSentinelEnv();
  EXPECT_DOUBLE_EQ(first.Real(Var::kBudget), 0.0) << "ctest sets SENTINEL_BUDGET=0";
  ASSERT_EQ(setenv("SENTINEL_RINGS", "16", 1), 0);
  EXPECT_EQ(&ProcessSentinelEnv(), &first);
  EXPECT_EQ(ProcessSentinelEnv().Number(Var::kRings), 256);
  testing::ReloadProcessSentinelEnv();
  EXPECT_EQ(ProcessSentinelEnv().Number(Var::kRings), 16);
  ASSERT_EQ(unsetenv("SENTINEL_RINGS"), 0);
  testing::ReloadProcessSentinelEnv();
}

TEST(SentinelProcessEnvTest, EachProblemLineIsToldOnce) {
  const char kLines[] = "SENTINEL_X_TEST='1' line one\nSENTINEL_X_TEST='2' line two\n";
  ::testing::internal::CaptureStderr();
  TellEnvProblemsOnce(kLines, sizeof(kLines) - 1);
  TellEnvProblemsOnce(kLines, sizeof(kLines) - 1);
  TellEnvProblemsOnce("SENTINEL_X_TEST='1' line", 24);  // a prefix of a told line is new
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string p = "[sentinel " + std::to_string(getpid()) + "] ";
  EXPECT_EQ(err, p + "SENTINEL_X_TEST='1' line one\n" + p + "SENTINEL_X_TEST='2' line two\n" + p +
                     "SENTINEL_X_TEST='1' line\n");
}

}  // namespace
}  // namespace sentinel::rules
