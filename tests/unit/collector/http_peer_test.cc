// Who asks the HTTP API, as the kernel says (collector/export/http_peer.h): real loopback
// connections opened by this process and by a child running as another uid are found in
// /proc/net/tcp{,6} with their owner; a listing's closed or TIME_WAIT entries and peers it does not
// list name no one; and the read policy, decided in ViewerFor, over every kind of peer.
#include "collector/export/http_peer.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace sentinel::collector {
namespace {

constexpr uint32_t kOtherUid = 4243;
constexpr uint32_t kDaemonUid = 4242;
constexpr gid_t kReaders = 4300;

// A listening loopback socket of `family` on a free port; -1 when that family is not available.
int Listen(int family, int* port) {
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_storage a{};
  socklen_t len = 0;
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof(*in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_any;  // dual stack: IPv4 clients arrive as ::ffff:127.0.0.1
    len = sizeof(*in6);
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd, 8) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&a)->sin_port
                                  : reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
  return fd;
}

// Connects to 127.0.0.1:port; the fd or -1.
int ConnectV4(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

// The server side of an accepted connection, as the HTTP server sees it.
PeerIdentity IdentifyAccepted(int conn, const std::string& proc_net = "/proc/net") {
  sockaddr_storage peer{};
  sockaddr_storage local{};
  socklen_t len = sizeof(peer);
  EXPECT_EQ(getpeername(conn, reinterpret_cast<sockaddr*>(&peer), &len), 0);
  len = sizeof(local);
  EXPECT_EQ(getsockname(conn, reinterpret_cast<sockaddr*>(&local), &len), 0);
  return IdentifyPeer(peer, local, proc_net);
}

TEST(HttpPeerTest, OwnLoopbackConnectionIsThisUid) {
  for (int family : {AF_INET, AF_INET6}) {
    int port = 0;
    const int lfd = Listen(family, &port);
    if (lfd < 0) continue;  // no IPv6 here
    const int client = ConnectV4(port);
    ASSERT_GE(client, 0);
    const int conn = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(conn, 0);
    const PeerIdentity who = IdentifyAccepted(conn);
    EXPECT_TRUE(who.local) << "family " << family;
    EXPECT_TRUE(who.loopback);
    EXPECT_EQ(who.uid, geteuid());
    close(conn);
    close(client);
    close(lfd);
  }
}

// The connection a child of another uid opened is that uid's, not the accepting process's.
TEST(HttpPeerTest, AnotherUidsConnectionIsThatUid) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to open a connection as uid " << kOtherUid;
  int port = 0;
  const int lfd = Listen(AF_INET, &port);
  ASSERT_GE(lfd, 0);
  int done[2];
  ASSERT_EQ(pipe2(done, O_CLOEXEC), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(done[1]);
    if (setgid(kOtherUid) != 0 || setuid(kOtherUid) != 0) _exit(2);
    const int fd = ConnectV4(port);
    char c = 0;
    (void)!read(done[0], &c, 1);  // keep the connection open until the parent looked
    _exit(fd >= 0 ? 0 : 3);
  }
  close(done[0]);
  const int conn = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(conn, 0);
  const PeerIdentity who = IdentifyAccepted(conn);
  (void)!write(done[1], "x", 1);
  close(done[1]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(who.local);
  EXPECT_EQ(who.uid, kOtherUid);
  close(conn);
  close(lfd);
}

// A listing (same format) with the connection only as a TIME_WAIT entry (uid 0, no inode), then
// as an established socket of uid 1000: only the second names anyone.
TEST(HttpPeerTest, OnlyAnOpenEstablishedSocketNamesItsOwner) {
  char tmpl[] = "/tmp/http_peer_test.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  peer.sin_port = htons(0xA1B2);
  sockaddr_in local = peer;
  local.sin_port = htons(9464);  // 0x24F8
  sockaddr_storage p{};
  sockaddr_storage l{};
  memcpy(&p, &peer, sizeof(peer));
  memcpy(&l, &local, sizeof(local));
  const std::string header =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
      "timeout inode\n";
  const auto write_tcp = [&](const std::string& row) {
    std::ofstream(dir + "/tcp") << header << row;
    std::ofstream(dir + "/tcp6") << header;
  };
  write_tcp(
      "   0: 0100007F:A1B2 0100007F:24F8 06 00000000:00000000 03:00001770 00000000     0        0 "
      "0 "
      "3 0000000000000000\n");
  EXPECT_FALSE(IdentifyPeer(p, l, dir).local);
  write_tcp(
      "   0: 0100007F:24F8 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 "
      "555 1 0000000000000000 20 4 30 10 -1\n");
  EXPECT_FALSE(IdentifyPeer(p, l, dir).local) << "the server's own side is not the peer";
  write_tcp(
      "   0: 0100007F:A1B2 0100007F:24F8 01 00000000:00000000 00:00000000 00000000  1000        0 "
      "556 1 0000000000000000 20 4 30 10 -1\n");
  const PeerIdentity who = IdentifyPeer(p, l, dir);
  EXPECT_TRUE(who.local);
  EXPECT_EQ(who.uid, 1000u);
  // A peer at another address is not listed: a peer on another host.
  peer.sin_addr.s_addr = htonl(0x0A000005);
  memcpy(&p, &peer, sizeof(peer));
  const PeerIdentity remote = IdentifyPeer(p, l, dir);
  EXPECT_FALSE(remote.local);
  EXPECT_FALSE(remote.loopback);
  (void)!system(("rm -rf " + dir).c_str());
}

TEST(HttpPeerTest, PolicySeesAllOnlyForRootTheDaemonAndReaders) {
  ApiReadPolicy policy;
  policy.daemon_uid = kDaemonUid;
  const auto in_group = [](uint32_t uid, gid_t gid) { return uid == 1001 && gid == kReaders; };
  const auto local = [](uint32_t uid) {
    PeerIdentity p;
    p.local = true;
    p.loopback = true;
    p.uid = uid;
    return p;
  };
  EXPECT_TRUE(ViewerFor(policy, local(0), in_group).sees_all);
  EXPECT_TRUE(ViewerFor(policy, local(kDaemonUid), in_group).sees_all);
  EXPECT_FALSE(ViewerFor(policy, local(1001), in_group).sees_all) << "no reader group set";
  const ApiViewer other = ViewerFor(policy, local(kOtherUid), in_group);
  EXPECT_FALSE(other.sees_all);
  EXPECT_EQ(other.uid, kOtherUid);
  EXPECT_TRUE(other.Sees(kOtherUid));
  EXPECT_FALSE(other.Sees(kDaemonUid));
  policy.reader_gid = kReaders;
  EXPECT_TRUE(ViewerFor(policy, local(1001), in_group).sees_all);
  EXPECT_FALSE(ViewerFor(policy, local(kOtherUid), in_group).sees_all);
  // Not listed: on loopback (gone, or unattributable) it sees nothing, even with remote details.
  PeerIdentity unlisted;
  unlisted.loopback = true;
  policy.remote_details = true;
  EXPECT_FALSE(ViewerFor(policy, unlisted, in_group).sees_all);
  EXPECT_FALSE(ViewerFor(policy, unlisted, in_group).Sees(0));
  // Another host: nothing by default, everything when the operator opts in.
  PeerIdentity remote;
  EXPECT_TRUE(ViewerFor(policy, remote, in_group).sees_all);
  policy.remote_details = false;
  EXPECT_FALSE(ViewerFor(policy, remote, in_group).sees_all);
  EXPECT_FALSE(ViewerFor(policy, remote, in_group).Sees(ApiViewer::kUnknownUid));
}

TEST(HttpPeerTest, GroupMembershipFromTheUserDatabase) {
  EXPECT_TRUE(UidInGroup(0, 0));       // root's primary group
  EXPECT_FALSE(UidInGroup(0, 65534));  // nogroup
  EXPECT_TRUE(GroupId("root").ok());
  EXPECT_FALSE(GroupId("no-such-group-here").ok());
}

}  // namespace
}  // namespace sentinel::collector
