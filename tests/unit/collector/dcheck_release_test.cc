// The collector's SENTINEL_DCHECK as a release build has it (whatever this build's type): a broken
// invariant is counted and logged, at most kMaxLoggedDcheckFailures lines, and the daemon goes on.
// The fatal form (debug/sanitizer builds): dcheck_fatal_test.cc.
#undef SENTINEL_DCHECK_FATAL
#define SENTINEL_DCHECK_FATAL 0

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>

#include "collector/base/dcheck.h"
#include "collector/base/ring.h"

namespace sentinel::collector {
namespace {

size_t CountOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(CollectorDcheckRelease, LogsABoundedNumberOfLinesAndContinues) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("dcheck_test", sink));

  Ring<int> ring(4);
  (void)ring.Push(7);
  const uint64_t before = DcheckFailureCount();
  EXPECT_EQ(ring[0], 7);  // holds
  EXPECT_EQ(DcheckFailureCount(), before);
  int sum = 0;
  for (uint64_t i = 0; i < kMaxLoggedDcheckFailures + 5; ++i) sum += ring[3];  // past the one kept
  EXPECT_EQ(sum, 0);  // a slot of the ring's own storage (never written): no read outside it
  EXPECT_EQ(DcheckFailureCount(), before + kMaxLoggedDcheckFailures + 5);
  spdlog::set_default_logger(previous);

  const std::string log = out.str();
  EXPECT_EQ(CountOf(log, "invariant broken: i < size_"), kMaxLoggedDcheckFailures) << log;
  EXPECT_NE(log.find("ring.h:"), std::string::npos) << log;
}

}  // namespace
}  // namespace sentinel::collector
