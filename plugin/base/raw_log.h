// RawLog(): a logger that works before (or without) spdlog and in any state of the process:
// formats into a stack buffer and calls write(2). Never allocates, never throws.
#pragma once

#include <unistd.h>

#include <cstdarg>
#include <cstdio>

namespace sentinel::plugin {

__attribute__((format(printf, 1, 2))) inline void RawLog(const char* fmt, ...) noexcept {
  char buf[512];
  int n = snprintf(buf, sizeof(buf), "[sentinel %d] ", static_cast<int>(getpid()));
  if (n < 0) return;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof(buf) - static_cast<size_t>(n) - 1, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t len = static_cast<size_t>(n) + static_cast<size_t>(m);
  if (len > sizeof(buf) - 2) len = sizeof(buf) - 2;
  buf[len++] = '\n';
  ssize_t ignored = write(2, buf, len);
  (void)ignored;
}

}  // namespace sentinel::plugin
