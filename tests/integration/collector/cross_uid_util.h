// Shared by the tests that run sentineld and its clients as other local users (uids 4242 and
// 4243 through setpriv; they need root and skip without it): shell lines as a uid, file checks,
// and a sentineld child running as the victim uid.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace sentinel::testing {

constexpr uid_t kVictim = 4242;
constexpr uid_t kAttacker = 4243;
constexpr gid_t kUsersGid = 100;  // Debian's `users` group: a group name getgrnam resolves

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline int Shell(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs `cmd` (a shell line) as `uid`:`gid` with no other groups.
inline int ShellAs(uid_t uid, gid_t gid, const std::string& cmd) {
  return Shell("setpriv --reuid=" + std::to_string(uid) + " --regid=" + std::to_string(gid) +
               " --clear-groups -- /bin/sh -c '" + cmd + "'");
}

inline mode_t ModeOf(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

inline bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

// A sentineld child running as the victim. The child waits on a pipe before it execs, so a test
// knows the daemon's pid (setpriv execs sentineld in the same process) before the daemon runs.
class VictimDaemon {
 public:
  VictimDaemon(std::vector<std::string> args, std::string log, std::vector<gid_t> groups = {})
      : log_(std::move(log)) {
    int fds[2];
    if (pipe(fds) != 0) return;
    std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid=" + std::to_string(kVictim),
                                     "--regid=" + std::to_string(kVictim)};
    if (groups.empty()) {
      argv.emplace_back("--clear-groups");
    } else {
      std::string list;
      for (gid_t g : groups) list += (list.empty() ? "" : ",") + std::to_string(g);
      argv.push_back("--groups=" + list);
    }
    argv.emplace_back("--");
    argv.emplace_back(SENTINEL_SENTINELD_PATH);
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = fork();
    if (pid_ == 0) {
      close(fds[1]);
      char go = 0;
      (void)!read(fds[0], &go, 1);
      close(fds[0]);
      const int out = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (out >= 0) {
        dup2(out, 1);
        dup2(out, 2);
      }
      unsetenv("XDG_RUNTIME_DIR");
      unsetenv("SENTINEL_SOCKET");
      std::vector<char*> raw;
      for (auto& a : argv) raw.push_back(a.data());
      raw.push_back(nullptr);
      execv(raw[0], raw.data());
      _exit(127);
    }
    close(fds[0]);
    go_fd_ = fds[1];
  }
  ~VictimDaemon() { Kill(); }
  VictimDaemon(const VictimDaemon&) = delete;
  VictimDaemon& operator=(const VictimDaemon&) = delete;

  pid_t pid() const { return pid_; }
  void Go() {
    if (go_fd_ >= 0) {
      (void)!write(go_fd_, "g", 1);
      close(go_fd_);
      go_fd_ = -1;
    }
  }
  // Waits up to `seconds` for the daemon to exit; its exit code, or -1 while it still runs.
  int WaitExit(int seconds) {
    for (int i = 0; i < seconds * 20 && pid_ > 0; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return code_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return pid_ > 0 ? -1 : code_;
  }
  // Waits up to ~20 s for a non-empty `path` (the port file); false if the daemon exited first.
  bool WaitForFile(const std::string& path) {
    for (int i = 0; i < 400; ++i) {
      std::ifstream in(path);
      int port = 0;
      if (in >> port && port > 0) return true;
      if (WaitExit(0) >= 0) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  void Kill() {
    Go();
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      if (WaitExit(10) < 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
      }
    }
  }
  std::string Log() const { return ReadAll(log_); }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int go_fd_ = -1;
  int code_ = -1;
};

}  // namespace sentinel::testing
