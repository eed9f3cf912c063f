// Starts the REAL sentineld binary on a temp-dir socket and HTTP port 0 (discovered through
// --port-file), and stops it after the test. Also: HTTP GET, running a command, and the
// JSON Schema validation of saved payloads (python3 + jsonschema, as Debian packages it), clients
// of other users (--allow-group) and a straggler job. Starting the process and a free port for
// Prometheus: sentineld_process.h.
#pragma once

#include <grp.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "tests/integration/collector/sentineld_process.h"
#include "tests/unit/collector/wire_test_util.h"

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

// The records of `rank` of a `nranks`-rank communicator in a job whose rank 1 is a straggler: 12
// collectives 100 ms apart from `base_ns`, each ending 50 ms after its start, rank 1 arriving
// 40 ms after the others every time (an alert once sentineld has learnt 4 and needs no 2 s of
// persistence: --straggler-learn 4 --straggler-evidence 0; 1.2 s of synthetic job).
inline Bytes LateRankOneRecords(uint64_t comm, int rank, int nranks, int64_t base_ns) {
  constexpr int64_t kMs = 1000000;
  Bytes b;
  for (uint64_t seq = 0; seq < 12; ++seq) {
    const int64_t start = base_ns + static_cast<int64_t>(seq) * 100 * kMs;
    const int64_t arrival = start + (rank == 1 ? 40 * kMs : 0);
    const auto rec = MakeColl(comm, rank, nranks, seq, arrival, start + 50 * kMs - arrival);
    AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
  }
  return b;
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
    if (pid_ > 0) {
      Stop();
      // sentineld ends cleanly on SIGTERM; anything else is a crash or a sanitizer's report (the
      // TSan stage runs these tests against a TSan-built sentineld). A test that ends the daemon
      // itself checks exit_status_ as it needs.
      EXPECT_TRUE(WIFEXITED(exit_status_) && WEXITSTATUS(exit_status_) == 0)
          << "sentineld's exit status " << exit_status_ << " (see its stderr above)";
    }
    RunCommand("rm -rf " + dir_);
  }
  // Extra flags go after the defaults (the command line's last value wins).
  void Start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {SENTINELD_PATH, "--socket",    socket_,    "--listen",
                                     "127.0.0.1:0",  "--port-file", port_file_, "--tick",
                                     "100ms",        "--log-level", "warn"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = SpawnProgram(std::move(args), max_fds_);
    ASSERT_GE(pid_, 0);
    // Once per fixture: a test that restarts the daemon sets port_ = 0 to learn its new port.
    if (port_ == 0) port_ = WaitForPortFile(port_file_);
    ASSERT_GT(port_, 0) << "sentineld did not write its port file";
  }
  void Stop() {
    if (pid_ > 0) {
      exit_status_ = StopProgram(pid_);
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
  // Polls /metrics until `series` has `value` or ~10 s; returns the last value read.
  double WaitForMetric(const std::string& series, double value) {
    double got = Metric(series);
    for (int i = 0; i < 200 && got != value; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      got = Metric(series);
    }
    return got;
  }

  // Clients of other users, the .deb set-up. FindGroupToAllow: a group that exists (users,
  // nogroup or daemon) in group_ and gid_, for --allow-group; false when there is none.
  bool FindGroupToAllow() {
    for (const char* name : {"users", "nogroup", "daemon"}) {
      if (const group* g = getgrnam(name)) {
        group_ = name;
        gid_ = static_cast<int>(g->gr_gid);
        return true;
      }
    }
    return false;
  }
  // The socket directory (dir_/run, mode 0750 under the test directory at 0711) belongs to that
  // group, so that its members reach the socket. Needs root; false when a step fails.
  bool GiveSocketDirToGroup() {
    const std::string run = dir_ + "/run";
    return chmod(dir_.c_str(), 0711) == 0 && mkdir(run.c_str(), 0750) == 0 &&
           chown(run.c_str(), 0, static_cast<gid_t>(gid_)) == 0;
  }
  // SetUp of a test with clients of other users (uids 4242, 4243): skips unless root (`what_for`
  // completes "needs root, ...") and a group to allow exists; the socket directory then belongs
  // to that group. A skip inside returns here first; gtest then runs no test body.
  void SetUpForOtherUsers(const char* what_for) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root, " << what_for;
    DaemonFixture::SetUp();
    if (!FindGroupToAllow()) GTEST_SKIP() << "no group to allow (users, nogroup, daemon)";
    ASSERT_TRUE(GiveSocketDirToGroup()) << "the socket directory could not be given to " << group_;
  }
  // Start with --allow-group group_ before `extra`.
  void StartAllowingGroup(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--allow-group", group_};
    args.insert(args.end(), extra.begin(), extra.end());
    Start(std::move(args));
  }
  // A client in a child process of its own dropped to `uid` and gid_, whose hello claims
  // `claimed_pid` and, when not empty, `host`; connected (a failure to connect fails the test).
  std::unique_ptr<WireClient> ClientAsUser(int uid, uint32_t claimed_pid,
                                           const std::string& host = "") {
    auto c = std::make_unique<WireClient>();
    c->ConnectAsOwnProcess(uid, gid_);
    if (!host.empty()) c->set_hello_host(host);
    EXPECT_TRUE(c->Connect(socket_, claimed_pid)) << "uid " << uid << " could not connect";
    return c;
  }
  // A 2-rank job on `comm` whose rank 1 is a straggler (LateRankOneRecords), one client per rank
  // (claimed pids 3000 and 3001) appended to *clients: of `uid` (ClientAsUser, hello host `host`)
  // when uid >= 0, else of this process.
  void StreamStragglerJob(std::vector<std::unique_ptr<WireClient>>* clients, uint64_t comm,
                          int uid = -1, const std::string& host = "") {
    constexpr int kRanks = 2;
    const size_t first = clients->size();
    for (int r = 0; r < kRanks; ++r) {
      const uint32_t pid = static_cast<uint32_t>(3000 + r);
      if (uid >= 0) {
        clients->push_back(ClientAsUser(uid, pid, host));
      } else {
        clients->push_back(std::make_unique<WireClient>());
        ASSERT_TRUE(clients->back()->Connect(socket_, pid));
      }
      ASSERT_TRUE(
          clients->back()->Send(Frame(kSentinelWireCommInit, MakeCommInit(comm, r, kRanks))));
    }
    const int64_t base = MonoNow() - 60LL * 1000 * 1000000;
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE((*clients)[first + static_cast<size_t>(r)]->Send(
          LateRankOneRecords(comm, r, kRanks, base)));
    }
  }

  std::string dir_;
  std::string socket_;
  std::string port_file_;
  pid_t pid_ = -1;
  int port_ = 0;
  int max_fds_ = 0;  // > 0: RLIMIT_NOFILE of the daemon
  int exit_status_ = 0;
  std::string group_;  // FindGroupToAllow
  int gid_ = -1;
};

}  // namespace sentinel::testing
