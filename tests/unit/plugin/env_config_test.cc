// SENTINEL_* problems: each bad setting gets a message that says
// what is wrong, and the user is told once on stderr whatever NCCL's own log level is.
#include "plugin/base/env_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "common/sentinel_env.h"
#include "tests/unit/plugin/registry_env.h"

namespace sentinel::plugin {
namespace {

using EnvConfigTest = RegistryEnvTest;

// The problem lines of a parse: the status's message ("" when the settings are good).
std::string Problems(const Status& s) {
  EXPECT_EQ(s.ok(), s.message()[0] == '\0') << s.message();
  if (!s.ok()) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  }
  return s.message();
}

TEST_F(EnvConfigTest, EventsOutOfRangeSaysSoNotNotANumber) {
  EnvConfig c;
  std::string errors = Problems(ParseEnvConfig(Env({"SENTINEL_EVENTS=0xffffffff"}), &c));
  EXPECT_EQ(errors.find("not a number"), std::string::npos) << errors;
  EXPECT_NE(errors.find("SENTINEL_EVENTS='0xffffffff'"), std::string::npos) << errors;
  EXPECT_NE(errors.find("0x7fff"), std::string::npos) << errors;
  EXPECT_EQ(c.events, "default");
  errors = Problems(ParseEnvConfig(Env({"SENTINEL_EVENTS=Coll,Bogus"}), &c));
  EXPECT_NE(errors.find("unknown event 'Bogus'"), std::string::npos) << errors;
}

TEST_F(EnvConfigTest, TooFewRingsIsRefused) {
  EnvConfig c;
  const std::string errors = Problems(ParseEnvConfig(Env({"SENTINEL_RINGS=1"}), &c));
  EXPECT_NE(errors.find("SENTINEL_RINGS='1'"), std::string::npos) << errors;
  EXPECT_GE(c.rings, 8u) << "one ring drops the records of every other thread";
}

TEST_F(EnvConfigTest, UnwritableDumpIsReported) {
  EnvConfig c;
  const std::string errors =
      Problems(ParseEnvConfig(Env({"SENTINEL_DUMP=/nonexistent-dir/sentinel-%p.jsonl"}), &c));
  EXPECT_NE(errors.find("SENTINEL_DUMP"), std::string::npos) << errors;
  EXPECT_NE(errors.find("/nonexistent-dir"), std::string::npos) << errors;
  EXPECT_NE(errors.find("No such file or directory"), std::string::npos) << errors;
}

// The problems reach stderr directly (not NCCL's logger, which NCCL_DEBUG may silence), once.
TEST_F(EnvConfigTest, ProblemsAreToldOnceOnStderr) {
  const rules::SentinelEnv& env = Env({"SENTINEL_RINGS=2", "SENTINEL_DISABLE=maybe"});
  EnvConfig c;
  ::testing::internal::CaptureStderr();
  const Status first = ParseEnvConfig(env, &c);
  const Status second = ParseEnvConfig(env, &c);  // another communicator: not told again
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string prefix = "[sentinel " + std::to_string(getpid()) + "] ";
  EXPECT_NE(err.find(prefix + "SENTINEL_RINGS='2'"), std::string::npos) << err;
  EXPECT_NE(err.find(prefix + "SENTINEL_DISABLE='maybe'"), std::string::npos) << err;
  EXPECT_STREQ(first.message(), second.message()) << "the caller is told every time";
  EXPECT_EQ(err.find("SENTINEL_RINGS"), err.rfind("SENTINEL_RINGS")) << "told twice:\n" << err;
}

// Every field comes from the registry's reading: values in range are taken, the ring size is
// rounded up to a power of two, the budget accepts a '%'.
TEST_F(EnvConfigTest, ValuesComeFromTheRegistry) {
  EnvConfig c;
  const std::string errors = Problems(ParseEnvConfig(
      Env({"SENTINEL_RINGS=16", "SENTINEL_RING_RECORDS=100", "SENTINEL_BUDGET=2%",
           "SENTINEL_LOG_LEVEL=ERROR", "SENTINEL_DISABLE=on", "SENTINEL_PROXY_GRACE_MS=70000"}),
      &c));
  EXPECT_EQ(c.rings, 16u);
  EXPECT_EQ(c.ring_records, 128u);
  EXPECT_DOUBLE_EQ(c.budget_percent, 2.0);
  EXPECT_EQ(c.log_level, LogLevel::kError);
  EXPECT_TRUE(c.disable) << "'on' is a true spelling of the one boolean rule";
  EXPECT_EQ(c.proxy_grace_ms, 200u) << "70000 is out of [1, 60000]: the default";
  EXPECT_NE(
      errors.find("SENTINEL_PROXY_GRACE_MS='70000' is not an integer in [1, 60000]; using 200"),
      std::string::npos)
      << errors;
}

TEST_F(EnvConfigTest, GoodSettingsAreOk) {
  EnvConfig c;
  c.rings = 3;  // whatever *out held is replaced
  const Status s = ParseEnvConfig(Env({"SENTINEL_RINGS=16", "SENTINEL_EVENTS=Coll"}), &c);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_STREQ(s.message(), "");
  EXPECT_EQ(c.rings, 16u);
  EXPECT_EQ(c.events, "Coll");
}

}  // namespace
}  // namespace sentinel::plugin
