// The directories and files sentineld creates, made safe against other local users: the socket
// directory is created (last component only) or brought to its documented mode, and refused when
// it cannot be trusted (common/fs_trust.h, after ssh-agent's and tmux's socket directories and
// systemd's RuntimeDirectory=); files are created under names nobody can predict, with
// O_CREAT|O_EXCL|O_NOFOLLOW, in a directory checked first. Every refusal is one line for a person.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "common/fs_trust.h"

namespace sentinel::collector {

inline constexpr gid_t kNoGroup = static_cast<gid_t>(-1);

// The directory part of `path`: "." for a bare name, "/" for a name in the root.
std::string DirName(const std::string& path);

// One line: `what` + the finding, e.g. "socket directory /tmp/sentinel-42: owned by uid 43, ...".
std::string TrustRefusal(const char* what, const rules::TrustFinding& finding,
                         const rules::TrustedUids& trusted);

// Makes `dir` a directory sentineld may put its socket in:
//   - missing: its parent must exist (a whole missing path is refused, naming the missing parent);
//     the last component is created with `mode`, and group `group` when not kNoGroup;
//   - present and owned by this process's effective uid: `mode` (and `group`) applied through a
//     descriptor opened with O_DIRECTORY|O_NOFOLLOW, unless the directory is shared by design (the
//     root, a top-level directory such as /run, or a sticky directory such as /tmp), which is
//     refused when it is not already trusted rather than changed;
//   - present and owned by another trusted uid (root, the daemon's user): used only as it is;
//   - a symlink, another owner, or still writable by others after that: refused.
// Then checked with rules::CheckTrustedDir (the directory and every one above it).
absl::Status PrepareSocketDir(const std::string& dir, mode_t mode, gid_t group,
                              const rules::TrustedUids& trusted);

// Creates a new file next to `target` (same directory) under an unpredictable name, with
// O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600. Returns the descriptor and its path in *tmp_path, or
// an InternalError with the reason. The directory is not checked here.
absl::StatusOr<int> CreateUniqueTemp(const std::string& target, std::string* tmp_path);

// Writes `content` to `path` with `mode` (whatever the umask): `path`'s directory is checked with
// rules::CheckTrustedParent, the content goes to a fresh CreateUniqueTemp file, then rename(2)
// (readers never see a partial file; a symlink at `path` is replaced, never followed).
absl::Status WriteFileSafely(const std::string& path, const std::string& content, mode_t mode,
                             const rules::TrustedUids& trusted);

// Opens `path` for appending: an existing regular file owned by a trusted uid (O_NOFOLLOW: never
// through a symlink), or a new one created with O_CREAT|O_EXCL|O_NOFOLLOW and `mode`. The
// directory is not checked here (callers check it once, at start-up). Returns the stream, or an
// InternalError whose message is the reason (it starts with the path).
absl::StatusOr<std::FILE*> OpenForAppend(const std::string& path, mode_t mode,
                                         const rules::TrustedUids& trusted);

}  // namespace sentinel::collector
