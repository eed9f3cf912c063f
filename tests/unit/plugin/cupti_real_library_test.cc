// The toolkit's real libcupti, on a machine without a GPU or driver: it loads, reports its
// version, and arming fails cleanly with a reason, so the feature reports itself off.
#include <gtest/gtest.h>

#include <string>

#include "plugin/cupti/cupti_api.h"
#include "plugin/cupti/cupti_tracer.h"

namespace sentinel::plugin::cupti {
namespace {

TEST(CuptiRealLibraryTest, MissingPathIsAnExplicitReason) {
  CuptiLoadResult r = LoadCuptiApi("/nonexistent/libcupti.so");
  EXPECT_EQ(r.api, nullptr);
  EXPECT_NE(std::string(r.status.message()).find("SENTINEL_CUPTI_PATH"), std::string::npos)
      << r.status.message();
}

TEST(CuptiRealLibraryTest, NoGpuMeansOffWithTheReason) {
#ifndef SENTINEL_REAL_CUPTI
  GTEST_SKIP() << "no libcupti in the CUDA toolkit on this machine";
#else
  CuptiLoadResult r = LoadCuptiApi(SENTINEL_REAL_CUPTI);
  ASSERT_NE(r.api, nullptr) << r.status.message();
  EXPECT_GE(r.version, kMinApiVersion);
  CuptiConfig config;
  CuptiTracer tracer(r.api, config, CuptiTracer::Env{});
  const Status status = tracer.Arm();
  const bool armed = status.ok();
  const std::string why = status.message();
  if (armed) GTEST_SKIP() << "a usable GPU driver is present; this test is for GPU-less CI";
  EXPECT_EQ(tracer.state(), TracerState::kOff);
  EXPECT_NE(why.find("CONCURRENT_KERNEL"), std::string::npos) << why;
  EXPECT_FALSE(tracer.off_reason().empty());
  tracer.Tick();  // nothing happens, nothing crashes
  tracer.Finish();
  EXPECT_EQ(tracer.counters().windows, 0u);
#endif
}

}  // namespace
}  // namespace sentinel::plugin::cupti
