// epoll ingest loop: see ingest_server.h.
#include "collector/ingest/ingest_server.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

#include "collector/base/epoll_wakeup.h"
#include "collector/base/fd_budget.h"
#include "collector/base/owned_paths.h"
#include "collector/base/user_groups.h"
#include "common/fs_trust.h"

namespace sentinel::collector {
namespace {

constexpr int kMaxLogsPerMinute = 20;
constexpr int kMaxReadsPerWakeup = 16;  // fairness between clients
// Descriptors kept for sentineld's own files besides both servers' connections: the listen,
// epoll and wake-up descriptors, the lock and port files, the record log, sysfs and /proc reads,
// the push gateway's socket, libmicrohttpd's own.
constexpr rlim_t kOwnFds = 64;

}  // namespace

absl::Status IngestServer::ClaimSocketPath(const sockaddr_un& addr) {
  // One daemon per path, also when two start at once: the lock is held for our lifetime.
  const std::string lock_path = socket_path_ + ".lock";
  lock_fd_ = open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  const bool locked = lock_fd_ >= 0 && flock(lock_fd_, LOCK_EX | LOCK_NB) == 0;
  struct stat st {};
  if (lstat(socket_path_.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return absl::InternalError(absl::StrCat("stat ", socket_path_, ": ", ErrnoText(errno)));
    }
    if (!locked) {
      return absl::FailedPreconditionError(absl::StrCat(
          "another sentineld is starting on ", socket_path_, " (", lock_path, " is locked)"));
    }
    return absl::OkStatus();
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        socket_path_, " exists and is not a socket: not removing it (choose another --socket)"));
  }
  // A live daemon accepts; its pid is the listener's credentials on our connection.
  const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe >= 0 && connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
    ucred cred{};
    socklen_t len = sizeof(cred);
    const bool have = getsockopt(probe, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0;
    close(probe);
    return absl::FailedPreconditionError(absl::StrCat(
        "sentineld is already running on ", socket_path_,
        have ? absl::StrCat(" (pid ", cred.pid, ")") : std::string(), "; not starting a second"));
  }
  const int err = errno;
  if (probe >= 0) close(probe);
  if (!locked) {
    return absl::FailedPreconditionError(absl::StrCat(
        "another sentineld holds ", lock_path, " for ", socket_path_, "; not starting a second"));
  }
  if (err != ECONNREFUSED) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot tell whether ", socket_path_, " is in use: ", ErrnoText(err)));
  }
  // Nobody listens and nobody holds the lock: a killed daemon's socket.
  if (unlink(socket_path_.c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(
        absl::StrCat("remove stale socket ", socket_path_, ": ", ErrnoText(errno)));
  }
  spdlog::info("removed the stale socket {}", socket_path_);
  return absl::OkStatus();
}

IngestServer::IngestServer(const Config& config, IngestConsumer* aggregator)
    : config_(config), aggregator_(aggregator) {
  socket_path_ = config_.socket_path.empty() ? DefaultSocketPath() : config_.socket_path;
  max_clients_ = static_cast<size_t>(std::max(1, config_.max_clients));
}

void IngestServer::ClampClientsToFds() {
  // The HTTP server raises the soft limit to the hard one when it starts; so do we, first, so that
  // both count on the same figure.
  const rlim_t nofile = RaisedFileLimit();
  if (nofile == 0 || nofile == RLIM_INFINITY) return;
  const rlim_t http = HttpConnectionsForFds(nofile);
  const rlim_t left = nofile > http + kOwnFds ? nofile - http - kOwnFds : 1;
  const size_t configured = max_clients_;
  max_clients_ = std::min<size_t>(configured, static_cast<size_t>(left));
  fd_note_ = absl::StrCat("open-file limit ", static_cast<uint64_t>(nofile), ": ",
                          static_cast<uint64_t>(http), " for HTTP connections, ",
                          static_cast<uint64_t>(kOwnFds), " for sentineld's own files");
}

void IngestServer::LogClientLimit() const {
  if (max_clients_ < static_cast<size_t>(std::max(1, config_.max_clients))) {
    spdlog::warn(
        "plugin connections: at most {}, not --max-clients {}, {} per uid ({}; raise LimitNOFILE "
        "/ ulimit -n for more)",
        max_clients_, config_.max_clients, ShareCapPerUid(), fd_note_);
  } else {
    spdlog::info("plugin connections: at most {} (--max-clients), {} per uid{}{}", max_clients_,
                 ShareCapPerUid(), fd_note_.empty() ? "" : "; ", fd_note_);
  }
}

IngestServer::~IngestServer() {
  for (auto& [fd, client] : clients_) close(fd);
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    // Only the file we created: another process may have put its own socket at the path.
    struct stat st {};
    if (socket_ino_ != 0 && lstat(socket_path_.c_str(), &st) == 0 && st.st_ino == socket_ino_ &&
        st.st_dev == socket_dev_) {
      unlink(socket_path_.c_str());
    }
  }
  if (lock_fd_ >= 0) close(lock_fd_);  // the lock file stays: removing it would race a starter
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (spare_fd_ >= 0) close(spare_fd_);
}

absl::Status IngestServer::Listen() {
  sockaddr_un addr{};
  if (socket_path_.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "socket path longer than ", sizeof(addr.sun_path) - 1, " bytes: ", socket_path_));
  }
  const bool use_group = !config_.allow_group.empty();
  if (use_group) {
    absl::StatusOr<gid_t> gid = GroupId(config_.allow_group);
    if (!gid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--allow-group: unknown group ", config_.allow_group));
    }
    allow_gid_ = *gid;
  }
  // The socket's directory: created (last component only) or brought to its documented mode,
  // and refused when another user could replace what is in it (owned_paths.h).
  absl::Status dir_ok =
      PrepareSocketDir(DirName(socket_path_), use_group ? 0750 : 0700,
                       use_group ? allow_gid_ : kNoGroup, rules::TrustedUidsFromEnv());
  if (!dir_ok.ok()) return dir_ok;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path_.data(), socket_path_.size());
  absl::Status owned = ClaimSocketPath(addr);
  if (!owned.ok()) return owned;
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return absl::InternalError(absl::StrCat("socket: ", ErrnoText(errno)));
  spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  // Bind with a tight umask so there is no window where the socket is world-connectable.
  const mode_t old_mask = umask(use_group ? 0117 : 0177);
  const int rc = bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  umask(old_mask);
  if (rc != 0)
    return absl::InternalError(absl::StrCat("bind ", socket_path_, ": ", ErrnoText(errno)));
  struct stat bound {};
  if (lstat(socket_path_.c_str(), &bound) == 0) {
    socket_dev_ = bound.st_dev;
    socket_ino_ = bound.st_ino;
  }
  if (use_group) {
    if (chown(socket_path_.c_str(), static_cast<uid_t>(-1), allow_gid_) != 0) {
      spdlog::warn("chown {} to group {}: {}", socket_path_, config_.allow_group, ErrnoText(errno));
    }
  }
  if (chmod(socket_path_.c_str(), use_group ? 0660 : 0600) != 0) {
    return absl::InternalError(absl::StrCat("chmod ", socket_path_, ": ", ErrnoText(errno)));
  }
  ClampClientsToFds();
  if (listen(listen_fd_, 512) != 0)
    return absl::InternalError(absl::StrCat("listen: ", ErrnoText(errno)));
  return OpenEpollWithWakeup(listen_fd_, &epoll_fd_, &wake_fd_, "ingest");
}

void IngestServer::Stop() {
  stop_.store(true, std::memory_order_relaxed);  // the eventfd write below is the wake-up
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
}

bool IngestServer::ShouldLog() {
  const int64_t now = aggregator_->clock()->MonoNs();
  if (now - log_window_start_ns_ > 60LL * 1000000000) {
    if (log_suppressed_ > 0)
      spdlog::warn("{} client errors not logged in the last minute", log_suppressed_);
    log_window_start_ns_ = now;
    log_in_window_ = 0;
    log_suppressed_ = 0;
  }
  if (log_in_window_ < kMaxLogsPerMinute) {
    ++log_in_window_;
    return true;
  }
  ++log_suppressed_;
  return false;
}

bool IngestServer::PeerAllowed(uid_t uid, gid_t gid) const {
  if (uid == geteuid()) return true;
  if (allow_gid_ == static_cast<gid_t>(-1)) return false;
  if (gid == allow_gid_) return true;
  return UidInGroup(uid, allow_gid_);
}

size_t IngestServer::HandshakeCap() const {
  return std::max<size_t>(
      1, std::min(static_cast<size_t>(std::max(1, config_.max_handshaking)), max_clients_ / 4));
}

size_t IngestServer::HandshakeCapPerUid() const { return std::max<size_t>(1, HandshakeCap() / 2); }

// Half: one user at their share leaves the other half free for everyone else's jobs without
// evicting anything, and a single user's node still has hundreds of processes' worth.
size_t IngestServer::ShareCapPerUid() const { return std::max<size_t>(1, max_clients_ / 2); }

size_t IngestServer::HeldBy(uid_t uid) const {
  auto it = clients_by_uid_.find(uid);
  return it == clients_by_uid_.end() ? 0 : it->second;
}

void IngestServer::SendRefused(int fd, uint16_t reason, size_t limit, size_t held) {
  const std::string frame =
      RefusedFrame(reason, static_cast<uint32_t>(std::min<size_t>(limit, UINT32_MAX)),
                   static_cast<uint32_t>(std::min<size_t>(held, UINT32_MAX)));
  // A fresh socket's buffer takes these 32 bytes; a peer that filled it loses the reason, not us
  // time.
  (void)!send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

bool IngestServer::Admit(int fd, const ucred& cred) {
  const uid_t uid = cred.uid;
  // Connections still in their hello hold a bounded share of the slots, and give theirs up
  // first: a job that said hello is never refused behind idle connections. Each uid holds at
  // most half of that share, and room is taken from the uid holding the most: a flood of
  // hello-less connections evicts only its own, never another user's job in its handshake.
  auto mine = handshakes_by_uid_.find(uid);
  const bool uid_at_cap = mine != handshakes_by_uid_.end() && mine->second >= HandshakeCapPerUid();
  if (uid_at_cap || handshaking_ >= HandshakeCap()) (void)EvictHandshakeFor(uid, uid_at_cap);
  // Every connection of a uid, hello or not, counts against its share of --max-clients: another
  // user's idle connections never take the slots of everyone else's jobs.
  if (HeldBy(uid) >= ShareCapPerUid() && !EvictHandshakeFor(uid, true)) {
    if (ShouldLog()) {
      spdlog::warn(
          "refused pid {} uid {}: the uid holds its share of plugin connections ({} of {})",
          cred.pid, uid, HeldBy(uid), max_clients_);
    }
    SendRefused(fd, kSentinelRefusedUidShare, ShareCapPerUid(), HeldBy(uid));
    aggregator_->NoteRefused("uid_share");
    return false;
  }
  if (clients_.size() >= max_clients_ && !EvictHandshakeFor(uid, false) &&
      !EvictForFairShare(uid)) {
    if (ShouldLog()) {
      spdlog::warn("refused pid {} uid {}: --max-clients {} reached", cred.pid, uid, max_clients_);
    }
    SendRefused(fd, kSentinelRefusedTooMany, max_clients_, HeldBy(uid));
    aggregator_->NoteRefused("too_many");
    return false;
  }
  return true;
}

void IngestServer::Accept() {
  // A bounded batch per wake-up, no larger than a uid's share of handshakes: a connection accepted
  // here is read (its hello counted) before its own uid's later connections can push it out.
  const size_t batch = std::min<size_t>(16, HandshakeCapPerUid());
  for (size_t accepted = 0; accepted < batch; ++accepted) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
      // Out of descriptors: refuse the pending peer (it reconnects with backoff) rather than
      // leave it queued, which would make epoll report the listen socket again at once.
      close(spare_fd_);
      const int refused = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (refused >= 0) {
        SendRefused(refused, kSentinelRefusedFdLimit, max_clients_, 0);
        close(refused);
      }
      spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (ShouldLog()) spdlog::warn("refused a plugin connection: out of file descriptors");
      aggregator_->NoteRefused("fd_limit");
      if (refused < 0) return;
      continue;
    }
    if (fd < 0) return;  // EAGAIN, or a transient error: the next wake-up retries
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        !PeerAllowed(cred.uid, cred.gid)) {
      if (ShouldLog()) {
        spdlog::warn("refused plugin connection from pid {} uid {}: not our uid{}", cred.pid,
                     cred.uid, config_.allow_group.empty() ? "" : " nor in --allow-group");
      }
      SendRefused(fd, kSentinelRefusedNotAllowed, 0, 0);
      aggregator_->NoteRefused("uid");
      close(fd);
      continue;
    }
    if (!Admit(fd, cred)) {
      close(fd);
      continue;
    }
    auto client = std::make_unique<Client>();
    client->fd = fd;
    client->id = next_client_id_++;
    client->pid = cred.pid;
    client->uid = cred.uid;
    client->accepted_ns = aggregator_->clock()->MonoNs();
    client->last_read_ns = client->accepted_ns;
    client->session = std::make_unique<Session>(client->id, aggregator_);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      close(fd);
      continue;
    }
    aggregator_->NoteAccepted(client->id, static_cast<uint32_t>(cred.pid), cred.uid);
    ++handshaking_;
    ++handshakes_by_uid_[cred.uid];
    ++clients_by_uid_[cred.uid];
    Client* added = client.get();
    clients_.emplace(fd, std::move(client));
    // A plugin writes its hello right after connecting: read it now, so that the connection
    // leaves the hello-less pool before later connections of its uid can push it out.
    ReadClient(added);
  }
}

bool IngestServer::EvictHandshakeFor(uid_t uid, bool uid_at_cap) {
  uid_t victim_uid = uid;
  if (!uid_at_cap) {
    size_t most = 0;
    for (const auto& [u, n] : handshakes_by_uid_) {
      if (n > most || (n == most && u == uid)) {
        most = n;
        victim_uid = u;
      }
    }
    if (most == 0) return false;
  }
  // Candidates: that uid's hello-less connections that sent nothing yet, per process.
  absl::flat_hash_map<pid_t, size_t> per_pid;
  for (const auto& [fd, c] : clients_) {
    if (c->handshaking && c->uid == victim_uid && !c->sent_bytes) ++per_pid[c->pid];
  }
  // A few tries: a candidate whose hello is waiting in its socket says it when read, and stays.
  for (int attempt = 0; attempt < 4 && !per_pid.empty(); ++attempt) {
    pid_t top = 0;
    size_t top_n = 0;
    for (const auto& [pid, n] : per_pid) {
      if (n > top_n || (n == top_n && pid < top)) {
        top = pid;
        top_n = n;
      }
    }
    Client* oldest = nullptr;
    for (const auto& [fd, c] : clients_) {
      if (!c->handshaking || c->uid != victim_uid || c->sent_bytes || c->pid != top) continue;
      if (oldest == nullptr || c->accepted_ns < oldest->accepted_ns ||
          (c->accepted_ns == oldest->accepted_ns && c->id < oldest->id)) {
        oldest = c.get();
      }
    }
    if (oldest == nullptr) return false;
    const int fd = oldest->fd;
    ReadClient(oldest);  // may say hello, send a part of it, or close
    auto still = clients_.find(fd);
    if (still == clients_.end()) return true;  // it closed: its slot is free
    Client* c = still->second.get();
    if (c->handshaking && !c->sent_bytes) {
      if (ShouldLog()) {
        spdlog::warn("closed pid {} uid {}: slot needed, no hello yet", c->pid, c->uid);
      }
      aggregator_->NoteRefused("hello_timeout");
      CloseClient(c, CloseReason::kNone);
      return true;
    }
    if (--per_pid[top] == 0) per_pid.erase(top);
  }
  return false;
}

bool IngestServer::EvictForFairShare(uid_t uid) {
  const size_t mine = HeldBy(uid);
  const size_t users = clients_by_uid_.size() + (mine == 0 ? 1 : 0);
  const size_t fair = max_clients_ / std::max<size_t>(1, users);
  if (mine >= fair) return false;
  uid_t top = uid;
  size_t most = 0;
  for (const auto& [u, n] : clients_by_uid_) {
    if (u != uid && (n > most || (n == most && u < top))) {
      most = n;
      top = u;
    }
  }
  // Only from a uid above the newcomer by two or more: two uids never trade a slot back and forth.
  if (most < mine + 2) return false;
  Client* idlest = nullptr;
  for (const auto& [fd, c] : clients_) {
    if (c->uid != top) continue;
    if (idlest == nullptr || c->last_read_ns < idlest->last_read_ns ||
        (c->last_read_ns == idlest->last_read_ns && c->id < idlest->id)) {
      idlest = c.get();
    }
  }
  if (idlest == nullptr) return false;
  if (ShouldLog()) {
    spdlog::warn(
        "closed pid {} uid {}: its uid holds {} plugin connections, uid {} {} (fair share {})",
        idlest->pid, idlest->uid, most, uid, mine, fair);
  }
  SendRefused(idlest->fd, kSentinelRefusedEvicted, fair, most);
  aggregator_->NoteRefused("evicted");
  CloseClient(idlest, CloseReason::kNone);
  return true;
}

void IngestServer::EndHandshake(Client* client) {
  if (!client->handshaking) return;
  client->handshaking = false;
  --handshaking_;
  auto it = handshakes_by_uid_.find(client->uid);
  if (it != handshakes_by_uid_.end() && --it->second == 0) handshakes_by_uid_.erase(it);
}

void IngestServer::ExpireHandshakes() {
  const int64_t now = aggregator_->clock()->MonoNs();
  std::vector<Client*> expired;
  for (const auto& [fd, c] : clients_) {
    if (c->handshaking && now - c->accepted_ns >= config_.hello_timeout_ns) {
      expired.push_back(c.get());
    }
  }
  for (Client* c : expired) {
    if (ShouldLog()) spdlog::warn("closed pid {}: no hello within --hello-timeout", c->pid);
    aggregator_->NoteRefused("hello_timeout");
    CloseClient(c, CloseReason::kNone);
  }
}

void IngestServer::CloseClient(Client* client, CloseReason reason) {
  Session* s = client->session.get();
  if (reason != CloseReason::kNone && ShouldLog()) {
    if (reason == CloseReason::kMajorMismatch) {
      spdlog::error(
          "refused plugin pid {}: wire major version {} != ours {}; upgrade the plugin or "
          "sentineld",
          client->pid, s->refused_major(), SENTINEL_WIRE_MAJOR);
    } else {
      spdlog::warn("closed plugin connection pid {}: {} ({})", client->pid, CloseReasonName(reason),
                   s->CloseDetail());
    }
  }
  EndHandshake(client);
  auto held = clients_by_uid_.find(client->uid);
  if (held != clients_by_uid_.end() && --held->second == 0) clients_by_uid_.erase(held);
  aggregator_->NoteClosed(client->id, reason, s->frames(), s->skipped_unknown());
  aggregator_->OnDisconnect(client->id);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, client->fd, nullptr);
  const int fd = client->fd;
  close(fd);
  clients_.erase(fd);  // destroys *client
}

void IngestServer::ReadClient(Client* client) {
  Session* s = client->session.get();
  for (int i = 0; i < kMaxReadsPerWakeup; ++i) {
    const ssize_t n = read(client->fd, s->WritableTail(), s->WritableSize());
    if (n == 0) {
      s->NoteEof();
      // A hello cut short is a refused hello, not a malformed frame of a known client.
      CloseClient(client, !s->has_partial() ? CloseReason::kNone
                          : s->hello_done() ? CloseReason::kMalformed
                                            : CloseReason::kBadHello);
      return;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      CloseClient(client, CloseReason::kNone);
      return;
    }
    client->sent_bytes = true;
    client->last_read_ns = loop_now_ns_;
    const absl::Status committed = s->Commit(static_cast<size_t>(n));
    if (client->handshaking && s->hello_done()) EndHandshake(client);
    std::string& out = s->PendingOutput();
    if (!out.empty()) {
      // Only the 24-byte hello ack goes this way; a peer that cannot take it is closed.
      (void)!send(client->fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      out.clear();
    }
    if (!committed.ok()) {
      CloseClient(client, s->reason());
      return;
    }
  }
}

void IngestServer::SendOutbound() {
  for (auto& [id, frame] : aggregator_->TakeOutbound()) {
    for (auto& [fd, c] : clients_) {
      if (c->id != id) continue;
      // A whole ~1.2 KB frame into an idle socket's buffer; one that cannot take it (a plugin
      // that stopped reading) loses the verdict, counted, rather than stall the loop.
      const ssize_t n = send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n != static_cast<ssize_t>(frame.size()) && ShouldLog()) {
        spdlog::warn("could not send the hang verdict to pid {}", c->pid);
      }
      break;
    }
  }
}

void IngestServer::Run() {
  LogClientLimit();  // after the daemon's start line, so that it stays the first
  std::vector<epoll_event> events(256);
  int64_t next_tick = aggregator_->clock()->MonoNs() + config_.tick_ns;
  while (!stop_.load(std::memory_order_relaxed)) {
    const int64_t now = aggregator_->clock()->MonoNs();
    // Rounded up: rounded down, the last millisecond before every tick was a spin of
    // epoll_wait(0) calls (about 3.6 ms of CPU a second on an idle daemon at the 200 ms tick).
    const int timeout_ms =
        static_cast<int>(std::max<int64_t>(0, (next_tick - now + 999999) / 1000000));
    const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout_ms);
    if (n > 0) loop_now_ns_ = aggregator_->clock()->MonoNs();
    for (int i = 0; i < n; ++i) {
      const int fd = events[static_cast<size_t>(i)].data.fd;
      if (fd == listen_fd_) {
        Accept();
      } else if (fd == wake_fd_) {
        uint64_t v = 0;
        (void)!read(wake_fd_, &v, sizeof(v));
      } else {
        auto it = clients_.find(fd);
        if (it == clients_.end()) continue;
        ReadClient(it->second.get());
      }
    }
    if (aggregator_->clock()->MonoNs() >= next_tick) {
      ExpireHandshakes();
      aggregator_->Tick();
      SendOutbound();
      next_tick = aggregator_->clock()->MonoNs() + config_.tick_ns;
    }
  }
}

}  // namespace sentinel::collector
