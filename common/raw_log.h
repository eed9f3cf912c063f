// The one stderr writer of the plugin and common/: works before (or without) the plugin's logger
// and in any state of the process (no allocation, no lock, never throws), and gives every line the
// one prefix, "[sentinel <pid>] ", so a line in a job's merged stderr names the process that wrote
// it. scripts/check_single_rules.py allows a direct write to fd 2 only here.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdio>

namespace sentinel::rules {

// The prefix of every line: "[sentinel <pid>] ". Returns its length (snprintf's).
inline int RawLogPrefix(char* out, size_t cap) noexcept {
  return std::snprintf(out, cap, "[sentinel %d] ", static_cast<int>(getpid()));
}

// Writes all of `data` to stderr as it is, retrying partial writes and EINTR; any other failure
// drops the rest (nobody is left to tell). For text that carries the prefix already (the plugin
// logger formats it, with the rank once known: plugin/base/log.cc). Keeps errno.
inline void RawWriteStderr(const char* data, size_t len) noexcept {
  const int saved = errno;
  while (len > 0) {
    const ssize_t n = write(2, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data += n;
    len -= static_cast<size_t>(n);
  }
  errno = saved;
}

// Writes "[sentinel <pid>] " + text and a newline (none added when `text` ends in one), in one
// system call when stderr takes it whole, so the lines of processes sharing the job's stderr do not
// mix. Any length; further lines of `text` are written as given. Keeps errno.
inline void RawLogText(const char* text, size_t len) noexcept {
  const int saved = errno;
  char prefix[32];
  const int p = RawLogPrefix(prefix, sizeof(prefix));
  const size_t plen = p > 0 && static_cast<size_t>(p) < sizeof(prefix) ? static_cast<size_t>(p) : 0;
  static const char kNewline[] = "\n";
  const bool ends_in_newline = len > 0 && text[len - 1] == '\n';
  iovec iov[3] = {{prefix, plen},
                  {const_cast<char*>(text), len},
                  {const_cast<char*>(kNewline), ends_in_newline ? 0u : 1u}};
  ssize_t n;
  do {
    n = writev(2, iov, 3);
  } while (n < 0 && errno == EINTR);
  if (n >= 0) {
    // A partial write (a pipe near full): the rest, in order.
    size_t done = static_cast<size_t>(n);
    for (const iovec& v : iov) {
      const size_t skip = done < v.iov_len ? done : v.iov_len;
      done -= skip;
      RawWriteStderr(static_cast<const char*>(v.iov_base) + skip, v.iov_len - skip);
    }
  }
  errno = saved;
}

// printf-style, one line (cut at 512 bytes). The plugin's logger falls back to it when it cannot
// be built; everything that runs before the logger exists (or instead of it) calls it.
__attribute__((format(printf, 1, 2))) inline void RawLog(const char* fmt, ...) noexcept {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0) return;
  RawLogText(buf, static_cast<size_t>(n) < sizeof(buf) ? static_cast<size_t>(n) : sizeof(buf) - 1);
}

}  // namespace sentinel::rules
