#include "common/host_name.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace sentinel::rules {

void ShortHostName(char* out, size_t cap) noexcept {
  if (out == nullptr || cap == 0) return;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof(host), "unknown");
  }
  if (char* dot = std::strchr(host, '.')) *dot = '\0';
  std::snprintf(out, cap, "%s", host);
}

}  // namespace sentinel::rules
