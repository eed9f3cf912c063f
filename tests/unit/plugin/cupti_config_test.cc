// ParseCuptiConfig: the SENTINEL_CUPTI* settings, a bad value named in the status (and its
// default used), good ones Ok.
#include "plugin/cupti/cupti_config.h"

#include <gtest/gtest.h>

#include <string>

#include "common/sentinel_env.h"
#include "tests/unit/plugin/registry_env.h"

namespace sentinel::plugin::cupti {
namespace {

using CuptiConfigTest = RegistryEnvTest;

TEST_F(CuptiConfigTest, ABadValueIsNamedAndItsDefaultUsed) {
  CuptiConfig c;
  const Status s =
      ParseCuptiConfig(Env({"SENTINEL_CUPTI_WINDOW_MS=soon", "SENTINEL_CUPTI=on"}), &c);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("SENTINEL_CUPTI_WINDOW_MS='soon' is invalid; using 1000"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(c.window_ms, 1000u);
  EXPECT_EQ(c.mode, CuptiMode::kOn);
}

TEST_F(CuptiConfigTest, GoodValuesAreOk) {
  CuptiConfig c;
  const Status s = ParseCuptiConfig(
      Env({"SENTINEL_CUPTI=off", "SENTINEL_CUPTI_WINDOW_MS=250", "SENTINEL_STEP_NVTX=step"}), &c);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(c.mode, CuptiMode::kOff);
  EXPECT_EQ(c.window_ms, 250u);
  EXPECT_EQ(c.step_nvtx, "step");
}

}  // namespace
}  // namespace sentinel::plugin::cupti
