// Fidelity of the fake NCCL against the fact sheet, observed through the recording plugin: call
// order and threads of docs/nccl-facts.md "5.3 Call sequences" A/B, special cases of
// docs/nccl-facts.md "5.5 Special cases", plugin loading of
// docs/nccl-facts.md "4.1 Finding the library", the ABI adapters, commHash
// (docs/nccl-facts.md "10.4 The communicator hash", computed here by hand) and NCCL-format log
// lines (docs/nccl-facts.md "8. NCCL log lines").
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "tests/integration/fake_nccl/test_util.h"

namespace sentinel::testing {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// docs/nccl-facts.md "10.4 The communicator hash", written independently of the fake's
// implementation.
uint64_t ReferenceHash(const std::vector<std::vector<unsigned char>>& strings) {
  uint64_t a0 = 1;
  uint64_t a1 = 1;
  for (const auto& s : strings) {
    a0 ^= s.size();
    for (size_t off = 0; off < s.size(); off += 8) {
      unsigned char buf[8] = {0};
      memcpy(buf, s.data() + off, std::min<size_t>(8, s.size() - off));
      uint64_t chunk = 0;
      for (int i = 7; i >= 0; --i) chunk = (chunk << 8) | buf[i];
      a0 += a1;
      a1 ^= a0;
      a0 ^= a0 >> 31;
      a0 *= 0x9de62bbc8cef3ce3ULL;
      a1 ^= a1 >> 32;
      a1 *= 0x485cd6311b599e79ULL;
      a0 += chunk;
    }
  }
  uint64_t h = a0;
  h ^= h >> 31;
  h *= 0xbac3bd562846de6bULL;
  h += a1;
  h ^= h >> 32;
  h *= 0x995a187a14e7b445ULL;
  return h;
}

class FidelityTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }
  void TearDown() override { RunProgram({"/bin/rm", "-rf", dir_}, {}); }

  // Runs a driver scenario under the recording plugin; returns the parsed log.
  std::vector<RecLine> Record(const std::string& scenario, Env env, int ranks = 2,
                              RunResult* result = nullptr) {
    std::string log = dir_ + "/rec." + scenario + "." + std::to_string(++runs_) + ".log";
    env.emplace_back("NCCL_PROFILER_PLUGIN", FAKE_NCCL_RECORDING_PLUGIN);
    env.emplace_back("RECORDING_PLUGIN_LOG", log);
    RunResult r = RunProgram({FAKE_NCCL_DRIVER, scenario, std::to_string(ranks)}, env);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    if (result != nullptr) *result = r;
    return ParseRecording(ReadFile(log));
  }

  std::string dir_;
  int runs_ = 0;
};

// Handle id -> event type, from the start lines.
std::map<std::string, std::string> Types(const std::vector<RecLine>& lines) {
  std::map<std::string, std::string> t;
  for (const RecLine& l : lines) {
    if (l.verb == "start") t[l.Get("h")] = l.Get("type");
  }
  return t;
}

// "start:Coll", "stop:Coll", "state:GroupApi:23" for the lines selected by `keep`.
template <typename Keep>
std::vector<std::string> Signature(const std::vector<RecLine>& lines, Keep keep) {
  std::map<std::string, std::string> types = Types(lines);
  std::vector<std::string> sig;
  for (const RecLine& l : lines) {
    if (!keep(l)) continue;
    if (l.verb == "start") sig.push_back("start:" + l.Get("type"));
    if (l.verb == "stop") sig.push_back("stop:" + types[l.Get("h")]);
    if (l.verb == "state") sig.push_back("state:" + types[l.Get("h")] + ":" + l.Get("state"));
  }
  return sig;
}

int Count(const std::vector<RecLine>& lines, const std::string& verb, const std::string& type) {
  return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const RecLine& l) {
    return l.verb == verb && l.Get("type") == type;
  }));
}

// Context ids follow init order, which is concurrent under InitAll: look rank 0's up.
int RankZeroCtx(const std::vector<RecLine>& lines) {
  for (const RecLine& l : lines) {
    if (l.verb == "init" && l.Get("rank") == "0") return l.ctx;
  }
  return -1;
}

long MainTid(const std::vector<RecLine>& lines) {
  for (const RecLine& l : lines) {
    if (l.verb == "init") return l.Num("pid");
  }
  return -1;
}

TEST_F(FidelityTest, StandaloneAllReduceCallOrderAndThreads) {
  // docs/nccl-facts.md "5.3 Call sequences" A
  auto lines = Record("allreduce", {{"FAKE_NCCL_NODES", "2"}, {"RECORDING_PLUGIN_MASK", "4095"}});
  long app = MainTid(lines);
  std::map<std::string, std::string> types = Types(lines);
  // Application thread, first AllReduce (rank 0's context): exact sequence.
  std::vector<RecLine> app_lines;
  for (const RecLine& l : lines) {
    if (l.tid == app) app_lines.push_back(l);
  }
  std::vector<std::string> sig = Signature(app_lines, [](const RecLine&) { return true; });
  std::vector<std::string> expected = {
      "start:GroupApi",    "state:GroupApi:23",  "start:CollApi",     "stop:CollApi",
      "state:GroupApi:24", "start:KernelLaunch", "stop:KernelLaunch", "start:Group",
      "start:Coll",        "stop:Coll",          "stop:Group",        "stop:GroupApi"};
  ASSERT_GE(sig.size(), 2 * expected.size());
  EXPECT_EQ(std::vector<std::string>(sig.begin(), sig.begin() + 12), expected);
  EXPECT_EQ(std::vector<std::string>(sig.begin() + 12, sig.begin() + 24), expected);
  // Parents: CollApi under GroupApi; Coll under CollApi with parentGroup = Group.
  std::string group_api, coll_api, group, coll;
  for (const RecLine& l : app_lines) {
    if (l.verb != "start" || l.ctx != RankZeroCtx(lines)) continue;
    if (l.Get("type") == "GroupApi") {
      group_api = l.Get("h");
      EXPECT_EQ(l.Get("depth"), "1");
    }
    if (l.Get("type") == "CollApi") {
      coll_api = l.Get("h");
      EXPECT_EQ(l.Get("parent"), group_api);
      EXPECT_EQ(l.Get("func"), "AllReduce");
      EXPECT_EQ(l.Get("count"), "262144");
    }
    if (l.Get("type") == "Group") group = l.Get("h");
    if (l.Get("type") == "Coll") {
      coll = l.Get("h");
      EXPECT_EQ(l.Get("parent"), coll_api);
      EXPECT_EQ(l.Get("pg"), group);
      EXPECT_EQ(l.Get("seq"), "0");
      EXPECT_EQ(l.Get("rank"), "0");
    }
  }
  ASSERT_FALSE(coll.empty());
  // Proxy thread of rank 0: every proxy/kernel event there, none on the app thread.
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  long long mono_now = static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
  std::vector<RecLine> proxy;
  for (const RecLine& l : lines) {
    std::string type = l.verb == "start" ? l.Get("type") : types[l.Get("h")];
    bool proxy_type = type == "ProxyOp" || type == "ProxyStep" || type == "KernelCh";
    if (proxy_type) {
      EXPECT_NE(l.tid, app);
      EXPECT_EQ(l.thread.rfind("NCCL_Progress", 0), 0u) << l.thread;
    }
    if (l.thread == "NCCL_Progress_0") proxy.push_back(l);
  }
  std::vector<std::string> psig = Signature(proxy, [](const RecLine&) { return true; });
  // Append window: ProxyCtrl 17, four ProxyOp starts (2 channels x send/recv), 18, stop.
  auto first = std::find(psig.begin(), psig.end(), "state:ProxyCtrl:17");
  ASSERT_NE(first, psig.end());
  std::vector<std::string> window(first, first + 7);
  EXPECT_EQ(window, (std::vector<std::string>{"state:ProxyCtrl:17", "start:ProxyOp",
                                              "start:ProxyOp", "start:ProxyOp", "start:ProxyOp",
                                              "state:ProxyCtrl:18", "stop:ProxyCtrl"}));
  std::map<std::string, std::vector<std::string>> per_handle;
  for (const RecLine& l : proxy) {
    if (l.verb == "start" && l.Get("type") == "ProxyOp") {
      EXPECT_EQ(l.Get("parent"), coll);
      EXPECT_EQ(l.Num("pid"), app);
    }
    if (l.verb == "start" && l.Get("type") == "KernelCh") {
      EXPECT_EQ(l.Get("parent"), coll);
      // %globaltimer runs on its own base, about 1e12 ns ahead of CLOCK_MONOTONIC.
      EXPECT_GT(l.Num("ptimer"), mono_now + 500000000000LL);
    }
    if (l.verb == "state") per_handle[l.Get("h")].push_back(l.Get("state"));
    if (l.verb == "stop") per_handle[l.Get("h")].push_back("stop");
  }
  int sends = 0, recvs = 0, kernels = 0;
  for (const RecLine& l : proxy) {
    if (l.verb != "start") continue;
    const auto& seq = per_handle[l.Get("h")];
    if (l.Get("type") == "ProxyStep") {
      bool send = seq.size() == 4 && seq[0] == "8";
      if (send) {
        EXPECT_EQ(seq, (std::vector<std::string>{"8", "20", "9", "stop"}));
        ++sends;
      } else {
        EXPECT_EQ(seq, (std::vector<std::string>{"10", "11", "12", "stop"}));
        ++recvs;
      }
    }
    if (l.Get("type") == "ProxyOp") {
      EXPECT_EQ(seq, (std::vector<std::string>{"19", "stop"}));
    }
    if (l.Get("type") == "KernelCh") {
      EXPECT_EQ(seq, (std::vector<std::string>{"22", "stop"}));
      ++kernels;
    }
  }
  EXPECT_EQ(sends, 2);
  EXPECT_EQ(recvs, 2);
  EXPECT_EQ(kernels, 2);
}

TEST_F(FidelityTest, UserGroupSharesOneGroupApi) {  // docs/nccl-facts.md "5.3 Call sequences" B
  auto lines = Record("group", {});
  long app = MainTid(lines);
  std::vector<std::string> sig = Signature(lines, [&](const RecLine& l) { return l.tid == app; });
  std::vector<std::string> expected = {
      "start:GroupApi",    "state:GroupApi:23", "start:CollApi",     "stop:CollApi",
      "start:CollApi",     "stop:CollApi",      "start:CollApi",     "stop:CollApi",
      "start:CollApi",     "stop:CollApi",      "state:GroupApi:24", "start:KernelLaunch",
      "stop:KernelLaunch", "start:Group",       "start:Coll",        "start:Coll",
      "stop:Coll",         "stop:Coll",         "stop:Group",        "start:KernelLaunch",
      "stop:KernelLaunch", "start:Group",       "start:Coll",        "start:Coll",
      "stop:Coll",         "stop:Coll",         "stop:Group",        "stop:GroupApi"};
  EXPECT_EQ(sig, expected);
  for (const RecLine& l : lines) {
    if (l.verb == "start" && l.Get("type") == "GroupApi") {
      EXPECT_EQ(l.Get("depth"), "2");
      EXPECT_EQ(l.ctx, RankZeroCtx(lines));  // the first operation's communicator
    }
  }
}

TEST_F(FidelityTest, NestedGroupDepth) {
  auto lines = Record("nested", {});
  EXPECT_EQ(Count(lines, "start", "GroupApi"), 1);
  EXPECT_EQ(Count(lines, "start", "Coll"), 4);
  for (const RecLine& l : lines) {
    if (l.verb == "start" && l.Get("type") == "GroupApi") {
      EXPECT_EQ(l.Get("depth"), "3");
    }
  }
}

TEST_F(FidelityTest, InitThreads) {  // docs/nccl-facts.md "4.2 `init`"
  auto main_lines = Record("initrank_main", {}, 1);
  ASSERT_FALSE(main_lines.empty());
  EXPECT_EQ(main_lines[0].verb, "init");
  EXPECT_EQ(main_lines[0].tid, main_lines[0].Num("pid"));  // blocking init: the caller's thread
  auto all_lines = Record("allreduce", {});
  std::set<long> init_tids;
  for (const RecLine& l : all_lines) {
    if (l.verb == "init") {
      EXPECT_NE(l.tid, l.Num("pid"));  // InitAll: internal threads, one per communicator
      init_tids.insert(l.tid);
    }
  }
  EXPECT_EQ(init_tids.size(), 2u);
  EXPECT_EQ(std::count_if(all_lines.begin(), all_lines.end(),
                          [](const RecLine& l) { return l.verb == "finalize"; }),
            2);
}

TEST_F(FidelityTest, CommHashMatchesHandComputedVector) {
  // docs/nccl-facts.md "10.4 The communicator hash"
  std::vector<unsigned char> id(128, 7);
  uint64_t expected = ReferenceHash({id});
  EXPECT_EQ(expected, 0x2258c19d731308ebULL);  // pinned: the reference itself must not drift
  RunResult r;
  auto lines = Record("split", {{"DRIVER_UNIQUE_ID_BYTE", "7"}, {"NCCL_DEBUG", "INFO"}}, 2, &r);
  char hex[32];
  snprintf(hex, sizeof(hex), "0x%016llx", static_cast<unsigned long long>(expected));
  int parents = 0;
  for (const RecLine& l : lines) {
    if (l.verb == "init" && l.Get("comm") == hex) ++parents;
  }
  EXPECT_EQ(parents, 2);
  snprintf(hex, sizeof(hex), "commId 0x%llx - Init START",
           static_cast<unsigned long long>(expected));
  EXPECT_NE(r.output.find(hex), std::string::npos);
  // Split: digest of (parent hash, splitCount=1, color) as three strings.
  for (int color = 0; color < 2; ++color) {
    std::vector<unsigned char> h(8), c(4), k(4);
    memcpy(h.data(), &expected, 8);
    int split_count = 1;
    memcpy(c.data(), &split_count, 4);
    memcpy(k.data(), &color, 4);
    uint64_t child = ReferenceHash({h, c, k});
    if (color == 0) {
      EXPECT_EQ(child, 0x95ec41b4c672ed61ULL);
    }
    snprintf(hex, sizeof(hex), "0x%016llx", static_cast<unsigned long long>(child));
    int found = 0;
    for (const RecLine& l : lines) {
      if (l.verb == "init" && l.Get("comm") == hex) ++found;
    }
    EXPECT_EQ(found, 1) << "color " << color;
  }
  EXPECT_NE(r.output.find("splitCount 1 color 1 key 1- Init START"), std::string::npos) << r.output;
}

TEST_F(FidelityTest, LogLinesToDebugFile) {
  // docs/nccl-facts.md "8.1 Line prefix", "8.2 Initialisation sequence", "8.5 `NCCL_DEBUG`"
  std::string pattern = dir_ + "/nccl.%h.%p.log";
  RunResult r = RunProgram({FAKE_NCCL_DRIVER, "init_only", "2"},
                           {{"NCCL_DEBUG", "INFO"},
                            {"NCCL_DEBUG_FILE", pattern},
                            {"FAKE_NCCL_NODES", "2"},
                            {"NCCL_PROFILER_PLUGIN", FAKE_NCCL_RECORDING_PLUGIN}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("NCCL INFO"), std::string::npos);  // went to the file, not stdout
  std::string files = RunProgram({"/bin/ls", dir_}, {}).output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(files, m, std::regex("nccl\\.([^.\\s]+)\\.([0-9]+)\\.log")))
      << files;
  std::string log = ReadFile(dir_ + "/" + m[0].str());
  std::string host = m[1].str();
  std::string pid = m[2].str();
  for (const std::string& line : Lines(log)) {
    EXPECT_TRUE(std::regex_match(
        line, std::regex("^" + host + ":" + pid + ":[0-9]+ \\[[0-9]+\\] NCCL INFO .+")))
        << line;
  }
  for (const char* needle :
       {"NCCL INFO NCCL version 2.28.9+cuda13.0", "NCCL_PROFILER_PLUGIN set by environment to ",
        "NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>", "Using network IB",
        "PROFILER/Plugin: Loaded recording (v5)", "Successfully loaded external profiler plugin /",
        " - Init START", " - Init COMPLETE", "nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
        "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
        "Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA", " - Destroy COMPLETE",
        "PROFILER/Plugin: Closing profiler plugin recording"}) {
    EXPECT_NE(log.find(needle), std::string::npos) << needle;
  }
  EXPECT_TRUE(std::regex_search(
      log, std::regex("ncclCommInitRank comm 0x[0-9a-f]+ rank 0 nranks 2 cudaDev 0 "
                      "nvmlDev 0 busId [0-9a-f]+ commId 0x[0-9a-f]+ - Init START")));
}

struct NetCase {
  Env env;
  std::vector<std::string> expect;
  std::vector<std::string> reject;
  int exit_code;
};

TEST_F(FidelityTest, NetworkSelectionFollowsNcclEnvSemantics) {
  // docs/nccl-facts.md "7.2 `NCCL_NET`", "8.3 Transport placement lines"
  std::vector<NetCase> cases = {
      {{{"NCCL_IB_DISABLE", "1"}},
       {"NET/Socket : Using [0]eth0:10.0.0.1<0>", "Using network Socket",
        "[send] via NET/Socket/0\n"},
       {"NET/IB", "GDRDMA"},
       0},
      {{{"FAKE_NCCL_NET", "socket"}},
       {"NET/IB : No device found.", "Failed to initialize NET plugin IB", "Using network Socket"},
       {"GDRDMA"},
       0},
      {{{"NCCL_NET", "Socket"}}, {"Using network Socket"}, {"Using network IB"}, 0},
      {{{"FAKE_NCCL_NET", "roce"},
        {"FAKE_NCCL_NICS", "mlx5_0,mlx5_1"},
        {"FAKE_NCCL_RELAXED_ORDERING", "1"}},
       {"NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB"},
       {},
       0},
      {{{"FAKE_NCCL_NICS", "mlx5_0,mlx5_1"}, {"NCCL_IB_HCA", "mlx5_1"}},
       {"NET/IB : Using [0]mlx5_1:1/IB ;"},
       {"mlx5_0"},
       0},
      {{{"FAKE_NCCL_GDR", "off"}}, {"[send] via NET/IB/0\n"}, {"GDRDMA"}, 0},
      {{{"FAKE_NCCL_NET", "aws-ofi"}},
       {"Initialized NET plugin aws-ofi", "Using network aws-ofi"},
       {},
       0},
      {{{"FAKE_NCCL_NODES", "1"}, {"FAKE_NCCL_INTRA", "shm"}},
       {"Channel 00 : 0[0] -> 1[1] via SHM/direct/direct"},
       {"via NET"},
       0},
      {{{"FAKE_NCCL_NODES", "1"}}, {"Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM"}, {"via NET"}, 0},
      {{{"NCCL_NET", "IB"}, {"FAKE_NCCL_NET", "socket"}},
       {"NCCL WARN Failed to initialize any NET plugin"},
       {"Init COMPLETE"},
       3},
  };
  for (const NetCase& c : cases) {
    Env env = c.env;
    env.emplace_back("NCCL_DEBUG", "INFO");
    env.emplace_back("NCCL_DEBUG_SUBSYS", "ALL");
    if (std::none_of(env.begin(), env.end(),
                     [](const auto& kv) { return kv.first == "FAKE_NCCL_NODES"; })) {
      env.emplace_back("FAKE_NCCL_NODES", "2");
    }
    RunResult r = RunProgram({FAKE_NCCL_DRIVER, "init_only", "2"}, env);
    std::string label = c.env.front().first + "=" + c.env.front().second;
    EXPECT_EQ(r.exit_code, c.exit_code) << label << "\n" << r.output;
    for (const std::string& e : c.expect)
      EXPECT_NE(r.output.find(e), std::string::npos) << label << ": " << e;
    for (const std::string& e : c.reject)
      EXPECT_EQ(r.output.find(e), std::string::npos) << label << ": " << e;
  }
}

TEST_F(FidelityTest, WarnLevelFormat) {
  // docs/nccl-facts.md "8.1 Line prefix": version line without prefix, WARN after an empty line
  RunResult r = RunProgram({FAKE_NCCL_DRIVER, "init_only", "2"},
                           {{"NCCL_DEBUG", "WARN"}, {"NCCL_NET", "IB"}, {"NCCL_IB_DISABLE", "1"}});
  EXPECT_EQ(r.exit_code, 3);
  std::vector<std::string> lines = Lines(r.output);
  ASSERT_GE(lines.size(), 3u) << r.output;
  EXPECT_EQ(lines[0], "NCCL version 2.28.9+cuda13.0");
  EXPECT_EQ(lines[1], "");
  EXPECT_TRUE(std::regex_match(
      lines[2], std::regex("^\\[[0-9-]+ [0-9:]+\\] [^:]+:[0-9]+:[0-9]+ \\[[0-9]+\\] "
                           "fake_nccl\\.cc:[0-9]+ NCCL WARN Failed to initialize any NET plugin$")))
      << lines[2];
  EXPECT_EQ(r.output.find("NCCL INFO"), std::string::npos);
}

TEST_F(FidelityTest, PluginNameResolutionAndStickyFailure) {
  // docs/nccl-facts.md "4.1 Finding the library"
  std::string lib_dir = FAKE_NCCL_RECORDING_PLUGIN;
  lib_dir = lib_dir.substr(0, lib_dir.rfind('/'));
  std::string log = dir_ + "/short.log";
  RunResult r =
      RunProgram({FAKE_NCCL_DRIVER, "allreduce", "2"}, {{"NCCL_PROFILER_PLUGIN", "recording"},
                                                        {"LD_LIBRARY_PATH", lib_dir},
                                                        {"RECORDING_PLUGIN_LOG", log},
                                                        {"NCCL_DEBUG", "INFO"}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("PROFILER/Plugin: Loaded recording (v5)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Successfully loaded external profiler plugin " + lib_dir +
                          "/libnccl-profiler-recording.so"),
            std::string::npos);
  r = RunProgram({FAKE_NCCL_DRIVER, "multicomm", "2"},
                 {{"NCCL_PROFILER_PLUGIN", "nosuch"}, {"NCCL_DEBUG", "INFO"}});
  EXPECT_EQ(r.exit_code, 0);
  std::string nf = "PROFILER/Plugin: Could not find: nosuch libnccl-profiler-nosuch.so";
  size_t first = r.output.find(nf);
  EXPECT_NE(first, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(nf, first + 1), std::string::npos);  // sticky: 4 comms, one attempt
  r = RunProgram({FAKE_NCCL_DRIVER, "allreduce", "2"},
                 {{"NCCL_PROFILER_PLUGIN", "none"}, {"NCCL_DEBUG", "INFO"}});
  EXPECT_EQ(r.output.find("PROFILER/Plugin"), std::string::npos);
  r = RunProgram({FAKE_NCCL_DRIVER, "allreduce", "2"}, {{"NCCL_DEBUG", "INFO"}});  // unset
  EXPECT_NE(r.output.find("PROFILER/Plugin: Could not find: libnccl-profiler.so"),
            std::string::npos);
  // Refcount to zero closes; the next communicator loads afresh.
  auto lines = Record("reload", {{"NCCL_DEBUG", "INFO"}}, 2, &r);
  size_t loaded = r.output.find("Loaded recording (v5)");
  size_t closing = r.output.find("Closing profiler plugin recording");
  ASSERT_NE(closing, std::string::npos);
  EXPECT_LT(loaded, closing);
  EXPECT_NE(r.output.find("Loaded recording (v5)", closing), std::string::npos);
}

TEST_F(FidelityTest, AbiVersionsAndV4Adapter) {
  // docs/nccl-facts.md "1. Version matrix", "3.8 What older plugin ABIs see"
  auto v6 = Record("allreduce", {{"FAKE_NCCL_PROFILER_MAX_VERSION", "6"}});
  ASSERT_FALSE(v6.empty());
  EXPECT_EQ(v6[0].Get("v"), "6");
  auto v5 = Record("allreduce", {});
  EXPECT_EQ(v5[0].Get("v"), "5");
  auto v4 = Record("allreduce", {{"FAKE_NCCL_PROFILER_VERSION", "4"}});
  EXPECT_EQ(v4[0].Get("v"), "4");
  for (const char* type : {"GroupApi", "CollApi", "P2pApi", "KernelLaunch"}) {
    EXPECT_EQ(Count(v4, "start", type), 0) << type;
  }
  std::string group;
  for (const RecLine& l : v4) {
    if (l.verb == "start" && l.Get("type") == "Group" && l.ctx == RankZeroCtx(v4))
      group = l.Get("h");
    if (l.verb == "start" && l.Get("type") == "Coll" && l.ctx == RankZeroCtx(v4)) {
      EXPECT_EQ(l.Get("parent"), group);
    }
    if (l.verb == "state") {
      EXPECT_TRUE(l.Get("state") != "23" && l.Get("state") != "24");
    }
  }
  EXPECT_EQ(Count(v4, "start", "Coll"), 2);
}

TEST_F(FidelityTest, CollectiveKindsAndDecomposition) {  // docs/nccl-facts.md "5.5 Special cases"
  auto lines = Record("kinds", {});
  int alltoall_api = 0;
  int p2p_api = 0;
  for (const RecLine& l : lines) {
    if (l.verb != "start") continue;
    if (l.Get("type") == "CollApi" && l.Get("func") == "AlltoAll") ++alltoall_api;
    if (l.Get("type") == "P2pApi") ++p2p_api;
    if (l.Get("type") == "Coll" && (l.Get("func") == "AllGather" || l.Get("func") == "Broadcast")) {
      EXPECT_EQ(l.Get("count"), "16384");  // bytes
      EXPECT_EQ(l.Get("dtype"), "ncclInt8");
    }
    if (l.Get("type") == "CollApi" && l.Get("func") == "AllGather") {
      EXPECT_EQ(l.Get("count"), "4096");
      EXPECT_EQ(l.Get("dtype"), "ncclFloat32");
    }
  }
  EXPECT_EQ(alltoall_api, 0);
  EXPECT_EQ(Count(lines, "start", "CollApi"), 10);  // 5 kinds x 2 ranks
  EXPECT_EQ(Count(lines, "start", "Coll"), 10);
  EXPECT_EQ(p2p_api, 2 * 2 + 2 * 2 * 2);  // sendrecv: 2 per rank; AlltoAll: 2n pieces per rank
  EXPECT_EQ(Count(lines, "start", "P2p"), p2p_api);
  // Single rank: no collective events, Send/Recv to self still emits P2p.
  auto single = Record("single", {}, 1);
  EXPECT_EQ(Count(single, "start", "CollApi"), 0);
  EXPECT_EQ(Count(single, "start", "Coll"), 0);
  EXPECT_EQ(Count(single, "start", "P2p"), 2);
  // count 0: nothing at all.
  auto zero = Record("count0", {});
  EXPECT_EQ(
      std::count_if(zero.begin(), zero.end(), [](const RecLine& l) { return l.verb == "start"; }),
      0);
}

TEST_F(FidelityTest, GraphReplaysFromHostCallbackThread) {
  // docs/nccl-facts.md "5.4 Threads and concurrency", "5.5 Special cases"
  auto lines = Record("graph", {});
  std::set<std::string> capture_coll_api;
  for (const RecLine& l : lines) {
    if (l.verb == "start" && (l.Get("type") == "CollApi" || l.Get("type") == "GroupApi")) {
      EXPECT_EQ(l.Get("captured"), "1");
      if (l.Get("type") == "CollApi") capture_coll_api.insert(l.Get("h"));
    }
  }
  EXPECT_EQ(capture_coll_api.size(), 2u);
  EXPECT_EQ(Count(lines, "start", "KernelLaunch"), 2);
  std::map<int, std::vector<std::string>> seqs;
  for (const RecLine& l : lines) {
    if (l.verb == "start" && l.Get("type") == "Coll") {
      EXPECT_EQ(l.thread, "cuda-EvtHandlr");
      EXPECT_EQ(capture_coll_api.count(l.Get("parent")), 1u);  // stopped long ago, at capture
      seqs[l.ctx].push_back(l.Get("seq"));
    }
  }
  EXPECT_EQ(seqs[RankZeroCtx(lines)],
            (std::vector<std::string>{"0", "1", "2"}));  // KernelCh on: per replay
  // Intra-node without KernelCh: replays emit nothing (issue #1805).
  auto quiet = Record("graph", {{"RECORDING_PLUGIN_MASK", "0x302"}, {"FAKE_NCCL_NODES", "1"}});
  EXPECT_EQ(Count(quiet, "start", "Coll"), 0);
  EXPECT_EQ(Count(quiet, "start", "CollApi"), 2);
}

TEST_F(FidelityTest, NonblockingChildrenStartAfterGroupApiStops) {
  // docs/nccl-facts.md "5.4 Threads and concurrency"
  auto lines = Record("nonblocking", {});
  long app = MainTid(lines);
  (void)app;
  std::map<std::string, std::string> types = Types(lines);
  std::map<std::string, size_t> group_api_stop;
  std::map<std::string, long> group_api_tid;
  std::string last_group_api;
  int launches = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const RecLine& l = lines[i];
    if (l.verb == "start" && l.Get("type") == "GroupApi") {
      last_group_api = l.Get("h");
      group_api_tid[l.Get("h")] = l.tid;
    }
    if (l.verb == "stop" && types[l.Get("h")] == "GroupApi") group_api_stop[l.Get("h")] = i;
    if (l.verb == "start" && l.Get("type") == "KernelLaunch") {
      ++launches;
      std::string parent = l.Get("parent");
      ASSERT_TRUE(group_api_stop.count(parent)) << "KernelLaunch before its GroupApi stopped";
      EXPECT_LT(group_api_stop[parent], i);
      EXPECT_NE(l.tid, group_api_tid[parent]);  // launched on a spawned thread
    }
  }
  EXPECT_EQ(launches, 2);
  for (const RecLine& l : lines) {
    if (l.verb == "init") {
      EXPECT_EQ(l.Get("name"), "nb");
    }
  }
}

TEST_F(FidelityTest, PxnOpsCarryForeignPid) {  // docs/nccl-facts.md "5.5 Special cases"
  auto lines = Record("allreduce", {{"FAKE_NCCL_PXN", "1"}, {"FAKE_NCCL_NODES", "2"}});
  int foreign = 0;
  for (const RecLine& l : lines) {
    if (l.verb == "start" && l.Get("type") == "ProxyOp" && l.Get("parent") == "foreign") {
      ++foreign;
      EXPECT_NE(l.Num("pid"), MainTid(lines));
    }
  }
  EXPECT_EQ(foreign, 2);
}

}  // namespace
}  // namespace sentinel::testing
