// The answer to a request whose Content-Length libmicrohttpd refuses (malformed: 400; past 64
// bits: 413): one status line, one head, one JSON body. libmicrohttpd 0.9.75 alone writes that
// head twice; sentineld's accept front end (collector/export/http_front.h) answers these itself.
// The REAL sentineld, raw loopback sockets.
#include <sys/socket.h>

#include <string>

#include "gtest/gtest.h"

#include "collector/export/http_front.h"
#include "tests/integration/collector/daemon_fixture.h"
#include "tests/integration/collector/raw_http.h"

namespace sentinel::testing {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Checks `reply` is exactly one response of `status`: one status line, one head whose
// Content-Length is the rest of the reply. Returns the body.
std::string OneResponse(const std::string& reply, int status, const std::string& what) {
  const std::string line = "HTTP/1.1 " + std::to_string(status) + " ";
  EXPECT_EQ(reply.rfind(line, 0), 0u) << what << ": '" << reply << "'";
  EXPECT_EQ(Count(reply, "HTTP/1."), 1u)
      << what << ": more than one status line: '" << reply << "'";
  const size_t end = reply.find("\r\n\r\n");
  EXPECT_NE(end, std::string::npos) << what << ": '" << reply << "'";
  if (end == std::string::npos) return "";
  const std::string head = reply.substr(0, end + 2);
  const std::string body = reply.substr(end + 4);
  EXPECT_EQ(Count(head, "\r\nContent-Length: "), 1u) << what << ": '" << head << "'";
  const size_t cl = head.find("\r\nContent-Length: ");
  if (cl != std::string::npos) {
    EXPECT_EQ(std::stoul(head.substr(cl + 18)), body.size()) << what << ": '" << reply << "'";
  }
  return body;
}

using collector::HeadVerdict;
using collector::JudgeHead;

// The front end's reading of a head, as libmicrohttpd reads the same bytes.
TEST(JudgeHead, ReadsContentLengthAsLibmicrohttpdDoes) {
  EXPECT_EQ(JudgeHead("GET / HTTP/1.1\r\nHost: x\r\n"), HeadVerdict::kIncomplete);
  EXPECT_EQ(JudgeHead("GET / HTTP/1.1\r\nContent-Length: x\r\n"), HeadVerdict::kIncomplete);
  EXPECT_EQ(JudgeHead("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), HeadVerdict::kPass);
  EXPECT_EQ(JudgeHead("GET / HTTP/1.1\r\ncontent-length: \t 12\r\n\r\n"), HeadVerdict::kPass);
  EXPECT_EQ(JudgeHead("GET / HTTP/1.1\r\nContent-Length: 12x\r\n\r\n"), HeadVerdict::kBadLength);
  EXPECT_EQ(JudgeHead("GET / HTTP/1.1\r\nContent-Length:\r\n\r\n"), HeadVerdict::kBadLength);
  EXPECT_EQ(JudgeHead("GET / HTTP/1.1\nContent-Length: 12 \n\n"), HeadVerdict::kBadLength);
  EXPECT_EQ(JudgeHead("\r\nGET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), HeadVerdict::kBadLength);
  EXPECT_EQ(JudgeHead("GET / HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n"),
            HeadVerdict::kPass);
  EXPECT_EQ(JudgeHead("GET / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n"),
            HeadVerdict::kLengthTooBig);
  // A folded line continues the value; the first Content-Length is the one read.
  EXPECT_EQ(JudgeHead("GET / HTTP/1.1\r\nContent-Length: 1\r\n 2\r\n\r\n"),
            HeadVerdict::kBadLength);
  EXPECT_EQ(JudgeHead("GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: x\r\n\r\n"),
            HeadVerdict::kPass);
  // Transfer-Encoding: Content-Length is not read at all.
  EXPECT_EQ(JudgeHead("GET / HTTP/1.1\r\nContent-Length: x\r\nTransfer-Encoding: chunked\r\n\r\n"),
            HeadVerdict::kPass);
}

class HttpHeadTest : public DaemonFixture {};

TEST_F(HttpHeadTest, BadContentLengthGetsOneHeadAndOneBody) {
  Start();
  const struct {
    const char* value;
    int status;
  } cases[] = {{"x", 400}, {"-1", 400}, {" 12 ", 400}, {"99999999999999999999999", 413}};
  for (const auto& c : cases) {
    const std::string what = std::string("Content-Length '") + c.value + "'";
    const std::string reply =
        RawHttp(port_, std::string("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length:") +
                           c.value + "\r\n\r\n");
    const std::string body = OneResponse(reply, c.status, what);
    const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << what << ": body is not JSON: '" << body << "'";
    EXPECT_EQ(j["error"]["code"], c.status) << what << ": " << body;
    EXPECT_NE(reply.find("Connection: close"), std::string::npos) << what << ": " << reply;
  }
  // With Transfer-Encoding the Content-Length is not libmicrohttpd's to read: it answers (a GET
  // with a chunked body of nothing) as usual, once.
  const std::string chunked =
      RawHttp(port_,
              "GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: "
              "x\r\n\r\n0\r\n\r\n");
  EXPECT_EQ(Count(chunked, "HTTP/1."), 1u) << chunked;
}

TEST_F(HttpHeadTest, GoodRequestsStillAnsweredOnce) {
  Start();
  for (const char* path : {"/healthz", "/metrics"}) {
    const std::string reply =
        RawHttp(port_, std::string("GET ") + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
    OneResponse(reply, 200, path);
  }
  // A head arriving one byte every 20 ms waits in the front end and is answered once whole.
  const std::string slow =
      RawHttp(port_, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 20);
  const std::string body = OneResponse(slow, 200, "dribbled /healthz");
  EXPECT_NE(body.find("\"status\""), std::string::npos) << body;
}

}  // namespace
}  // namespace sentinel::testing
