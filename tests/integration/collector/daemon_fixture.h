// Starts the REAL sentineld binary on a temp-dir socket and HTTP port 0 (discovered through
// --port-file), and stops it after the test. Also: HTTP GET, running a command, and the
// JSON Schema validation of saved payloads (python3 + jsonschema, as Debian packages it).
#pragma once

#include <httplib.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "tests/unit/collector/wire_test_util.h"  // MonoNow

namespace sentinel::testing {

inline int RunCommand(const std::string& cmd, std::string* output = nullptr) {
  std::string full = cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (p == nullptr) return -1;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  if (output != nullptr) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline bool HaveProgram(const std::string& name) {
  return RunCommand("command -v " + name + " >/dev/null") == 0;
}

class DaemonFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/snd-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    socket_ = dir_ + "/run/s.sock";
    port_file_ = dir_ + "/port";
  }
  void TearDown() override {
    Stop();
    RunCommand("rm -rf " + dir_);
  }
  // Extra flags go after the defaults (the command line's last value wins).
  void Start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {SENTINELD_PATH, "--socket",    socket_,    "--listen",
                                     "127.0.0.1:0",  "--port-file", port_file_, "--tick",
                                     "100ms",        "--log-level", "warn"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      if (max_fds_ > 0) {
        rlimit lim{static_cast<rlim_t>(max_fds_), static_cast<rlim_t>(max_fds_)};
        setrlimit(RLIMIT_NOFILE, &lim);
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 200 && port_ == 0; ++i) {
      std::ifstream in(port_file_);
      if (!(in >> port_)) port_ = 0;
      if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_GT(port_, 0) << "sentineld did not write its port file";
  }
  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
      exit_status_ = status;
      pid_ = -1;
    }
  }
  // CPU seconds (user + system) the daemon has used so far, from /proc/<pid>/stat.
  double CpuSeconds() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string f;
    unsigned long long ticks = 0;
    for (int i = 3; i <= 15 && (fields >> f); ++i) {
      if (i == 14 || i == 15) ticks += std::stoull(f);  // utime, stime
    }
    return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  std::string Addr() const { return "127.0.0.1:" + std::to_string(port_); }
  // GET -> status; body in *body.
  int Get(const std::string& path, std::string* body) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(10, 0);
    auto res = c.Get(path.c_str());
    if (!res) return -1;
    *body = res->body;
    return res->status;
  }
  nlohmann::json GetJson(const std::string& path) {
    std::string body;
    EXPECT_EQ(Get(path, &body), 200) << path;
    return nlohmann::json::parse(body, nullptr, false);
  }
  // Polls until pred(json of path) or ~10 s.
  template <typename Pred>
  nlohmann::json WaitFor(const std::string& path, Pred pred) {
    nlohmann::json j;
    for (int i = 0; i < 200; ++i) {
      j = GetJson(path);
      if (!j.is_discarded() && pred(j)) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "timed out waiting on " << path << ": " << j.dump();
    return j;
  }
  std::string Save(const std::string& name, const std::string& body) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << body;
    return path;
  }
  // Validates saved payloads: each item is "schema_name=file". Returns the script's exit code
  // (0 valid, 1 invalid, 77 no jsonschema module).
  int Validate(const std::vector<std::string>& items, std::string* out) {
    std::string cmd = std::string("python3 ") + VALIDATOR_PATH + " " + SCHEMA_DIR;
    for (const auto& i : items) cmd += " " + i;
    return RunCommand(cmd, out);
  }
  // The value of one Prometheus sample line ("name{labels}") in /metrics, or -1.
  double Metric(const std::string& series) {
    std::string body;
    if (Get("/metrics", &body) != 200) return -1;
    std::istringstream in(body);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(series + " ", 0) == 0) return std::atof(line.c_str() + series.size() + 1);
    }
    return -1;
  }

  std::string dir_;
  std::string socket_;
  std::string port_file_;
  pid_t pid_ = -1;
  int port_ = 0;
  int max_fds_ = 0;  // > 0: RLIMIT_NOFILE of the daemon
  int exit_status_ = 0;
};

}  // namespace sentinel::testing
