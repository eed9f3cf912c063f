// NCCL's rule for finding a plugin named by NCCL_PROFILER_PLUGIN / NCCL_NET_PLUGIN
// (docs/nccl-facts.md "4.1 Finding the library", "7.1 Symbols and loading"), shared by the chained
// profiler (SENTINEL_CHAIN_PROFILER) and the net wrapper (SENTINEL_NET_WRAP): the value verbatim,
// then lib<prefix>-<value>.so unless the value has a '/' or already is lib*.so. Slow path only.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdio>
#include <cstring>

namespace sentinel::plugin {

// `prefix` is "nccl-profiler" or "nccl-net". `tried` receives the names tried, for the log line.
inline void* DlopenLikeNccl(const char* value, const char* prefix, char* tried,
                            size_t tried_size) noexcept {
  snprintf(tried, tried_size, "%s", value);
  void* dl = dlopen(value, RTLD_NOW | RTLD_LOCAL);
  if (dl != nullptr) return dl;
  size_t n = strlen(value);
  bool lib_so = n >= 6 && strncmp(value, "lib", 3) == 0 && strcmp(value + n - 3, ".so") == 0;
  if (strchr(value, '/') != nullptr || lib_so) return nullptr;
  char name[512];
  snprintf(name, sizeof(name), "lib%s-%s.so", prefix, value);
  snprintf(tried, tried_size, "%s, %s", value, name);
  return dlopen(name, RTLD_NOW | RTLD_LOCAL);
}

}  // namespace sentinel::plugin
