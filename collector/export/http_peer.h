// Who is asking, for the HTTP API's job details: the kernel's word, never the peer's. A TCP peer
// on this host (loopback, or one of the host's own addresses) owns a socket listed in
// /proc/net/tcp or /proc/net/tcp6 with that connection's addresses swapped, and the listing's uid
// column is its owner. A peer not listed there is on another host (or gone). The policy that turns
// the answer into an ApiViewer is decided here, in one place (ViewerFor).
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

#include "collector/aggregate/snapshot_source.h"  // ApiViewer, as export may include it
#include "collector/base/user_groups.h"

namespace sentinel::collector {

// What the kernel says of one connection's peer.
struct PeerIdentity {
  bool local = false;  // its socket is listed in this network namespace's /proc/net/tcp{,6}
  uint32_t uid = ApiViewer::kUnknownUid;  // the listed socket's owner when local
  bool loopback = false;  // the peer address is 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104
};

// The socket whose local end is `peer` and whose remote end is `local` (the server's side of the
// connection, as getsockname gives it), looked up in `proc_net`/tcp and `proc_net`/tcp6. Only an
// open socket counts (a TIME_WAIT entry or an orphan has no inode and reads as uid 0).
PeerIdentity IdentifyPeer(const sockaddr_storage& peer, const sockaddr_storage& local,
                          const std::string& proc_net = "/proc/net");

// Who may read whose job details.
struct ApiReadPolicy {
  uint32_t daemon_uid = 0;
  // --api-read-group: members (by primary group or membership) see every job's details.
  std::optional<gid_t> reader_gid;
  // --api-remote-details: peers on other hosts (no uid known) see every job's details.
  bool remote_details = false;
};

// The policy: root, the daemon's own uid and members of the reader group see everything; another
// local uid sees its own jobs; a local peer whose socket is not found sees nothing; a peer on
// another host sees everything only with remote_details, else nothing. `in_group` answers group
// membership (UidInGroup; a test seam).
ApiViewer ViewerFor(const ApiReadPolicy& policy, const PeerIdentity& peer,
                    const std::function<bool(uint32_t, gid_t)>& in_group = UidInGroup);

}  // namespace sentinel::collector
