// What the benchmarks that drive the BUILT plugin through its real entry points share: a dump
// folder on tmpfs (removed at exit), loading the .so, and reading the heartbeat's counters back.
#pragma once

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// A real sentineld the benchmark streams to (the production path: binary frames over a UNIX
// socket), started on a private socket in a new temp folder with HTTP on 127.0.0.1:0. Start()
// points SENTINEL_SOCKET at it and waits for its port file; call it before loading the plugin.
struct Sentineld {
  pid_t pid = -1;
  int port = 0;
  std::string dir;

  // False (with a line on stderr) when the daemon did not come up within ~10 s.
  bool Start(const char* binary) {
    char tmpl[] = "/tmp/sentinel-cbench-sd-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return false;
    dir = tmpl;
    const std::string socket = dir + "/run/s.sock";
    const std::string port_file = dir + "/port";
    pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlives an aborted benchmark
      execl(binary, binary, "--socket", socket.c_str(), "--listen", "127.0.0.1:0", "--port-file",
            port_file.c_str(), "--log-level", "warn", static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 200 && port == 0; ++i) {
      if (FILE* f = std::fopen(port_file.c_str(), "r")) {
        if (std::fscanf(f, "%d", &port) != 1) port = 0;
        std::fclose(f);
      }
      if (port == 0) usleep(50000);
    }
    if (port == 0) {
      std::fprintf(stderr, "%s did not write its port file\n", binary);
      return false;
    }
    setenv("SENTINEL_SOCKET", socket.c_str(), 1);
    return true;
  }
  // The daemon's CPU (all its threads) in ns; 0 when it cannot be read.
  int64_t CpuNs() const {
    clockid_t id;
    timespec ts;
    if (pid <= 0 || clock_getcpuclockid(pid, &id) != 0 || clock_gettime(id, &ts) != 0) return 0;
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
  }
  // GET path on the daemon's HTTP port; the whole response ("" on failure).
  std::string Get(const char* path) const {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return "";
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string out;
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
      std::string req = std::string("GET ") + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
      if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
        char buf[1 << 14];
        for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;)
          out.append(buf, static_cast<size_t>(n));
      }
    }
    close(fd);
    return out;
  }
  // Every /metrics line that starts with `name` (newline-separated).
  std::string MetricLines(const char* name) const {
    std::string body = Get("/metrics"), lines;
    for (size_t at = 0; at < body.size();) {
      size_t end = body.find('\n', at);
      if (end == std::string::npos) end = body.size();
      if (body.compare(at, std::strlen(name), name) == 0) lines += body.substr(at, end - at + 1);
      at = end + 1;
    }
    return lines;
  }
  void Stop() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      int status = 0;
      waitpid(pid, &status, 0);
      pid = -1;
    }
    if (!dir.empty()) {
      std::string cmd = "rm -rf '" + dir + "'";
      if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir.c_str());
      dir.clear();
    }
  }
};

}  // namespace sentinel::bench
