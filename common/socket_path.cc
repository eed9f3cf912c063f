// The SENTINEL_SOCKET / per-user default socket path rule (see socket_path.h).
#include "common/socket_path.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/sentinel_env.h"

namespace sentinel::rules {
namespace {

bool Set(const char* s) { return s != nullptr && s[0] != '\0'; }

// snprintf into `out`; an empty result on truncation, so a caller never connects to a cut path.
SocketPathKind Emit(char* out, size_t cap, int written) {
  if (written < 0 || static_cast<size_t>(written) >= cap ||
      static_cast<size_t>(written) >= kSocketPathMax) {
    if (cap > 0) out[0] = '\0';
    return SocketPathKind::kTooLong;
  }
  return SocketPathKind::kPath;
}

}  // namespace

SocketPathKind DefaultSocketDir(const char* xdg_runtime_dir, uid_t uid, char* out,
                                size_t cap) noexcept {
  if (out == nullptr || cap == 0) return SocketPathKind::kTooLong;
  if (Set(xdg_runtime_dir)) {
    return Emit(out, cap, std::snprintf(out, cap, "%s/sentinel", xdg_runtime_dir));
  }
  return Emit(out, cap, std::snprintf(out, cap, "/tmp/sentinel-%u", static_cast<unsigned>(uid)));
}

SocketPathKind ResolveSocketPath(const char* sentinel_socket, const char* xdg_runtime_dir,
                                 uid_t uid, char* out, size_t cap) noexcept {
  if (out == nullptr || cap == 0) return SocketPathKind::kTooLong;
  if (Set(sentinel_socket)) {
    if (std::strcmp(sentinel_socket, "none") == 0) {
      out[0] = '\0';
      return SocketPathKind::kDisabled;
    }
    return Emit(out, cap, std::snprintf(out, cap, "%s", sentinel_socket));
  }
  char dir[kSocketPathMax];
  if (DefaultSocketDir(xdg_runtime_dir, uid, dir, sizeof(dir)) != SocketPathKind::kPath) {
    out[0] = '\0';
    return SocketPathKind::kTooLong;
  }
  return Emit(out, cap, std::snprintf(out, cap, "%s/sentineld.sock", dir));
}

SocketPathKind ResolveSocketPathFromEnv(char* out, size_t cap) noexcept {
  // SENTINEL_SOCKET from the process's one reading; XDG_RUNTIME_DIR is not ours. getenv is only
  // racy against a concurrent setenv; this runs at start-up, off the hot path.
  return ResolveSocketPath(ProcessSentinelEnv().Text(Var::kSocket),
                           std::getenv("XDG_RUNTIME_DIR"),  // NOLINT(concurrency-mt-unsafe)
                           getuid(), out, cap);
}

bool NodeExpectPath(const char* socket_path, char* out, size_t cap) noexcept {
  if (out == nullptr || cap == 0) return false;
  out[0] = '\0';
  if (socket_path == nullptr) return false;
  const char* slash = std::strrchr(socket_path, '/');
  int dir_len = slash == nullptr ? 1 : static_cast<int>(slash - socket_path);
  const char* dir = slash == nullptr ? "." : socket_path;
  int n = std::snprintf(out, cap, "%.*s/expect", dir_len, dir);
  if (n < 0 || static_cast<size_t>(n) >= cap) {
    out[0] = '\0';
    return false;
  }
  return true;
}

}  // namespace sentinel::rules
