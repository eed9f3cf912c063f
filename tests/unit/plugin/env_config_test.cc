// SENTINEL_* problems (issue 9, defects 8 and 9): each bad setting gets a message that says
// what is wrong, and the user is told once on stderr whatever NCCL's own log level is.
#include "plugin/base/env_config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

namespace sentinel::plugin {
namespace {

class EnvConfigTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* v : {"SENTINEL_EVENTS", "SENTINEL_RINGS", "SENTINEL_DUMP", "SENTINEL_DISABLE"})
      unsetenv(v);
  }
};

TEST_F(EnvConfigTest, EventsOutOfRangeSaysSoNotNotANumber) {
  setenv("SENTINEL_EVENTS", "0xffffffff", 1);
  std::string errors;
  const EnvConfig c = ParseEnvConfig(&errors);
  EXPECT_EQ(errors.find("not a number"), std::string::npos) << errors;
  EXPECT_NE(errors.find("SENTINEL_EVENTS='0xffffffff'"), std::string::npos) << errors;
  EXPECT_NE(errors.find("0x7fff"), std::string::npos) << errors;
  EXPECT_EQ(c.events, "default");
  setenv("SENTINEL_EVENTS", "Coll,Bogus", 1);
  errors.clear();
  ParseEnvConfig(&errors);
  EXPECT_NE(errors.find("unknown event 'Bogus'"), std::string::npos) << errors;
}

TEST_F(EnvConfigTest, TooFewRingsIsRefused) {
  setenv("SENTINEL_RINGS", "1", 1);
  std::string errors;
  const EnvConfig c = ParseEnvConfig(&errors);
  EXPECT_NE(errors.find("SENTINEL_RINGS='1'"), std::string::npos) << errors;
  EXPECT_GE(c.rings, 8u) << "one ring drops the records of every other thread";
}

TEST_F(EnvConfigTest, UnwritableDumpIsReported) {
  setenv("SENTINEL_DUMP", "/nonexistent-dir/sentinel-%p.jsonl", 1);
  std::string errors;
  ParseEnvConfig(&errors);
  EXPECT_NE(errors.find("SENTINEL_DUMP"), std::string::npos) << errors;
  EXPECT_NE(errors.find("/nonexistent-dir"), std::string::npos) << errors;
}

// The problems reach stderr directly (not NCCL's logger, which NCCL_DEBUG may silence), once.
TEST_F(EnvConfigTest, ProblemsAreToldOnceOnStderr) {
  setenv("SENTINEL_RINGS", "2", 1);
  setenv("SENTINEL_DISABLE", "maybe", 1);
  std::string errors;
  ::testing::internal::CaptureStderr();
  ParseEnvConfig(&errors);
  ParseEnvConfig(&errors);  // a second init (another communicator) does not repeat it
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[sentinel] SENTINEL_RINGS='2'"), std::string::npos) << err;
  EXPECT_NE(err.find("[sentinel] SENTINEL_DISABLE='maybe'"), std::string::npos) << err;
  EXPECT_EQ(err.find("SENTINEL_RINGS"), err.rfind("SENTINEL_RINGS")) << "told twice:\n" << err;
}

}  // namespace
}  // namespace sentinel::plugin
