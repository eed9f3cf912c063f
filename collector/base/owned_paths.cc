// Safe creation of sentineld's socket directory and files: see owned_paths.h.
#include "collector/base/owned_paths.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

#include "common/errno_text.h"

namespace sentinel::collector {
namespace {

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A directory other things live in by design: the root, a top-level directory (/run, /tmp, /var,
// /home...) or a sticky one (/tmp, /var/tmp, /dev/shm). sentineld never changes its mode or group,
// even when it runs as root and owns it.
bool SharedByDesign(const std::string& dir, const struct stat& st) {
  if ((st.st_mode & S_ISVTX) != 0) return true;
  char resolved[PATH_MAX];
  if (realpath(dir.c_str(), resolved) == nullptr) return true;  // unknown: do not touch
  const char* last = std::strrchr(resolved, '/');
  return last == nullptr || last == resolved;  // "/" itself, or "/<name>"
}

// Twelve characters from getrandom(2): 62^12 names, so a name planted in advance is hit with
// negligible odds, and O_EXCL turns a hit into a retry, never into following someone's file.
bool RandomSuffix(char* out, size_t len) {
  static constexpr char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  unsigned char bytes[32];
  if (len > sizeof(bytes)) return false;
  size_t got = 0;
  while (got < len) {
    const ssize_t n = getrandom(bytes + got, len - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  for (size_t i = 0; i < len; ++i) out[i] = kAlphabet[bytes[i] % (sizeof(kAlphabet) - 1)];
  return true;
}

}  // namespace

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string TrustRefusal(const char* what, const rules::TrustFinding& finding,
                         const rules::TrustedUids& trusted) {
  char line[512];
  rules::DescribeTrustFinding(finding, trusted, line, sizeof(line));
  return absl::StrCat(what, ": ", line);
}

absl::Status PrepareSocketDir(const std::string& dir, mode_t mode, gid_t group,
                              const rules::TrustedUids& trusted) {
  if (dir.empty()) return absl::InvalidArgumentError("socket directory: empty path");
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return absl::FailedPreconditionError(
          absl::StrCat("socket directory ", dir, ": ", rules::ErrnoText(errno)));
    }
    // Only the last component: a whole missing path is a typo or someone else's tree.
    const std::string parent = DirName(dir);
    struct stat pst {};
    if (stat(parent.c_str(), &pst) != 0 || !S_ISDIR(pst.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "socket directory ", dir, ": its parent ", parent,
          " does not exist or is not a directory (sentineld creates only the last component)"));
    }
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create socket directory ", dir, ": ", rules::ErrnoText(errno)));
    }
    // EEXIST: created by someone else meanwhile; judged below like any existing directory.
  }
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    rules::TrustFinding f = rules::CheckTrustedDir(dir.c_str(), trusted);
    if (!f.ok()) {
      return absl::FailedPreconditionError(TrustRefusal("socket directory", f, trusted) +
                                           "; not listening there");
    }
    return absl::FailedPreconditionError(
        absl::StrCat("socket directory ", dir, ": ", rules::ErrnoText(err)));
  }
  absl::Status status = absl::OkStatus();
  if (fstat(fd, &st) != 0) {
    status = absl::FailedPreconditionError(
        absl::StrCat("socket directory ", dir, ": ", rules::ErrnoText(errno)));
  } else if (st.st_uid == geteuid() && !SharedByDesign(dir, st)) {
    // Ours: the documented mode and group, whatever it had (systemd does the same for
    // RuntimeDirectory=). Through the descriptor, so a swapped path cannot redirect it.
    const mode_t was = st.st_mode & 07777;
    if (group != kNoGroup && st.st_gid != group && fchown(fd, static_cast<uid_t>(-1), group) != 0) {
      status = absl::FailedPreconditionError(absl::StrCat("socket directory ", dir,
                                                          ": cannot give it to group ", group, ": ",
                                                          rules::ErrnoText(errno)));
    } else if (was != mode && fchmod(fd, mode) != 0) {
      status = absl::FailedPreconditionError(absl::StrFormat(
          "socket directory %s: cannot set mode %04o: %s", dir, mode, rules::ErrnoText(errno)));
    } else if (was != mode) {
      spdlog::info("socket directory {}: mode set to {:04o} (was {:04o})", dir, mode, was);
    }
  }
  close(fd);
  if (!status.ok()) return status;
  rules::TrustFinding f = rules::CheckTrustedDir(dir.c_str(), trusted);
  if (!f.ok()) {
    return absl::FailedPreconditionError(TrustRefusal("socket directory", f, trusted) +
                                         "; not listening there");
  }
  return absl::OkStatus();
}

absl::StatusOr<int> CreateUniqueTemp(const std::string& target, std::string* tmp_path) {
  const std::string dir = DirName(target);
  const std::string prefix = absl::StrCat(dir == "/" ? "" : dir, "/.", BaseName(target), ".tmp-");
  for (int attempt = 0; attempt < 16; ++attempt) {
    char suffix[12];
    if (!RandomSuffix(suffix, sizeof(suffix))) {
      return absl::InternalError(
          absl::StrCat("no random bytes for a temporary name: ", rules::ErrnoText(errno)));
    }
    std::string path = prefix + std::string(suffix, sizeof(suffix));
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      *tmp_path = std::move(path);
      return fd;
    }
    if (errno != EEXIST) {
      return absl::InternalError(absl::StrCat("create ", path, ": ", rules::ErrnoText(errno)));
    }
  }
  return absl::InternalError(
      absl::StrCat("create a temporary file in ", dir, ": every name taken"));
}

absl::Status WriteFileSafely(const std::string& path, const std::string& content, mode_t mode,
                             const rules::TrustedUids& trusted) {
  if (path.empty()) return absl::InvalidArgumentError("empty file path");
  rules::TrustFinding f = rules::CheckTrustedParent(path.c_str(), trusted);
  if (!f.ok()) {
    return absl::FailedPreconditionError(
        TrustRefusal(absl::StrCat("not writing ", path).c_str(), f, trusted));
  }
  std::string tmp;
  const absl::StatusOr<int> created = CreateUniqueTemp(path, &tmp);
  if (!created.ok()) return created.status();
  const int fd = *created;
  size_t off = 0;
  while (off < content.size()) {
    const ssize_t n = write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      close(fd);
      unlink(tmp.c_str());
      return absl::InternalError(absl::StrCat("write ", tmp, ": ", rules::ErrnoText(err)));
    }
    off += static_cast<size_t>(n);
  }
  if (fchmod(fd, mode) != 0) {
    const int err = errno;
    close(fd);
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("chmod ", tmp, ": ", rules::ErrnoText(err)));
  }
  if (close(fd) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("close ", tmp, ": ", rules::ErrnoText(err)));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("rename to ", path, ": ", rules::ErrnoText(err)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::FILE*> OpenForAppend(const std::string& path, mode_t mode,
                                         const rules::TrustedUids& trusted) {
  int fd = -1;
  for (int attempt = 0; attempt < 2 && fd < 0; ++attempt) {
    // O_NONBLOCK: a FIFO planted at the path must not stall the open (it is refused below).
    fd = open(path.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0 || errno != ENOENT) break;
    fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0 && errno != EEXIST) break;  // EEXIST: created meanwhile, open it as existing
  }
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP) {
      return absl::InternalError(absl::StrCat(path, ": a symbolic link (not followed)"));
    }
    if (err == ENXIO) {  // a FIFO without a reader (O_NONBLOCK) or a socket
      return absl::InternalError(absl::StrCat(path, ": not a regular file"));
    }
    return absl::InternalError(absl::StrCat(path, ": ", rules::ErrnoText(err)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InternalError(absl::StrCat(path, ": not a regular file"));
  }
  if (!trusted.Contains(st.st_uid)) {
    close(fd);
    return absl::InternalError(absl::StrCat(path, ": owned by uid ", st.st_uid,
                                            ", not by you (uid ", trusted.self,
                                            "), root or the sentinel daemon's user"));
  }
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  std::FILE* file = fdopen(fd, "a");
  if (file == nullptr) {
    const int err = errno;
    close(fd);
    return absl::InternalError(absl::StrCat(path, ": ", rules::ErrnoText(err)));
  }
  return file;
}

}  // namespace sentinel::collector
