// What a test or benchmark reads of a process's own usage: one reader of /proc/<pid>/status and
// of getrusage, for the memory and CPU figures of the pool, finalize, slowloris and rogue-client
// checks.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace sentinel::testing {

// A /proc/<pid>/status field in KiB (VmRSS, VmHWM); pid 0 = this process; -1 when absent.
inline long ProcStatusKiB(pid_t pid, const char* field) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/status")
                            : "/proc/" + std::to_string(pid) + "/status");
  const std::string key = std::string(field) + ":";
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + key.size());
  }
  return -1;
}

// User + system CPU time this process used, in ns.
inline int64_t ProcessCpuNs() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return (static_cast<int64_t>(ru.ru_utime.tv_sec) + ru.ru_stime.tv_sec) * 1000000000 +
         (static_cast<int64_t>(ru.ru_utime.tv_usec) + ru.ru_stime.tv_usec) * 1000;
}

}  // namespace sentinel::testing
