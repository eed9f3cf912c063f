// Who may own the paths and sockets sentinel trusts. One rule, shared by the plugin (which connects
// to the socket and reads the node expectation) and sentineld (which creates the socket directory
// and writes files into it), so both ends refuse the same things. Identity comes from the kernel
// (file owners, SO_PEERCRED), never from what a peer says.
//
// The rule, after OpenSSH's agent socket and tmux's socket directory checks:
//   - a socket directory is a real directory (not a symlink), owned by a trusted uid, and not
//     writable by group or others;
//   - every directory above it is owned by a trusted uid and not writable by group or others,
//     unless it has the sticky bit (like /tmp): nobody else can rename the path away;
//   - a file we act on is a regular file (opened without following a symlink), owned by a trusted
//     uid and not writable by group or others;
//   - a trusted uid is this process's real uid, root, or the system daemon's user
//     (SENTINEL_DAEMON_USER, default `sentinel`: the .deb's service account).
// No allocation, never throws: callable from the plugin (off the hot path: it calls lstat/NSS).
#pragma once

#include <sys/types.h>

#include <cstddef>

#include "common/status.h"

namespace sentinel::rules {

inline constexpr uid_t kNoUid = static_cast<uid_t>(-1);

struct TrustedUids {
  uid_t self = kNoUid;    // this process's real uid
  uid_t daemon = kNoUid;  // the system daemon's uid; kNoUid when that user does not exist
  [[nodiscard]] bool Contains(uid_t uid) const noexcept {
    return uid == 0 || uid == self || (daemon != kNoUid && uid == daemon);
  }
};

// `daemon_user` is a user name or a decimal uid; null or empty = the default, `sentinel`. A name
// that does not resolve leaves `daemon` as kNoUid. Looks the name up through NSS (getpwnam_r):
// call it once, at start-up, never on a hot path.
TrustedUids TrustedUidsFor(const char* daemon_user) noexcept;
// The same for this process: its real uid and SENTINEL_DAEMON_USER. A value that names no user
// is told once (the registry's problem lines, common/sentinel_env.h): only this uid and root are
// trusted then, never the default `sentinel` user in its place.
TrustedUids TrustedUidsFromEnv() noexcept;
// The line telling that `daemon_user` (SENTINEL_DAEMON_USER, as set) named no user, given what
// TrustedUidsFor made of it: true, with the '\n'-terminated line in `out`, when there is one to
// tell (set, not empty, not resolved). Pure (tests).
bool DaemonUserProblem(const char* daemon_user, const TrustedUids& trusted, char* out,
                       size_t cap) noexcept;

enum class TrustVerdict : unsigned char {
  kTrusted,
  kMissing,           // ENOENT
  kNotADirectory,     // a socket directory (or one above it) that is something else
  kNotARegularFile,   // a file to read that is a FIFO, a device, a directory...
  kSymlink,           // the path itself is a symbolic link
  kForeignOwner,      // owned by a uid outside TrustedUids
  kWritableByOthers,  // group or other write permission (and, for a parent, no sticky bit)
  kUnreadable,        // stat/open failed for another reason (errno in `err`)
  kTooLong,           // the path does not fit our buffers
};

struct TrustFinding {
  TrustVerdict verdict = TrustVerdict::kTrusted;
  char path[256] = {};  // the component the verdict is about (the path itself or a parent)
  uid_t owner = kNoUid;
  mode_t mode = 0;
  int err = 0;
  [[nodiscard]] bool ok() const noexcept { return verdict == TrustVerdict::kTrusted; }
};

// The socket directory `dir` and every directory above it, as the rule says.
TrustFinding CheckTrustedDir(const char* dir, const TrustedUids& trusted) noexcept;

// The directory part of `path` ("." for a bare name, "/" for a name in the root), checked as
// above. For the socket path itself and for files next to it.
TrustFinding CheckTrustedParent(const char* path, const TrustedUids& trusted) noexcept;

// Opens `path` read-only (O_NOFOLLOW, O_NONBLOCK, O_CLOEXEC) when the file itself is trusted, and
// sets *fd to the descriptor. Its directory is not checked here: call CheckTrustedParent first
// where that matters. Otherwise *fd is -1 and the status says why: kNotFound, it does not exist (or
// a component is not a directory; the message is the errno text); kPermissionDenied, it is not
// trusted (the message says which path and why: owner, mode, a symlink; DescribeTrustFinding);
// kUnavailable, it cannot be read (not a regular file: a directory, a FIFO; or the errno text).
// The errno of a failed system call rides along (Status::error_number).
[[nodiscard]] Status OpenTrustedFileForRead(const char* path, const TrustedUids& trusted,
                                            int* fd) noexcept;

// One line for a person: "<path>: owned by uid 1234, not by you (uid 1000), root or the sentinel
// daemon's user". Always NUL-terminated.
void DescribeTrustFinding(const TrustFinding& finding, const TrustedUids& trusted, char* out,
                          size_t cap) noexcept;

// The kernel's word on the process at the other end of a connected UNIX socket (SO_PEERCRED).
// False when the kernel does not say.
bool PeerCredentials(int fd, uid_t* uid, pid_t* pid) noexcept;

}  // namespace sentinel::rules
