// plugin::Status: a literal kept by pointer, a formatted detail kept inline (a path, an errno
// text, a CUPTI code), copies that own their text, and a cut (never an overrun) past the cap.
#include "plugin/base/status.h"

#include <gtest/gtest.h>

#include <string>
#include <type_traits>

namespace sentinel::plugin {
namespace {

static_assert(std::is_trivially_copyable_v<Status>, "copied as bytes, no allocation");
static_assert(std::is_nothrow_copy_constructible_v<Status>, "usable from noexcept code");

TEST(PluginStatus, OkAndLiteral) {
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

TEST(PluginStatus, FormattedDetailOutlivesItsSources) {
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

TEST(PluginStatus, ALongDetailIsCutNotOverrun) {
  const std::string longer(Status::kDetailCap * 2, 'p');
  const Status s = Status::Copy(StatusCode::kPermissionDenied, longer.c_str());
  EXPECT_EQ(std::string(s.message()), longer.substr(0, Status::kDetailCap - 1));
}

}  // namespace
}  // namespace sentinel::plugin
