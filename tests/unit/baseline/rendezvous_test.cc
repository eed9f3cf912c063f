// sentinel-baseline's rendezvous against strangers, on real loopback sockets: a stranger who
// connects first as rank 1 gets no id and rank 1 is still served; idle connections do not starve
// the ranks; a squatter on the port cannot feed a rank a fake id or a size of 2^64-1; a rank with
// another token is refused; and the SHA-256 / HMAC underneath matches the published vectors.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "tests/unit/baseline/launch_text.h"
#include "tools/baseline/hmac_sha256.h"
#include "tools/baseline/launch.h"

namespace sentinel::baseline {
namespace {

using testing::Fetch;
using testing::Listen;
using testing::Read;
using testing::Serve;

const std::string kToken = "job-token-0123456789abcdef";

double NowS() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string Hmac(const std::string& key, const std::string& m) {
  uint8_t out[kSha256Bytes];
  HmacSha256(key, m, out);
  return Hex(out, sizeof out);
}

TEST(HmacSha256, PublishedVectors) {
  // RFC 4231 test cases 1, 2 and 6 (a key longer than the block).
  EXPECT_EQ(Hmac(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(Hmac("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(
      Hmac(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads until EOF or `timeout_s`; returns the bytes.
std::string ReadUntilClosed(int fd, double timeout_s) {
  std::string got;
  const double until = NowS() + timeout_s;
  char buf[4096];
  while (NowS() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r <= 0) break;
    got.append(buf, static_cast<size_t>(r));
  }
  return got;
}

Rendezvous MakeRv() {
  Rendezvous rv;
  for (int i = 0; i < kNcclUniqueIdBytes; ++i) rv.id.internal[i] = static_cast<char>(i * 3 + 1);
  rv.sizes = {8, 1u << 20};
  return rv;
}

// A rank-0 server for `world` ranks in a thread; Join() returns what ServeRendezvous returned.
class Server {
 public:
  Server(int world, double timeout_s, const Rendezvous& rv = MakeRv()) {
    std::string err;
    fd_ = Listen(0, &port_, &err);
    EXPECT_GE(fd_, 0) << err;
    thread_ =
        std::thread([=] { ok_ = Serve(fd_, world, rv, kToken, timeout_s, &error_, &refused_); });
  }
  bool Join() {
    thread_.join();
    return ok_;
  }
  int port() const { return port_; }
  int refused() const { return refused_; }
  const std::string& error() const { return error_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  bool ok_ = false;
  int refused_ = 0;
  std::string error_;
};

TEST(Rendezvous, StrangerConnectingFirstAsRankOneGetsNoIdAndRankOneIsServed) {
  Server server(2, 30);
  // The stranger speaks first, as rank 1, without the token (an all-zero MAC).
  const int s = Connect(server.port());
  ASSERT_GE(s, 0);
  char hello[8 + 32 + 32] = {'S', 'N', 'B', '2', 1, 0, 0, 0};
  ASSERT_EQ(send(s, hello, sizeof hello, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof hello));
  const std::string got = ReadUntilClosed(s, 10);
  close(s);
  EXPECT_EQ(got.size(), 36u) << "the stranger got more than the server's nonce";
  const Rendezvous rv = MakeRv();
  EXPECT_EQ(got.find(std::string(rv.id.internal, 16)), std::string::npos);
  Rendezvous mine;
  std::string err;
  EXPECT_TRUE(Fetch("127.0.0.1", server.port(), 1, kToken, 20, &mine, &err)) << err;
  EXPECT_EQ(std::string(mine.id.internal, kNcclUniqueIdBytes),
            std::string(rv.id.internal, kNcclUniqueIdBytes));
  EXPECT_TRUE(server.Join()) << server.error();
  EXPECT_GE(server.refused(), 1);
}

TEST(Rendezvous, IdleConnectionsDoNotStarveTheRanks) {
  Server server(3, 60);
  std::vector<int> idle;
  for (int i = 0; i < 16; ++i) idle.push_back(Connect(server.port()));
  const double t0 = NowS();
  std::vector<std::thread> ranks;
  for (int r = 1; r <= 2; ++r) {
    ranks.emplace_back([&, r] {
      Rendezvous rv;
      std::string err;
      EXPECT_TRUE(Fetch("127.0.0.1", server.port(), r, kToken, 30, &rv, &err)) << err;
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_TRUE(server.Join()) << server.error();
  // Served while the idle ones still held their connections (a serial server would give each
  // idle connection its whole per-connection wait first: 16 x 10 s).
  EXPECT_LT(NowS() - t0, 8.0);
  for (int fd : idle) close(fd);
}

TEST(Rendezvous, ARankWithAnotherTokenIsRefused) {
  Server server(2, 3);
  Rendezvous rv;
  std::string err;
  EXPECT_FALSE(Fetch("127.0.0.1", server.port(), 1, "another-token-0123456789", 2, &rv, &err));
  EXPECT_NE(err.find("SENTINEL_BASELINE_TOKEN"), std::string::npos) << err;
  EXPECT_FALSE(server.Join());
  EXPECT_NE(server.error().find("ranks: 1"), std::string::npos) << server.error();
  EXPECT_GE(server.refused(), 1);
}

// A squatter on the port: speaks the protocol's shape and answers with `reply(server nonce,
// client hello)` to every connection, until stopped.
class Squatter {
 public:
  using Reply = std::function<std::string(const std::string& nonce, const std::string& hello)>;
  explicit Squatter(Reply reply) : reply_(std::move(reply)) {
    std::string err;
    fd_ = Listen(0, &port_, &err);
    EXPECT_GE(fd_, 0) << err;
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0) continue;
        const std::string nonce(32, '\x42');
        const std::string hello_out = "SNB2" + nonce;
        (void)!send(c, hello_out.data(), hello_out.size(), MSG_NOSIGNAL);
        std::string hello(72, '\0');
        size_t have = 0;
        while (have < hello.size()) {
          const ssize_t r = recv(c, &hello[have], hello.size() - have, 0);
          if (r <= 0) break;
          have += static_cast<size_t>(r);
        }
        const std::string out = reply_(nonce, hello);
        (void)!send(c, out.data(), out.size(), MSG_NOSIGNAL);
        close(c);
      }
    });
  }
  ~Squatter() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }

 private:
  Reply reply_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// "SNB2" | id | n | sizes (the reply without its MAC).
std::string FakeReply(uint64_t size) {
  std::string out = "SNB2" + std::string(kNcclUniqueIdBytes, '\x66');
  const uint32_t n = 1;
  out.append(reinterpret_cast<const char*>(&n), 4);
  out.append(reinterpret_cast<const char*>(&size), 8);
  return out;
}

TEST(Rendezvous, ASquatterCannotFeedAFakeIdOrSize) {
  Squatter squatter([](const std::string&, const std::string&) {
    return FakeReply(~uint64_t{0}) + std::string(32, '\0');  // no way to make the MAC
  });
  Rendezvous rv;
  std::string err;
  EXPECT_FALSE(Fetch("127.0.0.1", squatter.port(), 1, kToken, 2, &rv, &err));
  EXPECT_NE(err.find("did not prove it holds SENTINEL_BASELINE_TOKEN"), std::string::npos) << err;
  EXPECT_TRUE(rv.sizes.empty());
}

// A reply of a rank 0 that holds the token (its MAC is right) with one size, 2^64-1.
std::string ProvenOutOfBoundsReply(const std::string& nonce, const std::string& hello) {
  const std::string reply = FakeReply(~uint64_t{0});
  // MAC input (launch.cc): label | server nonce | client nonce | rank | id | n | sizes.
  const std::string input = "sentinel-baseline server" + nonce + hello.substr(8, 32) +
                            hello.substr(4, 4) + reply.substr(4);
  uint8_t mac[kSha256Bytes];
  HmacSha256(kToken, input, mac);
  return reply + std::string(reinterpret_cast<const char*>(mac), sizeof mac);
}

TEST(Rendezvous, SizesAreBoundedEvenFromAPeerWithTheToken) {
  // A rank 0 that holds the token but sends 2^64-1 (broken, or the token leaked): refused.
  Squatter squatter(ProvenOutOfBoundsReply);
  Rendezvous rv;
  std::string err;
  EXPECT_FALSE(Fetch("127.0.0.1", squatter.port(), 1, kToken, 2, &rv, &err));
  EXPECT_NE(err.find("out of bounds"), std::string::npos) << err;
  // And rank 0 refuses to serve one.
  Rendezvous bad = MakeRv();
  bad.sizes.push_back(kMaxRendezvousBytes + 1);
  int port = 0;
  const int fd = Listen(0, &port, &err);
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(Serve(fd, 2, bad, kToken, 1, &err));
  EXPECT_NE(err.find("out of bounds"), std::string::npos) << err;
}

// The error names the clearest refusal seen, not whatever the last attempt hit: here rank 0
// proves the token and sends an out-of-bounds size once, then only drops connections (as when
// the deadline cuts a read on a loaded machine). Before, the error said "the peer at the port is
// not sentinel-baseline's rank 0" (seen in CI at load 8 in
// SizesAreBoundedEvenFromAPeerWithTheToken).
TEST(Rendezvous, TheClearestRefusalIsReportedNotTheLastAttempts) {
  std::atomic<int> calls{0};
  Squatter squatter([&calls](const std::string& nonce, const std::string& hello) -> std::string {
    if (calls++ > 0) return "";  // closes at once: a generic failure
    return ProvenOutOfBoundsReply(nonce, hello);
  });
  Rendezvous rv;
  std::string err;
  EXPECT_FALSE(Fetch("127.0.0.1", squatter.port(), 1, kToken, 2, &rv, &err));
  EXPECT_GT(calls.load(), 1) << "the rank did not try again";
  EXPECT_NE(err.find("out of bounds"), std::string::npos) << err;
}

}  // namespace
}  // namespace sentinel::baseline
