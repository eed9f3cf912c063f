// The real sentineld's first lines under --log-format json: every line it writes is one JSON
// object, from the first, including the SENTINEL_* problems found while it reads its command
// line (an unknown name, a SENTINEL_DAEMON_USER naming no user) and a refused command line.
// Before, those came out as plain text ahead of the JSON.
#include <signal.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#include "tests/integration/fake_nccl/test_util.h"

namespace sentinel::testing {
namespace {

// Every line of `output` as a JSON log event (ts, level, logger, msg); fails the test on any
// other line.
std::vector<nlohmann::json> JsonLines(const std::string& output) {
  std::vector<nlohmann::json> events;
  for (const std::string& line : Lines(output)) {
    if (line.empty()) continue;
    const nlohmann::json ev = nlohmann::json::parse(line, nullptr, false);
    EXPECT_TRUE(ev.is_object()) << "not a JSON line: " << line << "\nall:\n" << output;
    if (!ev.is_object()) continue;
    for (const char* key : {"ts", "level", "logger", "msg"}) {
      EXPECT_TRUE(ev.contains(key)) << line;
    }
    events.push_back(ev);
  }
  return events;
}

int CountMsg(const std::vector<nlohmann::json>& events, const std::string& what) {
  int n = 0;
  for (const nlohmann::json& ev : events) {
    if (ev.value("msg", "").find(what) != std::string::npos) ++n;
  }
  return n;
}

class StartupLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/s33log-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) RunProgram({"/bin/rm", "-rf", dir_}, {});
  }
  std::string dir_;
};

TEST_F(StartupLogTest, EnvironmentProblemsAreJsonLinesFromTheFirst) {
  const std::string port_file = dir_ + "/port";
  Started d = StartProgram(
      {SENTINELD_PATH, "--log-format", "json", "--socket", dir_ + "/run/s.sock", "--listen",
       "127.0.0.1:0", "--port-file", port_file},
      {{"SENTINEL_SOKET", "/nowhere"}, {"SENTINEL_DAEMON_USER", "no-such-sentinel-user"}}, 60);
  struct stat st {};
  EXPECT_TRUE(Eventually([&] { return stat(port_file.c_str(), &st) == 0; }, 20000))
      << ReadFile(d.out_path);
  kill(d.pid, SIGTERM);  // `timeout` passes it on
  const RunResult r = WaitProgram(d);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::vector<nlohmann::json> events = JsonLines(r.output);
  ASSERT_FALSE(events.empty()) << r.output;
  EXPECT_EQ(CountMsg(events, "SENTINEL_SOKET is not a variable sentinel knows"), 1) << r.output;
  EXPECT_EQ(CountMsg(events, "SENTINEL_DAEMON_USER='no-such-sentinel-user' is not a user"), 1)
      << r.output;
  EXPECT_EQ(CountMsg(events, "listening"), 1) << r.output;
  EXPECT_EQ(events.front().value("level", ""), "warning") << r.output;
}

TEST_F(StartupLogTest, RefusedCommandLineIsOneJsonLine) {
  struct Case {
    std::vector<std::string> args;
    const char* why;
  };
  for (const Case& c : {Case{{"--log-format", "json", "--tick", "0"}, "--tick"},
                        Case{{"--tick", "0", "--log-format=json"}, "--tick"},
                        Case{{"--log-format", "json", "--no-such-flag", "1"}, "no-such-flag"}}) {
    std::vector<std::string> argv = {SENTINELD_PATH};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const RunResult r = RunProgram(argv, {{"SENTINEL_SOKET", "/nowhere"}}, 30);
    SCOPED_TRACE(c.args[0] + " " + c.args[2]);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    // The environment's problems, when it was read before the refusal, are JSON lines too.
    const std::vector<nlohmann::json> events = JsonLines(r.output);
    ASSERT_FALSE(events.empty()) << r.output;
    EXPECT_LE(CountMsg(events, "SENTINEL_SOKET is not a variable"), 1) << r.output;
    EXPECT_EQ(events.back().value("level", ""), "critical") << r.output;
    EXPECT_NE(events.back().value("msg", "").find(c.why), std::string::npos) << r.output;
    EXPECT_NE(events.back().value("msg", "").find("(see sentineld --help)"), std::string::npos)
        << r.output;
  }
  // Text stays as it was: the refusal, then where to look.
  const RunResult r = RunProgram({SENTINELD_PATH, "--tick", "0"}, {}, 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, "sentineld: --tick: must be at least 1ms\n(see sentineld --help)\n");
}

}  // namespace
}  // namespace sentinel::testing
