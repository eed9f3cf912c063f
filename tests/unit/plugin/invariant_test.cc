// InvariantBroken (plugin/base/invariant.h), the plugin's check that acts in every build: a broken
// invariant is counted and turns the plugin off through the core's TurnOff (one log line, NCCL's
// mask set to 0), and the host's thread carries on; without a handler it is logged once.
#include "plugin/base/invariant.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "plugin/core/profiler_core.h"

namespace sentinel::plugin {
namespace {

// Stands for a slow-path step with an invariant; returns what the host would get back.
int StepWithInvariant(int value, int limit) {
  if (value > limit) InvariantBroken("value <= limit", __FILE__, __LINE__);
  return value + 1;
}

size_t CountOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Invariant, TurnsThePluginOffOnceAndTheHostContinues) {
  setenv("SENTINEL_EVENTS", "minimal", 1);
  unsetenv("SENTINEL_DUMP");
  static int mask = 0;
  InitArgs a;
  a.comm_hash = 0x77;
  a.nranks = 2;
  a.mask_ptr = &mask;
  void* ctx = CoreInit(a);
  ASSERT_NE(ctx, nullptr);
  ASSERT_TRUE(PluginOn());
  ASSERT_NE(mask, 0);
  SetInvariantOffHandler(&TurnOff);  // what entry/plugin_wiring.cc installs at load

  const uint64_t failures_before = InvariantFailureCount();
  EXPECT_EQ(StepWithInvariant(1, 2), 2);  // holds: nothing happens
  EXPECT_EQ(InvariantFailureCount(), failures_before);
  EXPECT_TRUE(PluginOn());

  testing::internal::CaptureStderr();
  const int first = StepWithInvariant(5, 2);  // broken: the host still gets its answer
  const int second = StepWithInvariant(6, 2);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(first, 6);
  EXPECT_EQ(second, 7);
  EXPECT_EQ(InvariantFailureCount(), failures_before + 2);
  EXPECT_FALSE(PluginOn());
  EXPECT_EQ(mask, 0) << "NCCL's activation mask is cleared: no more events come to the plugin";
  EXPECT_EQ(TurnOffCount(), 1u);
  EXPECT_EQ(CountOf(err, "turned off for the rest of the process at invariant check"), 1u) << err;
  EXPECT_NE(err.find("invariant broken: value <= limit"), std::string::npos) << err;
  CoreFinalize(ctx);
  SetInvariantOffHandler(nullptr);
}

TEST(Invariant, WithoutAHandlerLogsOnceAndContinues) {
  SetInvariantOffHandler(nullptr);  // the guard or transport linked alone
  const uint64_t before = InvariantFailureCount();
  testing::internal::CaptureStderr();
  EXPECT_EQ(StepWithInvariant(9, 1), 10);
  EXPECT_EQ(StepWithInvariant(9, 1), 10);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(InvariantFailureCount(), before + 2);
  EXPECT_EQ(CountOf(err, "invariant broken: value <= limit"), 1u) << err;
  EXPECT_NE(err.find("counted, the host continues"), std::string::npos) << err;
}

}  // namespace
}  // namespace sentinel::plugin
