// SENTINEL_DISABLE=1 (set by ctest) is the kill switch: init sets the mask to 0, hands out a
// dummy context, and nothing else runs.
#include <gtest/gtest.h>

#include "tests/unit/plugin/fake_host.h"

namespace sentinel::testing {
namespace {

TEST(PluginDisable, InitSetsMaskZeroAndEverythingIsANoOp) {
  ASSERT_STREQ(getenv("SENTINEL_DISABLE"), "1");
  std::string dump = MakeTempPath("sentinel-disabled");
  setenv("SENTINEL_DUMP", dump.c_str(), 1);
  FakeHost h;
  ASSERT_TRUE(h.ok());
  FakeHost::Mask() = 0x7FF;
  void* ctx = h.InitV5(0xD15Aull, 2, 0);
  EXPECT_NE(ctx, nullptr);
  EXPECT_EQ(FakeHost::Mask(), 0);
  void* coll = h.Coll(ctx, nullptr, 0, 1, "AllReduce", 4, "ncclInt32", 1);
  EXPECT_EQ(coll, nullptr);
  h.Stop(coll);
  int mask4 = 0x7F;
  void* ctx4 = nullptr;
  h.v4->init(&ctx4, &mask4, nullptr, 0x1ull, 1, 2, 0, nullptr);
  EXPECT_NE(ctx4, nullptr);
  EXPECT_EQ(mask4, 0);
  h.v5->finalize(ctx);
  h.v4->finalize(ctx4);
  EXPECT_NE(access(dump.c_str(), F_OK), 0) << "a disabled plugin must not create the dump";
}

}  // namespace
}  // namespace sentinel::testing
