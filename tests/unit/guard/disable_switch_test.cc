// SENTINEL_DISABLE under the one shared boolean rule (common/env_bool.h): every true spelling
// turns the NCCL log capture off too, not only the profiler. Its own binary:
// the capture is process-wide state installed once.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "common/env_bool.h"
#include "plugin/guard/log_capture.h"

namespace sentinel::guard {
namespace {

TEST(EnvBoolTest, OneRuleForEverySwitch) {
  using rules::EnvBool;
  for (const char* t : {"1", "true", "TRUE", "yes", "Yes", "on", "ON"}) {
    EXPECT_EQ(rules::ParseEnvBool(t), EnvBool::kTrue) << t;
  }
  for (const char* f : {"0", "false", "No", "off"}) {
    EXPECT_EQ(rules::ParseEnvBool(f), EnvBool::kFalse) << f;
  }
  EXPECT_EQ(rules::ParseEnvBool(nullptr), EnvBool::kUnset);
  EXPECT_EQ(rules::ParseEnvBool(""), EnvBool::kUnset);
  for (const char* bad : {"2", "y", "enable", "true "}) {
    EXPECT_EQ(rules::ParseEnvBool(bad), EnvBool::kInvalid) << bad;
  }
}

TEST(DisableSwitchTest, YesTurnsTheLogCaptureOff) {
  setenv("SENTINEL_DISABLE", "yes", 1);
  setenv("SENTINEL_EXPECT", "net=ib", 1);  // an expectation: the capture would start
  setenv("NCCL_DEBUG", "WARN", 1);
  unsetenv("NCCL_DEBUG_FILE");
  InstallLogCapture(/*preloaded=*/true);
  EXPECT_EQ(CurrentCaptureMode(), CaptureMode::kOff);
  EXPECT_EQ(getenv("NCCL_DEBUG_FILE"), nullptr) << "the capture redirected NCCL's log";
  EXPECT_STREQ(getenv("NCCL_DEBUG"), "WARN");
}

}  // namespace
}  // namespace sentinel::guard
