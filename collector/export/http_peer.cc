// The peer's uid from /proc/net/tcp{,6} and the API's read policy: see http_peer.h.
#include "collector/export/http_peer.h"

#include <netinet/in.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace sentinel::collector {
namespace {

constexpr char kTcpEstablished[] = "01";  // /proc/net/tcp's st column; other states do not count
// ::ffff:0:0/96, IPv6's form of an IPv4 address.
constexpr uint8_t kMappedV4Prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

// One end of a connection as /proc/net/tcp{,6} prints it: the address's bytes and the port.
struct End {
  std::array<uint8_t, 16> addr{};
  size_t addr_len = 0;  // 4 (tcp) or 16 (tcp6)
  uint16_t port = 0;
};

bool IsMappedV4(const in6_addr& a) {
  return memcmp(a.s6_addr, kMappedV4Prefix, sizeof(kMappedV4Prefix)) == 0;
}

// `sa` as an IPv4 end (AF_INET, or IPv6 mapping an IPv4 address) and as an IPv6 end (the
// mapped form for IPv4); false where that form does not exist.
bool AsV4(const sockaddr_storage& sa, End* out) {
  out->addr_len = 4;
  if (sa.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&sa);
    memcpy(out->addr.data(), &in->sin_addr, 4);
    out->port = ntohs(in->sin_port);
    return true;
  }
  if (sa.ss_family != AF_INET6) return false;
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&sa);
  if (!IsMappedV4(in6->sin6_addr)) return false;
  memcpy(out->addr.data(), in6->sin6_addr.s6_addr + 12, 4);
  out->port = ntohs(in6->sin6_port);
  return true;
}

bool AsV6(const sockaddr_storage& sa, End* out) {
  out->addr_len = 16;
  if (sa.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&sa);
    memcpy(out->addr.data(), in6->sin6_addr.s6_addr, 16);
    out->port = ntohs(in6->sin6_port);
    return true;
  }
  End v4;
  if (!AsV4(sa, &v4)) return false;
  out->addr = {};
  out->addr[10] = 0xff;
  out->addr[11] = 0xff;
  memcpy(out->addr.data() + 12, v4.addr.data(), 4);
  out->port = v4.port;
  return true;
}

// "0100007F:1F90": the address as 32-bit words, each printed as the host's integer of its
// network-order bytes, then the port in hex.
bool ParseEnd(absl::string_view text, size_t addr_len, End* out) {
  const size_t colon = text.find(':');
  if (colon != addr_len * 2) return false;
  out->addr_len = addr_len;
  for (size_t w = 0; w < addr_len / 4; ++w) {
    uint32_t word = 0;
    if (!absl::SimpleHexAtoi(text.substr(w * 8, 8), &word)) return false;
    memcpy(out->addr.data() + w * 4, &word, 4);
  }
  uint32_t port = 0;
  if (!absl::SimpleHexAtoi(text.substr(colon + 1), &port) || port > 0xffff) return false;
  out->port = static_cast<uint16_t>(port);
  return true;
}

bool SameEnd(const End& a, const End& b) {
  return a.port == b.port && a.addr_len == b.addr_len &&
         memcmp(a.addr.data(), b.addr.data(), a.addr_len) == 0;
}

// The uid owning the established socket with local end `want_local` and remote end
// `want_remote` in `path` (a /proc/net/tcp-format file).
std::optional<uint32_t> FindOwner(const std::string& path, const End& want_local,
                                  const End& want_remote) {
  FILE* f = fopen(path.c_str(), "re");
  if (f == nullptr) return std::nullopt;
  std::optional<uint32_t> owner;
  std::vector<char> line(512);
  bool header = true;
  while (!owner && fgets(line.data(), static_cast<int>(line.size()), f) != nullptr) {
    if (header) {
      header = false;
      continue;
    }
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
    std::vector<absl::string_view> cols =
        absl::StrSplit(absl::string_view(line.data()), ' ', absl::SkipEmpty());
    if (cols.size() < 10) continue;
    End local;
    End remote;
    uint32_t uid = 0;
    uint64_t inode = 0;
    if (cols[3] != kTcpEstablished || !ParseEnd(cols[1], want_local.addr_len, &local) ||
        !ParseEnd(cols[2], want_local.addr_len, &remote) || !SameEnd(local, want_local) ||
        !SameEnd(remote, want_remote) || !absl::SimpleAtoi(cols[7], &uid) ||
        !absl::SimpleAtoi(cols[9], &inode) || inode == 0) {
      continue;
    }
    owner = uid;
  }
  fclose(f);
  return owner;
}

bool IsLoopback(const sockaddr_storage& sa) {
  End v4;
  if (AsV4(sa, &v4)) return v4.addr[0] == 127;
  if (sa.ss_family != AF_INET6) return false;
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&sa);
  return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
}

}  // namespace

PeerIdentity IdentifyPeer(const sockaddr_storage& peer, const sockaddr_storage& local,
                          const std::string& proc_net) {
  PeerIdentity who;
  who.loopback = IsLoopback(peer);
  End peer_end;
  End local_end;
  std::optional<uint32_t> uid;
  // The peer's socket is IPv4 (listed in tcp) or IPv6, perhaps mapping IPv4 (listed in tcp6).
  if (AsV4(peer, &peer_end) && AsV4(local, &local_end)) {
    uid = FindOwner(proc_net + "/tcp", peer_end, local_end);
  }
  if (!uid && AsV6(peer, &peer_end) && AsV6(local, &local_end)) {
    uid = FindOwner(proc_net + "/tcp6", peer_end, local_end);
  }
  if (uid) {
    who.local = true;
    who.uid = *uid;
  }
  return who;
}

ApiViewer ViewerFor(const ApiReadPolicy& policy, const PeerIdentity& peer,
                    const std::function<bool(uint32_t, gid_t)>& in_group) {
  if (!peer.local) {
    // Not a socket of this host: a peer elsewhere, or a loopback one that is gone already.
    if (!peer.loopback && policy.remote_details) return ApiViewer::Everything();
    return ApiViewer{};
  }
  ApiViewer viewer = ApiViewer::OfUid(peer.uid);
  viewer.sees_all = peer.uid == 0 || peer.uid == policy.daemon_uid ||
                    (policy.reader_gid && in_group(peer.uid, *policy.reader_gid));
  return viewer;
}

}  // namespace sentinel::collector
