// rules::Status, the one status from common/ up: a literal kept by pointer, a formatted detail
// kept inline (a path, an errno text, a CUPTI code), copies that own their text, a marked cut
// (never an overrun) past the cap, and no allocation on any path.
#include "common/status.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <type_traits>

#include "plugin/base/status.h"

namespace {
// Every allocation of this test binary, to show that making and copying a Status takes none.
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  std::abort();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace sentinel::rules {
namespace {

static_assert(std::is_trivially_copyable_v<Status>, "copied as bytes, no allocation");
static_assert(std::is_nothrow_copy_constructible_v<Status>, "usable from noexcept code");
static_assert(std::is_same_v<plugin::Status, Status> &&
                  std::is_same_v<plugin::StatusCode, StatusCode>,
              "the plugin's Status is this one: no conversion where common/ meets the plugin");

TEST(RulesStatus, OkAndLiteral) {
  const Status ok = Status::Ok();
  EXPECT_TRUE(ok.ok());
  EXPECT_STREQ(ok.message(), "");
  const char* literal = "no memory for the collector stream buffer";
  const Status s(StatusCode::kResourceExhausted, literal);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), literal);  // kept by pointer, not copied
}

Status Failing(const std::string& path, int rc) {
  return Status::Format(StatusCode::kUnavailable, "%s: cuptiActivityEnable: CUPTI error %d",
                        path.c_str(), rc);
}

TEST(RulesStatus, FormattedDetailOutlivesItsSources) {
  Status s;
  {
    std::string path = "/opt/cuda/lib64/libcupti.so.12";
    s = Failing(path, 999);
    path.assign(path.size(), 'x');  // the caller's text changes or goes away
  }
  EXPECT_STREQ(s.message(), "/opt/cuda/lib64/libcupti.so.12: cuptiActivityEnable: CUPTI error 999");
  const Status copy = s;
  EXPECT_STREQ(copy.message(), s.message());
  EXPECT_NE(copy.message(), s.message());  // each copy holds its own bytes
  char buf[16] = "mutable";
  const Status copied = Status::Copy(StatusCode::kNotFound, buf);
  buf[0] = 'X';
  EXPECT_STREQ(copied.message(), "mutable");
  EXPECT_STREQ(StatusCodeName(copied.code()), "not found");
}

TEST(RulesStatus, ALongDetailIsCutNotOverrunAndSaysSo) {
  const std::string longer(Status::kDetailCap * 2, 'p');
  const Status s = Status::Copy(StatusCode::kPermissionDenied, longer.c_str());
  EXPECT_EQ(std::string(s.message()), longer.substr(0, Status::kDetailCap - 4) + "...");
  const std::string fits(Status::kDetailCap - 1, 'f');
  EXPECT_EQ(std::string(Status::Copy(StatusCode::kInternal, fits.c_str()).message()), fits)
      << "a detail that fits exactly is not marked";
}

TEST(RulesStatus, EveryCodeHasAName) {
  const StatusCode codes[] = {StatusCode::kOk,
                              StatusCode::kUnavailable,
                              StatusCode::kResourceExhausted,
                              StatusCode::kFailedPrecondition,
                              StatusCode::kInvalidArgument,
                              StatusCode::kInternal,
                              StatusCode::kNotFound,
                              StatusCode::kPermissionDenied};
  const std::string names[] = {
      "ok",       "unavailable", "resource exhausted", "failed precondition", "invalid argument",
      "internal", "not found",   "permission denied"};
  for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); ++i) {
    EXPECT_EQ(StatusCodeName(codes[i]), names[i]);
    EXPECT_EQ(Status(codes[i], "x").ok(), codes[i] == StatusCode::kOk);
  }
  const Status with = Status(StatusCode::kUnavailable, "connect").WithErrno(111);
  EXPECT_EQ(with.error_number(), 111);
  EXPECT_EQ(with.code(), StatusCode::kUnavailable);
  EXPECT_STREQ(with.message(), "connect");
  EXPECT_EQ(Status::Ok().error_number(), 0);
}

// Made, formatted (even past the cap), copied and assigned: not one allocation.
TEST(RulesStatus, NoPathAllocates) {
  const std::string longer(Status::kDetailCap * 2, 'q');  // allocates before counting starts
  const long before = g_allocations.load();
  Status a = Status::Format(StatusCode::kNotFound, "%s: %d", "/some/path", 42);
  Status b = Status::Copy(StatusCode::kPermissionDenied, longer.c_str());
  Status c(StatusCode::kUnavailable, "literal");
  Status d = b;
  d = a.WithErrno(2);
  c = Status::Ok();
  const long after = g_allocations.load();
  EXPECT_EQ(after - before, 0);
  EXPECT_STREQ(d.message(), "/some/path: 42");
  EXPECT_FALSE(b.ok());
  EXPECT_TRUE(c.ok());
  // The counter counts: a std::string of this size does allocate.
  const std::string probe(64, 'x');
  EXPECT_GT(g_allocations.load(), after);
}

}  // namespace
}  // namespace sentinel::rules
