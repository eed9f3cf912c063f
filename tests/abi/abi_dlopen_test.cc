// dlopens the built .so the way NCCL does (RTLD_NOW | RTLD_LOCAL) and checks the three tables.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>

#include "plugin/abi/nccl_profiler_abi.h"

namespace {

template <typename Table>
void CheckTable(void* h, const char* symbol) {
  const auto* t = static_cast<const Table*>(dlsym(h, symbol));
  ASSERT_NE(t, nullptr) << symbol;
  ASSERT_NE(t->name, nullptr);
  EXPECT_STREQ(t->name, "sentinel");
  EXPECT_NE(t->init, nullptr);
  EXPECT_NE(t->start_event, nullptr);
  EXPECT_NE(t->stop_event, nullptr);
  EXPECT_NE(t->record_event_state, nullptr);
  EXPECT_NE(t->finalize, nullptr);
}

TEST(AbiDlopen, ExportsAllThreeTables) {
  void* h = dlopen(SENTINEL_PLUGIN_SO, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  CheckTable<SentinelProfilerV4>(h, "ncclProfiler_v4");
  CheckTable<SentinelProfilerV5>(h, "ncclProfiler_v5");
  CheckTable<SentinelProfilerV6>(h, "ncclProfiler_v6");
  EXPECT_EQ(dlsym(h, "ncclProfiler_v3"), nullptr);
  EXPECT_EQ(dlsym(h, "_ZN8sentinel6plugin8CoreInitERKNS0_8InitArgsE"), nullptr);  // hidden
  dlclose(h);
}

}  // namespace
