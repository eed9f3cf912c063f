// SENTINEL_CHAIN_PROFILER: the recording plugin chained behind sentinel sees exactly the callbacks
// it sees when NCCL (the fake) loads it alone, under v4, v5 and v6, whatever the two masks;
// sentinel's own records do not change; a failing or missing chained plugin harms neither the job
// nor our data.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "tests/integration/fake_nccl/test_util.h"

namespace sentinel::testing {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// One callback, without what legitimately differs between two runs: sequence numbers, thread ids,
// handle and context ids (replaced by the handle's event type and the context's rank), pids and
// GPU timer values.
std::vector<std::string> Canonical(const std::vector<RecLine>& lines) {
  std::map<std::string, std::string> type_of;  // handle id -> type
  std::map<std::string, int> ctx_of;           // handle id -> ctx id
  std::map<int, std::string> rank_of;          // ctx id -> rank
  for (const RecLine& l : lines) {
    if (l.verb == "init") rank_of[l.ctx] = l.Get("rank");
    if (l.verb == "start") {
      type_of[l.Get("h")] = l.Get("type");
      ctx_of[l.Get("h")] = l.ctx;
    }
  }
  auto ref = [&](const std::string& h) {
    if (h == "0" || h == "foreign") return h;
    auto it = type_of.find(h);
    return it == type_of.end() ? std::string("unknown") : it->second;
  };
  std::vector<std::string> out;
  for (const RecLine& l : lines) {
    int ctx = l.ctx;
    if (l.verb == "stop" || l.verb == "state") ctx = ctx_of[l.Get("h")];
    std::string s = l.verb + " thread=" + l.thread + " rank=" + rank_of[ctx];
    for (const auto& kv : l.kv) {
      const std::string& k = kv.first;
      if (k == "pid" || k == "ptimer" || k == "comm") continue;  // comm: a fresh unique id per run
      if (k == "h") {
        s += " h=" + ref(kv.second);
      } else if (k == "parent" || k == "pg") {
        s += " " + k + "=" + ref(kv.second);
      } else if (k == "arg" && l.verb == "state" && ref(l.Get("h")) == "KernelCh") {
        continue;  // pTimer of the kernel's end
      } else {
        s += " " + k + "=" + kv.second;
      }
    }
    out.push_back(s);
  }
  std::sort(out.begin(), out.end());
  return out;
}

class ChainTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }
  void TearDown() override { RunProgram({"/bin/rm", "-rf", dir_}, {}); }

  struct Run {
    std::vector<RecLine> rec;
    std::vector<std::string> colls;  // sentinel's coll records (empty without sentinel)
    RunResult result;
  };

  // `chained`: sentinel is NCCL's plugin and chains the recording plugin; else the recording
  // plugin is NCCL's plugin alone.
  Run Drive(const std::string& scenario, bool chained, Env env,
            const std::string& chain_value = "") {
    std::string tag = std::to_string(++runs_);
    std::string log = dir_ + "/rec." + tag + ".log";
    env.emplace_back("RECORDING_PLUGIN_LOG", log);
    env.emplace_back("FAKE_NCCL_RANKS_PER_NODE", "1");  // every peer across the NET: proxy events
    env.emplace_back("SENTINEL_SOCKET", "none");
    if (chained) {
      env.emplace_back("NCCL_PROFILER_PLUGIN", SENTINEL_PLUGIN_PATH);
      env.emplace_back("SENTINEL_CHAIN_PROFILER",
                       chain_value.empty() ? FAKE_NCCL_RECORDING_PLUGIN : chain_value);
      env.emplace_back("SENTINEL_DUMP", dir_ + "/dump." + tag + ".%p.jsonl");
      env.emplace_back("SENTINEL_LOG_LEVEL", "info");
      env.emplace_back("NCCL_DEBUG", "WARN");  // our warnings go through NCCL's logger
    } else {
      env.emplace_back("NCCL_PROFILER_PLUGIN", FAKE_NCCL_RECORDING_PLUGIN);
    }
    Run run;
    run.result = RunProgram({FAKE_NCCL_DRIVER, scenario, "2"}, env);
    EXPECT_EQ(run.result.exit_code, 0) << run.result.output;
    run.rec = ParseRecording(ReadFile(log));
    run.colls = Colls("dump." + tag + ".");
    return run;
  }

  // What is in `a` and not in `b` (sorted inputs), for readable failures.
  static std::string Missing(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    std::vector<std::string> d;
    std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(d));
    std::string out;
    for (size_t i = 0; i < d.size() && i < 10; ++i) out += "\n  " + d[i];
    return out;
  }

  // Sentinel's coll records without times and pids: what must not change with a chain.
  std::vector<std::string> Colls(const std::string& prefix) {
    std::vector<std::string> out;
    DIR* dir = opendir(dir_.c_str());
    for (struct dirent* e = readdir(dir); e != nullptr; e = readdir(dir)) {
      std::string name = e->d_name;
      if (name.rfind(prefix, 0) != 0) continue;
      for (const std::string& line : Lines(ReadFile(dir_ + "/" + name))) {
        if (JsonField(line, "type") != "coll") continue;
        std::string s;
        for (const char* k :
             {"rank", "func", "seq", "bytes", "datatype", "algo", "proto", "nchannels", "peer",
              "root", "proxy_send_bytes", "proxy_recv_bytes"}) {
          s += std::string(k) + "=" + JsonField(line, k) + " ";
        }
        out.push_back(s);
      }
    }
    closedir(dir);
    std::sort(out.begin(), out.end());
    return out;
  }

  // Sentinel alone (the reference for "our data").
  std::vector<std::string> SentinelAlone(const std::string& scenario, Env env) {
    std::string tag = std::to_string(++runs_);
    env.emplace_back("FAKE_NCCL_RANKS_PER_NODE", "1");
    env.emplace_back("SENTINEL_SOCKET", "none");
    env.emplace_back("NCCL_PROFILER_PLUGIN", SENTINEL_PLUGIN_PATH);
    env.emplace_back("SENTINEL_DUMP", dir_ + "/dump." + tag + ".%p.jsonl");
    RunResult r = RunProgram({FAKE_NCCL_DRIVER, scenario, "2"}, env);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return Colls("dump." + tag + ".");
  }

  void ExpectSameEvents(const std::string& scenario, const Env& env) {
    Run alone = Drive(scenario, false, env);
    Run chained = Drive(scenario, true, env);
    ASSERT_FALSE(alone.rec.empty());
    std::vector<std::string> a = Canonical(alone.rec);
    std::vector<std::string> c = Canonical(chained.rec);
    EXPECT_EQ(c.size(), a.size()) << scenario;
    EXPECT_TRUE(c == a) << scenario << "\nonly alone:" << Missing(a, c)
                        << "\nonly chained:" << Missing(c, a);
    EXPECT_EQ(chained.colls, SentinelAlone(scenario, env)) << scenario;
    if (scenario == "kinds") {
      EXPECT_EQ(chained.colls.size(), 22u);  // 11 records per rank
    }
  }

  std::string dir_;
  int runs_ = 0;
};

const Env kV6 = {{"FAKE_NCCL_PROFILER_MAX_VERSION", "6"}};
const Env kV5 = {};
const Env kV4 = {{"FAKE_NCCL_PROFILER_VERSION", "4"}};

int Count(const std::vector<RecLine>& lines, const std::string& verb, const std::string& type) {
  return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const RecLine& l) {
    return l.verb == verb && l.Get("type") == type;
  }));
}

TEST_F(ChainTest, SameEventsUnderEveryAbiVersion) {
  for (const Env* env : {&kV6, &kV5, &kV4}) {
    ExpectSameEvents("kinds", *env);
  }
  Run v4 = Drive("allreduce", true, kV4);
  ASSERT_FALSE(v4.rec.empty());
  EXPECT_EQ(v4.rec[0].Get("v"), "4");
  Run v6 = Drive("allreduce", true, kV6);
  ASSERT_FALSE(v6.rec.empty());
  EXPECT_EQ(v6.rec[0].Get("v"), "6");
}

TEST_F(ChainTest, GroupsGraphsAndNonblocking) {
  for (const char* scenario : {"group", "graph", "nonblocking", "split"}) {
    ExpectSameEvents(scenario, kV5);
  }
}

// The masks differ both ways: each side gets only what NCCL emits for its own mask.
TEST_F(ChainTest, MasksAreMergedButEachSideSeesItsOwnEvents) {
  // The chained plugin wants proxy detail only (ancestors implied), sentinel its default.
  Env proxy_only = kV5;
  proxy_only.emplace_back("RECORDING_PLUGIN_MASK", "0x18");
  ExpectSameEvents("kinds", proxy_only);
  Run r = Drive("kinds", true, proxy_only);
  EXPECT_EQ(Count(r.rec, "start", "KernelCh"), 0);  // sentinel's KernelCh is not forwarded
  EXPECT_GT(Count(r.rec, "start", "ProxyStep"), 0);
  // The chained plugin wants everything, sentinel the minimal preset.
  Env minimal = kV5;
  minimal.emplace_back("SENTINEL_EVENTS", "minimal");
  ExpectSameEvents("kinds", minimal);
}

TEST_F(ChainTest, FailingChainedPluginHarmsNeitherHostNorOurData) {
  Env failing = kV5;
  failing.emplace_back("RECORDING_PLUGIN_RESULT", "3");  // ncclInternalError from every callback
  Run r = Drive("kinds", true, failing);
  EXPECT_EQ(r.colls, SentinelAlone("kinds", kV5));
  // Its init failed: nothing else is forwarded to it, and the log says so once.
  EXPECT_EQ(Count(r.rec, "start", "Coll"), 0);
  EXPECT_NE(r.result.output.find("chained profiler plugin recording: init failed"),
            std::string::npos)
      << r.result.output;
}

TEST_F(ChainTest, MissingChainedPluginIsOneLogLine) {
  Run r = Drive("kinds", true, kV5, "/nonexistent/libnccl-profiler-nothing.so");
  EXPECT_EQ(r.colls, SentinelAlone("kinds", kV5));
  EXPECT_NE(r.result.output.find(
                "SENTINEL_CHAIN_PROFILER=/nonexistent/libnccl-profiler-nothing.so: cannot load "
                "(tried /nonexistent/libnccl-profiler-nothing.so"),
            std::string::npos)
      << r.result.output;
  EXPECT_NE(r.result.output.find("; no chained plugin"), std::string::npos) << r.result.output;
  // Chaining sentinel to itself is refused the same way.
  Run self = Drive("allreduce", true, kV5, SENTINEL_PLUGIN_PATH);
  EXPECT_NE(self.result.output.find(std::string("SENTINEL_CHAIN_PROFILER=") + SENTINEL_PLUGIN_PATH +
                                    ": no usable ncclProfiler_v5 table (or it is sentinel itself); "
                                    "no chained plugin"),
            std::string::npos)
      << self.result.output;
  EXPECT_TRUE(self.rec.empty());
}

// The name rule of NCCL_PROFILER_PLUGIN (docs/nccl-facts.md "4.1 Finding the library"): "recording"
// finds libnccl-profiler-recording.so.
TEST_F(ChainTest, ShortNameFollowsNcclRule) {
  std::string lib_dir = FAKE_NCCL_RECORDING_PLUGIN;
  lib_dir = lib_dir.substr(0, lib_dir.rfind('/'));
  Env env = kV5;
  env.emplace_back("LD_LIBRARY_PATH", lib_dir);
  Run r = Drive("allreduce", true, env, "recording");
  EXPECT_GT(Count(r.rec, "start", "Coll"), 0) << r.result.output;
}

}  // namespace
}  // namespace sentinel::testing
