// The UNIX-socket side of sentineld: one epoll event-loop thread accepts plugin connections,
// checks the peer's credentials (SO_PEERCRED), reads frames into per-client Sessions and feeds
// an IngestConsumer (the Aggregator). A bad client is closed alone; the others never notice.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

#include "collector/config/config.h"
#include "collector/ingest/ingest_consumer.h"
#include "collector/ingest/session.h"

namespace sentinel::collector {

// Thread-compatible: Listen() then Run() on one thread; Stop() from any thread.
class IngestServer {
 public:
  IngestServer(const Config& config, IngestConsumer* aggregator);
  ~IngestServer();
  IngestServer(const IngestServer&) = delete;
  IngestServer& operator=(const IngestServer&) = delete;

  // Creates the socket's directory (0700, or 0750 with --allow-group), binds and listens; the
  // socket file gets mode 0600 (0660 with --allow-group). A live daemon answering on the path is
  // an error naming its pid; only a stale socket (nobody listening) is removed, and a path that
  // is not a socket is never touched.
  absl::Status Listen();
  // Runs until Stop(). Calls aggregator->Tick() every config.tick_ns.
  void Run();
  void Stop();
  const std::string& socket_path() const { return socket_path_; }

 private:
  struct Client {
    int fd = -1;
    int id = 0;
    pid_t pid = 0;
    uid_t uid = 0;
    int64_t accepted_ns = 0;
    int64_t last_read_ns = 0;  // when bytes last came (accepted_ns until then)
    bool sent_bytes = false;   // any byte came: kept when a hello-less connection must go
    bool handshaking = true;   // counted in handshaking_ / handshakes_by_uid_ until its hello
    std::unique_ptr<Session> session;
  };
  // Closes connections still in their hello after --hello-timeout.
  void ExpireHandshakes();
  // Makes room for a connection of `uid` by closing one still in its hello: one of `uid` when
  // that uid holds its per-uid share, else one of the uid holding the most (so one uid's churn of
  // hello-less connections only ever evicts its own). Within that uid, the oldest connection of
  // the process (SO_PEERCRED pid) holding the most, so that a process's flood of connections that
  // never say hello evicts its own and not the same user's job about to say hello; a connection
  // that has sent bytes is read first and never evicted here. False if none is closed.
  bool EvictHandshakeFor(uid_t uid, bool uid_at_cap);
  // The table is full: a uid holding less than its fair share (the table over the uids holding
  // connections, the newcomer's counted) takes the slot of the idlest connection of the uid
  // holding the most. False when `uid` is at its fair share or nobody holds more.
  bool EvictForFairShare(uid_t uid);
  // Room for a new connection of `cred.uid` (evicting as above), or false after telling the peer
  // why on `fd` and counting it; the caller then closes `fd`.
  bool Admit(int fd, const ucred& cred);
  // Tells a peer that sentineld will not serve it (SentinelWireRefused), without waiting.
  void SendRefused(int fd, uint16_t reason, size_t limit, size_t held);
  // The connection said hello (or is closing): it no longer counts as handshaking.
  void EndHandshake(Client* client);
  size_t HandshakeCap() const;
  size_t HandshakeCapPerUid() const;
  // The connections one uid may hold: half of the effective --max-clients.
  size_t ShareCapPerUid() const;
  size_t HeldBy(uid_t uid) const;
  // --max-clients clamped to the descriptors left after the HTTP server's share and our own.
  void ClampClientsToFds();
  // Once, as Run() starts: the effective limit and, when the descriptors lowered it, why.
  void LogClientLimit() const;
  absl::Status ClaimSocketPath(const sockaddr_un& addr);
  void Accept();
  bool PeerAllowed(uid_t uid, gid_t gid) const;
  void ReadClient(Client* client);
  void CloseClient(Client* client, CloseReason reason);
  // Sends the aggregator's frames for plugins (hang verdicts) after a tick.
  void SendOutbound();
  bool ShouldLog();

  const Config config_;
  IngestConsumer* const aggregator_;
  std::string socket_path_;
  int listen_fd_ = -1;
  // The socket file we bound (device, inode): unlinked at exit only if the path still is it.
  dev_t socket_dev_ = 0;
  ino_t socket_ino_ = 0;
  int lock_fd_ = -1;  // flock on <socket>.lock for our lifetime: one daemon per path
  // Held open so that, out of descriptors, Accept() can free one to accept and close the pending
  // connection; otherwise the level-triggered listen socket would wake the loop forever.
  int spare_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  gid_t allow_gid_ = static_cast<gid_t>(-1);
  std::atomic<bool> stop_{false};
  int next_client_id_ = 1;
  absl::flat_hash_map<int, std::unique_ptr<Client>> clients_;  // by fd
  // Connections still in their hello, in all and per kernel uid (SO_PEERCRED).
  size_t handshaking_ = 0;
  absl::flat_hash_map<uid_t, size_t> handshakes_by_uid_;
  // Every connection (handshaking or not) per kernel uid, and the effective client limit.
  absl::flat_hash_map<uid_t, size_t> clients_by_uid_;
  size_t max_clients_ = 1;
  std::string fd_note_;      // the open-file figures behind max_clients_, for the start log
  int64_t loop_now_ns_ = 0;  // the clock at the latest wake-up (idleness of connections)
  int64_t log_window_start_ns_ = 0;
  int log_in_window_ = 0;
  uint64_t log_suppressed_ = 0;
};

}  // namespace sentinel::collector
