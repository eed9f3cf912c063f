// sentinel_rogue_rss_bench: sentineld's resident memory under a rogue plugin client's attacks, and
// after the rogue leaves. For each attack a fresh sentineld (--allow-group, as the .deb set-up) is
// started; the rogue connects from child processes under --uid (default 4242, needs root) with the
// allowed group as gid, so SO_PEERCRED names another user. Reported per attack: idle RSS, peak
// (VmHWM), RSS while attacked, RSS --after seconds after the rogue closed every connection, the
// firing alerts and how long GET /v1/alerts took. Not a ctest test (a minute per attack).
//
//   sentinel_rogue_rss_bench --sentineld=PATH [--attack=all|verdicts|ranks|records|stuck]
//                            [--after=60] [--uid=4242] [--group=users]
#include <grp.h>
#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/process_usage.h"
#include "tests/unit/collector/wire_test_util.h"

namespace {

using sentinel::testing::AppendFrame;
using sentinel::testing::Bytes;
using sentinel::testing::MakeColl;
using sentinel::testing::MakeCommInit;
using sentinel::testing::MonoNow;
using sentinel::testing::WireClient;

std::string Arg(int argc, char** argv, const char* name, const char* fallback) {
  const size_t len = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], name, len) == 0 && argv[i][len] == '=') return argv[i] + len + 1;
  }
  return fallback;
}

class Daemon {
 public:
  Daemon(const std::string& binary, const std::string& group, gid_t gid) {
    char tmpl[] = "/tmp/rogue-rss-XXXXXX";
    dir_ = mkdtemp(tmpl);
    chmod(dir_.c_str(), 0711);
    const std::string run = dir_ + "/run";
    mkdir(run.c_str(), 0750);
    if (chown(run.c_str(), 0, gid) != 0) std::perror("chown");
    socket_ = run + "/s.sock";
    const std::string port_file = dir_ + "/port";
    pid_ = fork();
    if (pid_ == 0) {
      const std::string log = dir_ + "/sentineld.log";
      if (freopen(log.c_str(), "w", stderr) == nullptr) _exit(126);
      execl(binary.c_str(), binary.c_str(), "--socket", socket_.c_str(), "--listen", "127.0.0.1:0",
            "--port-file", port_file.c_str(), "--allow-group", group.c_str(), "--log-level",
            "error", static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 200 && port_ == 0; ++i) {
      std::ifstream in(port_file);
      if (!(in >> port_)) port_ = 0;
      if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~Daemon() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    std::string rm = "rm -rf " + dir_;
    if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir_.c_str());
  }
  bool ok() const { return port_ > 0; }
  pid_t pid() const { return pid_; }
  const std::string& socket() const { return socket_; }
  // GET path: status, body, seconds taken.
  int Get(const std::string& path, std::string* body, double* secs) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    const auto t0 = std::chrono::steady_clock::now();
    auto res = c.Get(path.c_str());
    *secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!res) return -1;
    *body = res->body;
    return res->status;
  }

 private:
  std::string dir_;
  std::string socket_;
  pid_t pid_ = -1;
  int port_ = 0;
};

struct Rogue {
  int uid;
  gid_t gid;
  std::vector<std::unique_ptr<WireClient>> conns;
  WireClient* Connect(const std::string& socket) {
    auto c = std::make_unique<WireClient>();
    c->ConnectAsOwnProcess(uid, static_cast<int>(gid));
    c->set_hello_host("gpu-node-017");
    if (!c->Connect(socket, 1)) return nullptr;
    conns.push_back(std::move(c));
    return conns.back().get();
  }
};

// 40,000 guard verdicts over 64 connections: each announces 64 one-rank communicators and sends
// verdicts for them and for communicators it never announced (before the bounds: 1.2 GB, 1.6 GB
// peak).
void AttackVerdicts(Rogue* rogue, const std::string& socket) {
  constexpr int kConns = 64;
  constexpr int kVerdicts = 40000;
  for (int c = 0; c < kConns; ++c) {
    WireClient* w = rogue->Connect(socket);
    if (w == nullptr) continue;
    Bytes b;
    for (int k = 0; k < 64; ++k) {
      const auto init =
          MakeCommInit(0xA000000000000000ULL + static_cast<uint64_t>(c * 64 + k), 0, 2);
      AppendFrame(&b, kSentinelWireCommInit, &init, sizeof(init));
    }
    for (int i = c; i < kVerdicts; i += kConns) {
      SentinelWireVerdict v{};
      const int k = i / kConns;
      v.comm_hash = k % 2 == 0 ? 0xA000000000000000ULL + static_cast<uint64_t>(c * 64 + k % 64)
                               : 0xC000000000000000ULL + static_cast<uint64_t>(i);
      v.rank = 0;
      v.nranks = 2;
      v.kind = static_cast<uint16_t>(1 + i % 3);
      v.outcome = kSentinelOutcomeFail;
      std::memset(v.evidence, 'x', sizeof(v.evidence) - 1);
      std::memset(v.cause, 'y', sizeof(v.cause) - 1);
      AppendFrame(&b, kSentinelWireVerdict, &v, sizeof(v));
    }
    if (!w->Send(b)) std::fprintf(stderr, "send failed\n");
  }
}

// 10,000+ fake ranks: 160 connections x 64 CommInits (before the bounds: 927 MB and an 18 MB
// /metrics).
void AttackRanks(Rogue* rogue, const std::string& socket) {
  for (int c = 0; c < 160; ++c) {
    WireClient* w = rogue->Connect(socket);
    if (w == nullptr) continue;
    Bytes b;
    for (int r = 0; r < 64; ++r) {
      const auto init = MakeCommInit(0xD000000000000000ULL + static_cast<uint64_t>(c), r, 16384);
      AppendFrame(&b, kSentinelWireCommInit, &init, sizeof(init));
      const auto rec =
          MakeColl(0xD000000000000000ULL + static_cast<uint64_t>(c), r, 16384, 1, MonoNow(), 1000);
      AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
    }
    if (!w->Send(b)) std::fprintf(stderr, "send failed\n");
  }
}

// Valid records over 64 connections: each 64 ranks of one 4,096-rank communicator, every
// function, two sequence numbers (~10 MB on the wire; before the bounds: 1.16 GB).
void AttackRecords(Rogue* rogue, const std::string& socket) {
  size_t bytes = 0;
  for (int c = 0; c < 64; ++c) {
    WireClient* w = rogue->Connect(socket);
    if (w == nullptr) continue;
    Bytes b;
    for (int r = 0; r < 64; ++r) {
      const auto init = MakeCommInit(0xE000000000000000ULL, c * 64 + r, 4096);
      AppendFrame(&b, kSentinelWireCommInit, &init, sizeof(init));
    }
    const int64_t base = MonoNow();
    for (uint64_t seq = 1; seq <= 2; ++seq) {
      for (int f = 0; f <= kSentinelFuncGather; ++f) {
        for (int r = 0; r < 64; ++r) {
          const auto rec = MakeColl(0xE000000000000000ULL, c * 64 + r, 4096, seq, base + r, 1000,
                                    1 << 20, static_cast<uint8_t>(f));
          AppendFrame(&b, kSentinelWireColl, &rec, sizeof(rec));
        }
      }
    }
    bytes += b.size();
    if (!w->Send(b)) std::fprintf(stderr, "send failed\n");
  }
  std::printf("  records attack: %.1f MB sent\n", static_cast<double>(bytes) / 1e6);
}

// The fake stuck rank 7 (and a never-launched rank 6) of a communicator, for 5 s.
void AttackStuck(Rogue* rogue, const std::string& socket) {
  WireClient* w = rogue->Connect(socket);
  if (w == nullptr) return;
  const int64_t start = MonoNow();
  for (int i = 0; i < 17; ++i) {
    Bytes b;
    for (int rank : {6, 7}) {
      SentinelWireInFlight in{};
      in.comm_hash = 0x5EED;
      in.now_ns = MonoNow();
      in.rank = rank;
      in.nranks = 8;
      in.enqueued = rank == 7 ? 101 : 100;
      in.gpu_started = in.enqueued;
      in.completed = 100;
      in.oldest_since_ns = rank == 7 ? start - 60000000000LL : 0;
      AppendFrame(&b, kSentinelWireInFlight, &in, sizeof(in));
    }
    if (!w->Send(b)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string sentineld = Arg(argc, argv, "--sentineld", "");
  const std::string attack = Arg(argc, argv, "--attack", "all");
  const double after = std::atof(Arg(argc, argv, "--after", "60").c_str());
  const int uid = std::atoi(Arg(argc, argv, "--uid", "4242").c_str());
  const std::string group_name = Arg(argc, argv, "--group", "users");
  const bool scrape = Arg(argc, argv, "--scrape", "1") == std::string("1");
  if (sentineld.empty() || geteuid() != 0) {
    std::fprintf(stderr,
                 "usage (as root): %s --sentineld=PATH [--attack=all|verdicts|ranks|"
                 "records|stuck] [--after=60] [--uid=4242] [--group=users]\n",
                 argv[0]);
    return 2;
  }
  const struct group* g = getgrnam(group_name.c_str());
  if (g == nullptr) {
    std::fprintf(stderr, "no group %s\n", group_name.c_str());
    return 2;
  }
  struct Attack {
    const char* name;
    void (*run)(Rogue*, const std::string&);
  };
  const Attack attacks[] = {{"verdicts", AttackVerdicts},
                            {"ranks", AttackRanks},
                            {"records", AttackRecords},
                            {"stuck", AttackStuck}};
  std::printf("%-9s %9s %9s %9s %9s %8s %8s %9s\n", "attack", "idle_MiB", "peak_MiB", "during",
              "after_MiB", "after/idle", "alerts", "alerts_s");
  for (const Attack& a : attacks) {
    if (attack != "all" && attack != a.name) continue;
    Daemon d(sentineld, group_name, g->gr_gid);
    if (!d.ok()) {
      std::fprintf(stderr, "sentineld did not start\n");
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));
    std::string body;
    double secs = 0;
    // Idle is a daemon in service: Prometheus scrapes /metrics, people read /v1/alerts and
    // /v1/ranks. Their first answers page in code and size the HTTP buffers; that is not the
    // attack's doing, so it is in the idle figure.
    for (const char* path : {"/v1/alerts", "/metrics", "/v1/ranks"}) d.Get(path, &body, &secs);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const double idle = (sentinel::testing::ProcStatusKiB(d.pid(), "VmRSS") / 1024.0);
    const double idle_anon = (sentinel::testing::ProcStatusKiB(d.pid(), "RssAnon") / 1024.0);
    const double idle_file = (sentinel::testing::ProcStatusKiB(d.pid(), "RssFile") / 1024.0);
    Rogue rogue{uid, g->gr_gid, {}};
    a.run(&rogue, d.socket());
    std::this_thread::sleep_for(std::chrono::seconds(3));  // let it ingest
    const int status = d.Get("/v1/alerts", &body, &secs);
    size_t alerts = 0;
    if (status == 200) {
      const auto j = nlohmann::json::parse(body, nullptr, false);
      if (!j.is_discarded()) alerts = j["alerts"].size();
    }
    std::string metrics;
    double msecs = 0;
    if (scrape) d.Get("/metrics", &metrics, &msecs);
    const double during = (sentinel::testing::ProcStatusKiB(d.pid(), "VmRSS") / 1024.0);
    rogue.conns.clear();  // every rogue connection closes
    std::this_thread::sleep_for(std::chrono::duration<double>(after));
    const double peak = (sentinel::testing::ProcStatusKiB(d.pid(), "VmHWM") / 1024.0);
    const double rest = (sentinel::testing::ProcStatusKiB(d.pid(), "VmRSS") / 1024.0);
    const double rest_anon = (sentinel::testing::ProcStatusKiB(d.pid(), "RssAnon") / 1024.0);
    const double rest_file = (sentinel::testing::ProcStatusKiB(d.pid(), "RssFile") / 1024.0);
    // What is still held: processes and their (communicator, rank) entries, alerts.
    size_t kept_processes = 0;
    size_t kept_ranks = 0;
    if (d.Get("/v1/ranks", &body, &msecs) == 200) {
      const auto j = nlohmann::json::parse(body, nullptr, false);
      if (!j.is_discarded()) {
        kept_processes = j["ranks"].size();
        for (const auto& p : j["ranks"]) kept_ranks += p["comms"].size();
      }
    }
    size_t kept_alerts = 0;
    if (d.Get("/v1/alerts", &body, &msecs) == 200) {
      const auto j = nlohmann::json::parse(body, nullptr, false);
      if (!j.is_discarded()) kept_alerts = j["alerts"].size();
    }
    std::printf("  after: %zu processes, %zu ranks, %zu alerts (resolved) still listed\n",
                kept_processes, kept_ranks, kept_alerts);
    std::printf(
        "  RSS split, idle -> after: anonymous %.1f -> %.1f MiB, file-backed (code, "
        "libraries) %.1f -> %.1f MiB\n",
        idle_anon, rest_anon, idle_file, rest_file);
    std::printf("%-9s %9.1f %9.1f %9.1f %9.1f %8.2f %8zu %9.3f  (/v1/alerts %d, /metrics %zu B)\n",
                a.name, idle, peak, during, rest, rest / idle, alerts, secs, status,
                metrics.size());
    std::fflush(stdout);
  }
  return 0;
}
