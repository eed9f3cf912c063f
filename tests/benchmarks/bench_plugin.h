// What the benchmarks that drive the BUILT plugin through its real entry points share: a dump
// folder on tmpfs (removed at exit), loading the .so, and reading the heartbeat's counters back.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include "plugin/abi/nccl_profiler_abi.h"

namespace sentinel::bench {

// Points SENTINEL_DUMP at DIR/dump.jsonl in a new folder (tmpfs when there is one: truncating a
// file on a disk file system can wait for a discard) and returns that path. The folder is removed
// at exit; call this before loading the plugin, so the removal runs after the plugin's own exit
// handler (atexit is LIFO).
inline std::string MakeDumpFile(const char* name) {
  static char cleanup_dir[96];
  std::string shm = std::string("/dev/shm/") + name + "-XXXXXX";
  std::string tmp = std::string("/tmp/") + name + "-XXXXXX";
  const char* made = mkdtemp(&shm[0]);
  if (made == nullptr) made = mkdtemp(&tmp[0]);
  if (made == nullptr) abort();
  std::snprintf(cleanup_dir, sizeof(cleanup_dir), "%s", made);
  atexit([] {
    std::string file = std::string(cleanup_dir) + "/dump.jsonl";
    unlink(file.c_str());
    rmdir(cleanup_dir);
  });
  std::string dump = std::string(made) + "/dump.jsonl";
  setenv("SENTINEL_DUMP", dump.c_str(), 1);
  return dump;
}

// The v5 table of SENTINEL_DEV_BENCH_PLUGIN (another build, for before/after comparisons) or of the
// plugin this tree built. Aborts with the loader's message when it cannot be loaded.
inline const SentinelProfilerV5* LoadPluginV5() {
  const char* so = getenv("SENTINEL_DEV_BENCH_PLUGIN");
  if (so == nullptr || *so == '\0') so = SENTINEL_PLUGIN_SO;
  void* h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    std::fprintf(stderr, "dlopen %s: %s\n", so, dlerror());
    abort();
  }
  auto* t = static_cast<const SentinelProfilerV5*>(dlsym(h, "ncclProfiler_v5"));
  if (t == nullptr) {
    std::fprintf(stderr, "%s has no ncclProfiler_v5\n", so);
    abort();
  }
  return t;
}

// CLOCK_MONOTONIC in ns.
inline int64_t MonoNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// The last heartbeat's value of `key` in the dump (after a finalize flushed it); 0 when absent.
inline uint64_t ReadHeartbeatCounter(const std::string& dump, const char* key) {
  FILE* f = std::fopen(dump.c_str(), "r");
  if (f == nullptr) return 0;
  std::string text;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) text.append(buf, n);
  std::fclose(f);
  std::string k = std::string("\"") + key + "\":";
  size_t at = text.rfind(k);
  return at == std::string::npos ? 0 : std::strtoull(text.c_str() + at + k.size(), nullptr, 10);
}

}  // namespace sentinel::bench
