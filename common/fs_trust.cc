// The trusted-owner rule for sentinel's directories, files and peers: see fs_trust.h.
#include "common/fs_trust.h"

#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/errno_text.h"
#include "common/sentinel_env.h"
#include "common/wire_text.h"

namespace sentinel::rules {
namespace {

constexpr const char* kDefaultDaemonUser = "sentinel";

void Note(TrustFinding* f, TrustVerdict v, const char* path, const struct stat* st, int err) {
  f->verdict = v;
  std::snprintf(f->path, sizeof(f->path), "%s", path);
  if (st != nullptr) {
    f->owner = st->st_uid;
    f->mode = st->st_mode;
  }
  f->err = err;
}

bool WritableByOthers(mode_t mode) { return (mode & (S_IWGRP | S_IWOTH)) != 0; }

// One directory above the socket directory: trusted owner; group/other write only with the
// sticky bit (nobody but the owner can then rename or remove what is inside).
bool CheckAncestor(const char* path, const TrustedUids& trusted, TrustFinding* f) {
  struct stat st {};
  if (lstat(path, &st) != 0) {
    Note(f, errno == ENOENT ? TrustVerdict::kMissing : TrustVerdict::kUnreadable, path, nullptr,
         errno);
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    Note(f, TrustVerdict::kNotADirectory, path, &st, 0);
    return false;
  }
  if (!trusted.Contains(st.st_uid)) {
    Note(f, TrustVerdict::kForeignOwner, path, &st, 0);
    return false;
  }
  if (WritableByOthers(st.st_mode) && (st.st_mode & S_ISVTX) == 0) {
    Note(f, TrustVerdict::kWritableByOthers, path, &st, 0);
    return false;
  }
  return true;
}

// Appends component `name` (length `len`) to the physical directory `dir` (capacity PATH_MAX).
bool AppendComponent(char* dir, const char* name, size_t len) {
  const size_t have = std::strlen(dir);
  const bool root = have == 1 && dir[0] == '/';
  if (have + (root ? 0 : 1) + len + 1 > PATH_MAX) return false;
  char* at = dir + have;
  if (!root) *at++ = '/';
  std::memcpy(at, name, len);
  at[len] = '\0';
  return true;
}

// The physical directory `dir` and every directory above it, each by the ancestor rule.
bool CheckPhysicalChain(const char* dir, const TrustedUids& trusted, TrustFinding* f) {
  char chain[PATH_MAX];
  std::snprintf(chain, sizeof(chain), "%s", dir);
  for (;;) {
    if (!CheckAncestor(chain, trusted, f)) return false;
    char* slash = std::strrchr(chain, '/');
    if (slash == nullptr || (slash == chain && chain[1] == '\0')) return true;
    if (slash == chain) {
      chain[1] = '\0';  // "/<name>" -> "/"
    } else {
      *slash = '\0';
    }
  }
}

// Walks `path` (all of it: callers pass the part above the socket directory) one component at a
// time, as the kernel resolves it, checking every directory it goes through by the ancestor rule
// and every symbolic link on the way: a link must be owned by a trusted uid (its directory was
// checked just before; a sticky one keeps others from replacing it), and its target is walked the
// same way. Checking the resolved path instead would accept a link that another user owns, and
// may point elsewhere at any time.
bool CheckPathAsGiven(const char* path, const TrustedUids& trusted, TrustFinding* f) {
  char done[PATH_MAX];  // the physical directory reached so far
  char rest[PATH_MAX];  // what is left to walk
  if (std::snprintf(rest, sizeof(rest), "%s", path) >= static_cast<int>(sizeof(rest))) {
    Note(f, TrustVerdict::kTooLong, "", nullptr, ENAMETOOLONG);
    return false;
  }
  if (path[0] == '/') {
    std::snprintf(done, sizeof(done), "/");
    if (!CheckAncestor("/", trusted, f)) return false;
  } else {
    if (getcwd(done, sizeof(done)) == nullptr) {
      Note(f, TrustVerdict::kUnreadable, ".", nullptr, errno);
      return false;
    }
    if (!CheckPhysicalChain(done, trusted, f)) return false;
  }
  int links = 0;
  size_t pos = 0;
  for (;;) {
    while (rest[pos] == '/') ++pos;
    if (rest[pos] == '\0') return true;
    const char* name = rest + pos;
    size_t len = 0;
    while (name[len] != '\0' && name[len] != '/') ++len;
    pos += len;
    if (len == 1 && name[0] == '.') continue;
    if (len == 2 && name[0] == '.' && name[1] == '.') {
      char* slash = std::strrchr(done, '/');  // `done` is physical: its parent was checked
      if (slash == done) {
        done[1] = '\0';
      } else if (slash != nullptr) {
        *slash = '\0';
      }
      continue;
    }
    char next[PATH_MAX];
    std::snprintf(next, sizeof(next), "%s", done);
    if (!AppendComponent(next, name, len)) {
      Note(f, TrustVerdict::kTooLong, "", nullptr, ENAMETOOLONG);
      return false;
    }
    struct stat st {};
    if (lstat(next, &st) != 0) {
      Note(f, errno == ENOENT ? TrustVerdict::kMissing : TrustVerdict::kUnreadable, next, nullptr,
           errno);
      return false;
    }
    if (!S_ISLNK(st.st_mode)) {
      if (!CheckAncestor(next, trusted, f)) return false;
      std::snprintf(done, sizeof(done), "%s", next);
      continue;
    }
    if (!trusted.Contains(st.st_uid)) {
      Note(f, TrustVerdict::kForeignOwner, next, &st, 0);
      return false;
    }
    char target[PATH_MAX];
    const ssize_t n = readlink(next, target, sizeof(target) - 1);
    if (++links > 40 || n <= 0) {  // 40: the kernel's own bound on links in one lookup
      Note(f, TrustVerdict::kUnreadable, next, &st, n <= 0 ? errno : ELOOP);
      return false;
    }
    if (static_cast<size_t>(n) >= sizeof(target) - 1) {  // maybe cut short: never walk a guess
      Note(f, TrustVerdict::kTooLong, next, &st, ENAMETOOLONG);
      return false;
    }
    target[n] = '\0';
    // What is left becomes the target followed by the rest of the path.
    char joined[PATH_MAX];
    if (std::snprintf(joined, sizeof(joined), "%s%s", target, rest + pos) >=
        static_cast<int>(sizeof(joined))) {
      Note(f, TrustVerdict::kTooLong, "", nullptr, ENAMETOOLONG);
      return false;
    }
    std::memcpy(rest, joined, sizeof(rest));
    pos = 0;
    if (target[0] == '/') std::snprintf(done, sizeof(done), "/");
  }
}

}  // namespace

TrustedUids TrustedUidsFor(const char* daemon_user) noexcept {
  TrustedUids t;
  t.self = getuid();
  const char* name =
      daemon_user != nullptr && daemon_user[0] != '\0' ? daemon_user : kDefaultDaemonUser;
  char* end = nullptr;
  errno = 0;
  const unsigned long long as_number = std::strtoull(name, &end, 10);
  if (errno == 0 && end != name && *end == '\0' && as_number < kNoUid) {
    t.daemon = static_cast<uid_t>(as_number);
    return t;
  }
  struct passwd pw {};
  struct passwd* result = nullptr;
  char buf[4096];
  if (getpwnam_r(name, &pw, buf, sizeof(buf), &result) == 0 && result != nullptr) {
    t.daemon = pw.pw_uid;
  }
  return t;
}

bool DaemonUserProblem(const char* daemon_user, const TrustedUids& trusted, char* out,
                       size_t cap) noexcept {
  if (out == nullptr || cap == 0) return false;
  out[0] = '\0';
  // Unset or empty means the default, whose absence is normal (no system daemon installed).
  if (daemon_user == nullptr || daemon_user[0] == '\0' || trusted.daemon != kNoUid) return false;
  char shown[160];
  EscapeWireText(daemon_user, std::strlen(daemon_user), shown, sizeof(shown));
  std::snprintf(out, cap,
                "SENTINEL_DAEMON_USER='%s' is not a user on this host; trusting only your own uid "
                "(%u) and root for sentineld's socket, its directory and files\n",
                shown, static_cast<unsigned>(trusted.self));
  return true;
}

TrustedUids TrustedUidsFromEnv() noexcept {
  const char* daemon_user = ProcessSentinelEnv().Text(Var::kDaemonUser);
  const TrustedUids trusted = TrustedUidsFor(daemon_user);
  char line[320];
  if (DaemonUserProblem(daemon_user, trusted, line, sizeof(line))) {
    TellEnvProblemsOnce(line, std::strlen(line));  // once per process, whatever the callers
  }
  return trusted;
}

TrustFinding CheckTrustedDir(const char* dir, const TrustedUids& trusted) noexcept {
  TrustFinding f;
  if (dir == nullptr || dir[0] == '\0') {
    Note(&f, TrustVerdict::kMissing, "", nullptr, ENOENT);
    return f;
  }
  // The directory itself: never a symlink (whoever owns the link's directory could swap it).
  struct stat st {};
  if (lstat(dir, &st) != 0) {
    Note(&f, errno == ENOENT ? TrustVerdict::kMissing : TrustVerdict::kUnreadable, dir, nullptr,
         errno);
    return f;
  }
  if (S_ISLNK(st.st_mode)) {
    Note(&f, TrustVerdict::kSymlink, dir, &st, 0);
    return f;
  }
  if (!S_ISDIR(st.st_mode)) {
    Note(&f, TrustVerdict::kNotADirectory, dir, &st, 0);
    return f;
  }
  if (!trusted.Contains(st.st_uid)) {
    Note(&f, TrustVerdict::kForeignOwner, dir, &st, 0);
    return f;
  }
  if (WritableByOthers(st.st_mode)) {
    Note(&f, TrustVerdict::kWritableByOthers, dir, &st, 0);
    return f;
  }
  // The directories above, as the path gives them: every directory it goes through and every
  // link on the way (a root-owned link such as /var/run -> /run is fine; one another user owns is
  // not, whatever it points to now).
  char above[PATH_MAX];
  const size_t len = std::strlen(dir);
  if (len >= sizeof(above)) {
    Note(&f, TrustVerdict::kTooLong, "", nullptr, ENAMETOOLONG);
    return f;
  }
  std::memcpy(above, dir, len + 1);
  size_t end = len;
  while (end > 1 && above[end - 1] == '/') --end;  // "a/b/" names "a/b"
  while (end > 0 && above[end - 1] != '/') --end;  // drop the last component
  above[end] = '\0';
  if (end == 0) {
    std::snprintf(above, sizeof(above), ".");  // a bare name: its directory is the current one
  }
  (void)CheckPathAsGiven(above, trusted, &f);
  return f;
}

TrustFinding CheckTrustedParent(const char* path, const TrustedUids& trusted) noexcept {
  TrustFinding f;
  if (path == nullptr) {
    Note(&f, TrustVerdict::kMissing, "", nullptr, ENOENT);
    return f;
  }
  const char* slash = std::strrchr(path, '/');
  if (slash == nullptr) return CheckTrustedDir(".", trusted);
  if (slash == path) return CheckTrustedDir("/", trusted);
  char dir[PATH_MAX];
  const size_t len = static_cast<size_t>(slash - path);
  if (len >= sizeof(dir)) {
    Note(&f, TrustVerdict::kTooLong, "", nullptr, ENAMETOOLONG);
    return f;
  }
  std::memcpy(dir, path, len);
  dir[len] = '\0';
  return CheckTrustedDir(dir, trusted);
}

namespace {

// Opens `path` when the file itself is trusted: the descriptor, or -1 with *f saying why.
int OpenTrusted(const char* path, const TrustedUids& trusted, TrustFinding* f) noexcept {
  *f = TrustFinding{};
  if (path == nullptr || path[0] == '\0') {
    Note(f, TrustVerdict::kMissing, "", nullptr, ENOENT);
    return -1;
  }
  const int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    TrustVerdict v = TrustVerdict::kUnreadable;
    if (err == ENOENT) v = TrustVerdict::kMissing;
    if (err == ELOOP) v = TrustVerdict::kSymlink;
    Note(f, v, path, nullptr, err);
    return -1;
  }
  struct stat st {};
  TrustVerdict v = TrustVerdict::kTrusted;
  if (fstat(fd, &st) != 0) {
    Note(f, TrustVerdict::kUnreadable, path, nullptr, errno);
    close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    v = TrustVerdict::kNotARegularFile;
  } else if (!trusted.Contains(st.st_uid)) {
    v = TrustVerdict::kForeignOwner;
  } else if (WritableByOthers(st.st_mode)) {
    v = TrustVerdict::kWritableByOthers;
  }
  if (v != TrustVerdict::kTrusted) {
    Note(f, v, path, &st, 0);
    close(fd);
    return -1;
  }
  // Back to blocking reads for a regular file (O_NONBLOCK only kept a FIFO from stalling open).
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

}  // namespace

Status OpenTrustedFileForRead(const char* path, const TrustedUids& trusted, int* fd) noexcept {
  TrustFinding f;
  *fd = OpenTrusted(path, trusted, &f);
  if (*fd >= 0) return Status::Ok();
  switch (f.verdict) {
    case TrustVerdict::kMissing:
      return Status(StatusCode::kNotFound, ErrnoText(ENOENT)).WithErrno(ENOENT);
    case TrustVerdict::kUnreadable:
      return Status(f.err == ENOTDIR ? StatusCode::kNotFound : StatusCode::kUnavailable,
                    ErrnoText(f.err))
          .WithErrno(f.err);
    case TrustVerdict::kNotARegularFile:
      return Status(StatusCode::kUnavailable, "not a regular file");
    default:
      break;
  }
  char text[Status::kDetailCap];
  DescribeTrustFinding(f, trusted, text, sizeof(text));
  return Status::Copy(StatusCode::kPermissionDenied, text);
}

void DescribeTrustFinding(const TrustFinding& f, const TrustedUids& trusted, char* out,
                          size_t cap) noexcept {
  if (out == nullptr || cap == 0) return;
  const unsigned self = static_cast<unsigned>(trusted.self);
  const unsigned mode = static_cast<unsigned>(f.mode & 07777);
  switch (f.verdict) {
    case TrustVerdict::kTrusted:
      std::snprintf(out, cap, "%s: trusted", f.path);
      break;
    case TrustVerdict::kMissing:
      std::snprintf(out, cap, "%s: does not exist", f.path);
      break;
    case TrustVerdict::kNotADirectory:
      std::snprintf(out, cap, "%s: not a directory", f.path);
      break;
    case TrustVerdict::kNotARegularFile:
      std::snprintf(out, cap, "%s: not a regular file", f.path);
      break;
    case TrustVerdict::kSymlink:
      std::snprintf(out, cap, "%s: a symbolic link (not followed)", f.path);
      break;
    case TrustVerdict::kForeignOwner:
      std::snprintf(out, cap,
                    "%s: owned by uid %u, not by you (uid %u), root or the sentinel daemon's user",
                    f.path, static_cast<unsigned>(f.owner), self);
      break;
    case TrustVerdict::kWritableByOthers:
      std::snprintf(out, cap, "%s: mode %04o lets other users write to it", f.path, mode);
      break;
    case TrustVerdict::kUnreadable:
      std::snprintf(out, cap, "%s: %s", f.path, ErrnoText(f.err));
      break;
    case TrustVerdict::kTooLong:
      std::snprintf(out, cap, "path too long");
      break;
  }
}

bool PeerCredentials(int fd, uid_t* uid, pid_t* pid) noexcept {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred)) {
    return false;
  }
  if (uid != nullptr) *uid = cred.uid;
  if (pid != nullptr) *pid = cred.pid;
  return true;
}

}  // namespace sentinel::rules
