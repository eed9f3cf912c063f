// Where the plugin finds sentineld's UNIX socket. One rule, shared by the plugin (client) and
// sentineld (server default), so both sides agree without configuration.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace sentinel::rules {

// Longest path a sockaddr_un can hold, NUL included.
inline constexpr size_t kSocketPathMax = 108;

enum class SocketPathKind {
  kPath,      // `out` holds the path to connect to (or listen on)
  kDisabled,  // SENTINEL_SOCKET=none: streaming is off
  kTooLong,   // the path does not fit a sockaddr_un; `out` is empty
};

// The rule, as a pure function so that tests and sentineld can call it with their own inputs:
//   1. `sentinel_socket` (the SENTINEL_SOCKET value) when set and non-empty; "none" disables;
//   2. else `$XDG_RUNTIME_DIR/sentinel/sentineld.sock` when `xdg_runtime_dir` is set and non-empty;
//   3. else `/tmp/sentinel-<uid>/sentineld.sock`.
// Null pointers mean "unset". Writes a NUL-terminated path into `out` (capacity `cap`). Never
// allocates, never throws.
SocketPathKind ResolveSocketPath(const char* sentinel_socket, const char* xdg_runtime_dir,
                                 uid_t uid, char* out, size_t cap) noexcept;

// The same rule applied to this process's environment and real uid. Reads the environment, so
// call it off the hot path (once, when the sink or the daemon starts).
SocketPathKind ResolveSocketPathFromEnv(char* out, size_t cap) noexcept;

// The directory part of the per-user default (rules 2 and 3), e.g. for sentineld to create with
// mode 0700. Same inputs and outputs as above; never kDisabled.
SocketPathKind DefaultSocketDir(const char* xdg_runtime_dir, uid_t uid, char* out,
                                size_t cap) noexcept;

// Where sentineld publishes the node's default expectation: the file `expect` in the socket's
// directory ("./expect" for a bare file name, "/expect" for a socket in the root). False, with an
// empty `out`, when it does not fit.
bool NodeExpectPath(const char* socket_path, char* out, size_t cap) noexcept;

}  // namespace sentinel::rules
