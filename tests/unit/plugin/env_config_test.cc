// SENTINEL_* problems: each bad setting gets a message that says
// what is wrong, and the user is told once on stderr whatever NCCL's own log level is.
#include "plugin/base/env_config.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "common/sentinel_env.h"

namespace sentinel::plugin {
namespace {

// The registry's pure parse over a given "NAME=value" list (the process's own reading is once).
class EnvConfigTest : public ::testing::Test {
 protected:
  const rules::SentinelEnv& Env(std::initializer_list<const char*> entries) {
    envp_.assign(entries);
    envp_.push_back(nullptr);
    rules::ParseSentinelEnv(envp_.data(), env_.get());
    return *env_;
  }

 private:
  std::vector<const char*> envp_;
  std::unique_ptr<rules::SentinelEnv> env_ = std::make_unique<rules::SentinelEnv>();
};

TEST_F(EnvConfigTest, EventsOutOfRangeSaysSoNotNotANumber) {
  std::string errors;
  const EnvConfig c = ParseEnvConfig(Env({"SENTINEL_EVENTS=0xffffffff"}), &errors);
  EXPECT_EQ(errors.find("not a number"), std::string::npos) << errors;
  EXPECT_NE(errors.find("SENTINEL_EVENTS='0xffffffff'"), std::string::npos) << errors;
  EXPECT_NE(errors.find("0x7fff"), std::string::npos) << errors;
  EXPECT_EQ(c.events, "default");
  errors.clear();
  ParseEnvConfig(Env({"SENTINEL_EVENTS=Coll,Bogus"}), &errors);
  EXPECT_NE(errors.find("unknown event 'Bogus'"), std::string::npos) << errors;
}

TEST_F(EnvConfigTest, TooFewRingsIsRefused) {
  std::string errors;
  const EnvConfig c = ParseEnvConfig(Env({"SENTINEL_RINGS=1"}), &errors);
  EXPECT_NE(errors.find("SENTINEL_RINGS='1'"), std::string::npos) << errors;
  EXPECT_GE(c.rings, 8u) << "one ring drops the records of every other thread";
}

TEST_F(EnvConfigTest, UnwritableDumpIsReported) {
  std::string errors;
  ParseEnvConfig(Env({"SENTINEL_DUMP=/nonexistent-dir/sentinel-%p.jsonl"}), &errors);
  EXPECT_NE(errors.find("SENTINEL_DUMP"), std::string::npos) << errors;
  EXPECT_NE(errors.find("/nonexistent-dir"), std::string::npos) << errors;
}

// The problems reach stderr directly (not NCCL's logger, which NCCL_DEBUG may silence), once.
TEST_F(EnvConfigTest, ProblemsAreToldOnceOnStderr) {
  const rules::SentinelEnv& env = Env({"SENTINEL_RINGS=2", "SENTINEL_DISABLE=maybe"});
  std::string errors;
  ::testing::internal::CaptureStderr();
  ParseEnvConfig(env, &errors);
  ParseEnvConfig(env, &errors);  // a second init (another communicator) does not repeat it
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[sentinel] SENTINEL_RINGS='2'"), std::string::npos) << err;
  EXPECT_NE(err.find("[sentinel] SENTINEL_DISABLE='maybe'"), std::string::npos) << err;
  EXPECT_EQ(err.find("SENTINEL_RINGS"), err.rfind("SENTINEL_RINGS")) << "told twice:\n" << err;
}

// Every field comes from the registry's reading: values in range are taken, the ring size is
// rounded up to a power of two, the budget accepts a '%'.
TEST_F(EnvConfigTest, ValuesComeFromTheRegistry) {
  std::string errors;
  const EnvConfig c = ParseEnvConfig(
      Env({"SENTINEL_RINGS=16", "SENTINEL_RING_RECORDS=100", "SENTINEL_BUDGET=2%",
           "SENTINEL_LOG_LEVEL=ERROR", "SENTINEL_DISABLE=on", "SENTINEL_PROXY_GRACE_MS=70000"}),
      &errors);
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

}  // namespace
}  // namespace sentinel::plugin
