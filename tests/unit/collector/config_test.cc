// Config: durations, the key = value file, the command line, and the default socket rule.
#include "collector/config/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "collector/aggregate/aggregator.h"
#include "collector/config/metrics_detail.h"
#include "collector/export/metrics_select.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

void RunRm(const std::string& dir) { (void)!std::system(("rm -rf '" + dir + "'").c_str()); }

TEST(DurationTest, Units) {
  EXPECT_EQ(*ParseDurationNs("60s"), 60LL * 1000000000);
  EXPECT_EQ(*ParseDurationNs("15m"), 15LL * 60 * 1000000000);
  EXPECT_EQ(*ParseDurationNs("2h"), 2LL * 3600 * 1000000000);
  EXPECT_EQ(*ParseDurationNs("500ms"), 500LL * 1000000);
  EXPECT_EQ(*ParseDurationNs("1.5s"), 1500LL * 1000000);
  EXPECT_EQ(*ParseDurationNs("7"), 7LL * 1000000000);
  EXPECT_EQ(*ParseDurationNs("1d"), 86400LL * 1000000000);
}

TEST(DurationTest, Rejects) {
  for (const char* bad : {"", "s", "-5s", "5x", "abc", "5 m m", "10y", "999999d"}) {
    EXPECT_FALSE(ParseDurationNs(bad).ok()) << bad;
  }
}

TEST(ConfigTest, FileThenCommandLineWins) {
  char path[] = "/tmp/sentinel-config-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  {
    std::ofstream out(path);
    out << "# comment\n\nwindow = 5m\nhang_timeout=10s\nstraggler-learn = 3\nlisten = "
           "127.0.0.1:0\n";
  }
  std::vector<std::string> args = {"sentineld",   "--config", path,
                                   "--window=1m", "--socket", "/tmp/x.sock"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  Config c;
  bool help = false;
  ASSERT_TRUE(ParseCommandLine(static_cast<int>(argv.size()), argv.data(), &c, &help).ok());
  EXPECT_FALSE(help);
  EXPECT_EQ(c.window_ns, 60LL * 1000000000);  // command line beats the file
  EXPECT_EQ(c.hang_timeout_ns, 10LL * 1000000000);
  EXPECT_EQ(c.straggler_learn, 3);
  EXPECT_EQ(c.socket_path, "/tmp/x.sock");
  EXPECT_EQ(c.listen, "127.0.0.1:0");
  std::remove(path);
}

TEST(ConfigTest, Errors) {
  Config c;
  EXPECT_FALSE(c.Set("no-such-option", "1").ok());
  EXPECT_FALSE(c.Set("pending-slots", "0").ok());
  EXPECT_FALSE(c.Set("window", "soon").ok());
  std::vector<std::string> args = {"sentineld", "--window"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  bool help = false;
  EXPECT_FALSE(ParseCommandLine(2, argv.data(), &c, &help).ok());
  EXPECT_FALSE(c.LoadFile("/nonexistent/sentineld.conf").ok());
}

TEST(ConfigTest, DefaultSocketPathRule) {
  EXPECT_EQ(DefaultSocketPath("/run/custom.sock", "/run/user/1000"), "/run/custom.sock");
  EXPECT_EQ(DefaultSocketPath(nullptr, "/run/user/1000"), "/run/user/1000/sentinel/sentineld.sock");
  EXPECT_EQ(DefaultSocketPath("none", "/run/user/1000"), "/run/user/1000/sentinel/sentineld.sock");
  EXPECT_EQ(DefaultSocketPath(nullptr, nullptr),
            "/tmp/sentinel-" + std::to_string(getuid()) + "/sentineld.sock");
  // Too long for a sockaddr_un: returned as written, so that listening fails naming it.
  const std::string long_path = "/" + std::string(200, 'x') + ".sock";
  EXPECT_EQ(DefaultSocketPath(long_path.c_str(), nullptr), long_path);
}

// --expect is validated with the guard's own parser; the message points at the bad token.
TEST(ConfigTest, ExpectIsValidatedWithTheGuardGrammar) {
  Config c;
  EXPECT_TRUE(c.Set("expect", "net=ib affinity=pcie ranks_per_node>=8").ok());
  EXPECT_EQ(c.expect, "net=ib affinity=pcie ranks_per_node>=8");
  absl::Status bad = c.Set("expect", "net=ib gdr=maybe");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.message()).find("--expect:1:12: unknown value 'maybe' for gdr"),
            std::string::npos)
      << bad.message();
  EXPECT_EQ(c.expect, "net=ib affinity=pcie ranks_per_node>=8");  // unchanged
  EXPECT_FALSE(c.Set("expect", "# only a comment").ok());
  EXPECT_TRUE(c.Set("expect_on_mismatch", "warn").ok());
  EXPECT_EQ(c.expect_on_mismatch, "warn");
  EXPECT_FALSE(c.Set("expect-on-mismatch", "ignore").ok());
}

TEST(ConfigTest, NodeExpectFileSitsNextToTheSocket) {
  EXPECT_EQ(NodeExpectPath("/run/user/1000/sentinel/sentineld.sock"),
            "/run/user/1000/sentinel/expect");
  Config c;
  ASSERT_TRUE(c.Set("expect", "net=ib").ok());
  EXPECT_EQ(NodeExpectFileContent(c).find("# on_mismatch="), std::string::npos);
  ASSERT_TRUE(c.Set("expect-on-mismatch", "abort").ok());
  const std::string content = NodeExpectFileContent(c);
  EXPECT_NE(content.find("\n# on_mismatch=abort\nnet=ib\n"), std::string::npos) << content;
  char tmpl[] = "/tmp/sncfg-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/expect";
  const mode_t old = umask(077);
  ASSERT_TRUE(WriteFileAtomically(path, content, 0644).ok());
  umask(old);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  std::ifstream in(path);
  std::string read((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(read, content);
  EXPECT_FALSE(WriteFileAtomically(std::string(tmpl) + "/missing/expect", content, 0644).ok());
  unlink(path.c_str());
  rmdir(tmpl);
}

// Parses `args` (after "sentineld") and returns the status.
absl::Status ParseArgs(std::vector<std::string> args, Config* c) {
  args.insert(args.begin(), "sentineld");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  bool help = false;
  return ParseCommandLine(static_cast<int>(argv.size()), argv.data(), c, &help);
}

// Values that parse but cannot work are refused, each with a message naming its flag.
TEST(ConfigTest, UnworkableValuesAreRefusedNamingTheFlag) {
  const struct {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{"--nic-poll", "1us"}, "--nic-poll: must be 0 (off) or at least 100ms"},
      {{"--nic-poll", "50ms"}, "--nic-poll: must be 0 (off) or at least 100ms"},
      {{"--evidence-poll", "10ms"}, "--evidence-poll: must be 0 (off) or at least 100ms"},
      {{"--proc-root", ""}, "--proc-root: empty"},
      {{"--nvml-library="}, "--nvml-library: empty"},
      {{"--node-wait-alerts", "yes"}, "--node-wait-alerts: expected on|off"},
      {{"--straggler-rel", "inf"}, "--straggler-rel"},
      {{"--straggler-rel", "nan"}, "--straggler-rel"},
      {{"--straggler-rel", "0"}, "--straggler-rel: must be a finite fraction > 0"},
      {{"--straggler-noise-h", "inf"}, "--straggler-noise-h"},
      {{"--straggler-floor-h", "inf"}, "--straggler-floor-h"},
      // Finite but past any use: the detector's threshold overflows, so it would never fire.
      {{"--straggler-noise-h", "1e308"}, "--straggler-noise-h: must be a number in (0, 1000]"},
      {{"--straggler-noise-h", "1000.5"}, "--straggler-noise-h: must be a number in (0, 1000]"},
      {{"--straggler-floor-h", "1e308"}, "--straggler-floor-h: must be a number in [0, 1000]"},
      {{"--straggler-rel", "1e308"}, "--straggler-rel: must be a finite fraction > 0 and at most"},
      {{"--api-read-group", "no-such-group-here"}, "--api-read-group: unknown group"},
      {{"--api-remote-details", "yes"}, "--api-remote-details: expected on|off"},
      {{"--straggler-min", "0"}, "--straggler-min: must be at least 1us"},
      {{"--hang-silent", "0"}, "--hang-silent: must be at least 2s"},
      {{"--hang-silent", "1s"}, "--hang-silent: must be at least 2s"},
      {{"--hang-timeout", "2m", "--hang-timeout-busy", "1m"},
       "--hang-timeout-busy: must be at least --hang-timeout"},
      {{"--socket", ""}, "--socket: empty path"},
      {{"--socket="}, "--socket: empty path"},
      {{"--node="}, "--node: expected 1 to 63 characters"},
      {{"--node", "  "}, "--node: expected 1 to 63 characters"},
      {{"--node", std::string(64, 'n')}, "--node: expected 1 to 63 characters, got 64"},
      {{"--node", "-a"}, "--node: must start with a letter or a digit"},
      {{"--node", "node a"}, "--node: only letters, digits, '.', '_' and '-' are allowed"},
      {{"--node", "node\nb"}, "got byte 0x0a"},
      {{"--node", "node\"b"}, "got byte 0x22"},
      {{"--node", "n\xc3\xa9"}, "got byte 0xc3"},
  };
  for (const auto& c : cases) {
    Config config;
    const absl::Status s = ParseArgs(c.args, &config);
    std::string shown;
    for (const auto& a : c.args) shown += "'" + a + "' ";
    ASSERT_FALSE(s.ok()) << shown << "was accepted";
    EXPECT_NE(std::string(s.message()).find(c.message), std::string::npos)
        << shown << ": " << s.message();
  }
  // The smallest workable values stay accepted.
  Config ok;
  EXPECT_TRUE(ParseArgs({"--nic-poll", "0"}, &ok).ok());
  // The evidence poll: 1 s by default, 0 off; its roots and NVML's path as given.
  EXPECT_EQ(ok.evidence_poll_ns, 1'000'000'000);
  ASSERT_TRUE(ParseArgs({"--evidence-poll", "0", "--proc-root", "/host/proc", "--cgroup-root",
                         "/host/cgroup", "--nvml-library", "off"},
                        &ok)
                  .ok());
  EXPECT_EQ(ok.evidence_poll_ns, 0);
  EXPECT_EQ(ok.proc_root, "/host/proc");
  EXPECT_EQ(ok.cgroup_root, "/host/cgroup");
  EXPECT_EQ(ok.nvml_library, "off");
  // The straggler's persistence floor: 2 s by default, 0 turns it off (the host's time scale).
  EXPECT_EQ(ok.straggler_evidence_ns, 2'000'000'000);
  ASSERT_TRUE(ParseArgs({"--straggler-evidence", "0"}, &ok).ok());
  EXPECT_EQ(ok.straggler_evidence_ns, 0);
  EXPECT_EQ(StragglerParamsFrom(ok).min_evidence_ns, 0);
  EXPECT_TRUE(ParseArgs({"--nic-poll", "100ms", "--hang-silent", "2s", "--straggler-min", "1us",
                         "--straggler-rel", "0.001"},
                        &ok)
                  .ok());
  EXPECT_TRUE(
      ParseArgs({"--straggler-noise-h", "1000", "--straggler-floor-h", "1000", "--straggler-rel",
                 "10", "--api-read-group", "root", "--api-remote-details", "on"},
                &ok)
          .ok());
  EXPECT_EQ(ok.api_read_group, "root");
  EXPECT_TRUE(ok.api_remote_details);
  EXPECT_FALSE(Config().api_remote_details) << "default: no job details for other hosts";
  // A host-name-like node name is kept as given; the longest one too.
  Config named;
  ASSERT_TRUE(ParseArgs({"--node", "gpu-node_07.rack3"}, &named).ok());
  EXPECT_EQ(named.node_name, "gpu-node_07.rack3");
  ASSERT_TRUE(ParseArgs({"--node", std::string(63, 'n')}, &named).ok());
  EXPECT_EQ(named.node_name, std::string(63, 'n'));
  EXPECT_TRUE(Config().node_name.empty()) << "default: the short host name";
}

// --node names the node wherever sentineld names its own: the aggregator's state, from which
// alerts, the API and /metrics take `host`.
TEST(ConfigTest, NodeNameIsTheNodesNameInItsState) {
  Config config;
  ASSERT_TRUE(ParseArgs({"--node", "node-b"}, &config).ok());
  testing::FakeClock clock;
  Aggregator agg(config, &clock);
  std::vector<ExcludedHost> excluded;
  EXPECT_EQ(agg.SnapshotMetrics(ExcludePolicy{}, clock.RealNs(), &excluded).host, "node-b");
  EXPECT_EQ(agg.SnapshotRanks(ApiViewer::Everything()).host, "node-b");
}

// The shipped example configuration stays valid.
TEST(ConfigTest, ExampleConfigIsValid) {
  Config c;
  const absl::Status s =
      ParseArgs({"--config", std::string(SENTINEL_SOURCE_DIR) + "/examples/sentineld.conf"}, &c);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(c.socket_path, "/run/sentinel/sentineld.sock");
}

// The temporary file of an atomic write used a name anyone could predict (<path>.tmp.<pid>) and
// followed a symlink planted there: the target of that link (a private file) was overwritten and
// made 0644. It must stay as it was, and a directory other users can write is refused.
TEST(ConfigTest, AtomicWriteNeverFollowsAPlantedTempName) {
  char tmpl[] = "/tmp/sncfg-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string secret = dir + "/secret";
  { std::ofstream(secret) << "private\n"; }
  ASSERT_EQ(chmod(secret.c_str(), 0600), 0);
  const std::string target = dir + "/port";
  const std::string planted = target + ".tmp." + std::to_string(getpid());
  ASSERT_EQ(symlink(secret.c_str(), planted.c_str()), 0);
  const absl::Status s = WriteFileAtomically(target, "1234\n", 0644);
  EXPECT_TRUE(s.ok()) << s.message();
  std::ifstream in(secret);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "private\n") << "the planted link's target was overwritten";
  struct stat st {};
  ASSERT_EQ(stat(secret.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the planted link's target changed mode";
  // A symlink at the target itself is replaced, not written through.
  ASSERT_EQ(unlink(target.c_str()), 0);
  ASSERT_EQ(symlink(secret.c_str(), target.c_str()), 0);
  EXPECT_TRUE(WriteFileAtomically(target, "1234\n", 0644).ok());
  struct stat lst {};
  ASSERT_EQ(lstat(target.c_str(), &lst), 0);
  EXPECT_TRUE(S_ISREG(lst.st_mode));
  std::ifstream again(secret);
  std::string after((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
  EXPECT_EQ(after, "private\n");
  // A directory others can write: refused with one line, nothing written.
  const std::string open_dir = dir + "/open";
  ASSERT_EQ(mkdir(open_dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open_dir.c_str(), 0777), 0);
  const absl::Status refused = WriteFileAtomically(open_dir + "/port", "1\n", 0644);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(std::string(refused.message()).find("lets other users write to it"), std::string::npos)
      << refused.message();
  EXPECT_NE(access((open_dir + "/port").c_str(), F_OK), 0);
  Config c;
  const absl::Status flag = ParseArgs({"--port-file", open_dir + "/port"}, &c);
  ASSERT_FALSE(flag.ok());
  EXPECT_NE(std::string(flag.message()).find("--port-file: " + open_dir), std::string::npos)
      << flag.message();
  RunRm(dir);
}

TEST(ConfigTest, SeriesBudgetKeys) {
  Config c;
  EXPECT_EQ(c.metrics_detail, "none");
  EXPECT_EQ(c.series_retention_ns, 5LL * 60 * 1000000000);
  ASSERT_TRUE(c.Set("metrics_detail", " size , comm ").ok());
  ASSERT_TRUE(c.Set("series-retention", "30s").ok());
  ASSERT_TRUE(c.Set("metrics-comms", "0x00000000CAFEF00D, world").ok());
  const MetricsOptions o = MetricsOptionsFrom(c);
  EXPECT_TRUE(o.detail.comm);
  EXPECT_TRUE(o.detail.size);
  EXPECT_EQ(o.retention_ns, 30LL * 1000000000);
  EXPECT_EQ(o.comms, (std::vector<std::string>{"0x00000000CAFEF00D", "world"}));
  EXPECT_TRUE(c.Set("series-retention", "0").ok());
  for (const char* bad : {"", "all", "comm,,size", "rank"}) {
    EXPECT_FALSE(c.Set("metrics-detail", bad).ok()) << bad;
  }
  EXPECT_FALSE(c.Set("series-retention", "-1s").ok());
  const absl::StatusOr<MetricsDetail> none = ParseMetricsDetail("none");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->comm || none->size);
}

}  // namespace
}  // namespace sentinel::collector
