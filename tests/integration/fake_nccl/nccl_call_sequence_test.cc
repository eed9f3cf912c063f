// The one description of NCCL's calls for a collective
// (tests/fakes/fake_nccl/nccl_call_sequence.h), which sentinel_collective_benchmark replays:
// checked against the facts (docs/nccl-facts.md "4.5 The activation mask", "5.3 Call sequences" A,
// docs/nccl-facts.md "5.6 Pitfalls" item 3), and against the fake NCCL's own calls as the recording
// plugin saw them, at NCCL Inspector's mask (Coll | KernelCh), at sentinel's default mask and at
// `all`, over 1, 2, 4 and 8 channels: same types, same order, same parents. If the benchmark's
// sequence or the fake NCCL drifts, this fails.
#include "tests/fakes/fake_nccl/nccl_call_sequence.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "plugin/base/event_mask.h"
#include "tests/integration/fake_nccl/test_util.h"

namespace sentinel::testing {
namespace {

namespace seq = nccl_seq;

constexpr int kInspectorMask = kSentinelProfileColl | kSentinelProfileKernelCh;
constexpr int kDefaultMask = static_cast<int>(plugin::kMaskDefault) & 0xFFF;  // v5 bits
constexpr int kAllMask = static_cast<int>(plugin::kMaskAll) & 0xFFF;

const char* TypeName(uint32_t type) {
  switch (type) {
    case kSentinelProfileGroup:
      return "Group";
    case kSentinelProfileColl:
      return "Coll";
    case kSentinelProfileProxyOp:
      return "ProxyOp";
    case kSentinelProfileProxyStep:
      return "ProxyStep";
    case kSentinelProfileKernelCh:
      return "KernelCh";
    case kSentinelProfileGroupApi:
      return "GroupApi";
    case kSentinelProfileCollApi:
      return "CollApi";
    case kSentinelProfileKernelLaunch:
      return "KernelLaunch";
    default:
      return "Other";
  }
}

// One thread's calls, as text: "start Coll parent=CollApi#0 pg=Group#0", "state GroupApi#0 23",
// "stop KernelCh#1". Handles are named Type#k, the k-th start of that type in the whole sequence
// (application thread first, then proxy thread), every start answered with a non-null handle.
std::vector<std::string> Render(const seq::Sequence& s, seq::Thread thread) {
  std::vector<std::string> names(static_cast<size_t>(s.handles));
  std::map<std::string, int> count;
  std::vector<std::string> out;
  auto name = [&](int h) { return h == seq::kNone ? std::string("-") : names[h]; };
  for (int i = 0; i < s.n; ++i) {
    const seq::Call& c = s.calls[i];
    if (c.op == seq::Op::kStart) {
      std::string type = TypeName(c.type);
      names[c.handle] = type + "#" + std::to_string(count[type]++);
    }
    if (c.thread != thread) continue;
    std::string line;
    if (c.op == seq::Op::kStart) {
      line = std::string("start ") + TypeName(c.type) + " parent=" + name(c.parent);
      if (c.type == kSentinelProfileColl) line += " pg=" + name(c.parent_group);
      if (c.type == kSentinelProfileKernelCh) line += " ch=" + std::to_string(c.channel);
      if (c.type == kSentinelProfileProxyOp) {
        line += " ch=" + std::to_string(c.channel) + " send=" + std::to_string(c.is_send);
      }
      if (c.type == kSentinelProfileProxyStep) line += " step=" + std::to_string(c.step);
    } else if (c.op == seq::Op::kStop) {
      line = "stop " + name(c.handle);
    } else {
      line = "state " + name(c.handle) + " " + std::to_string(c.state);
    }
    out.push_back(line);
  }
  return out;
}

// The same text from the recording plugin's lines.
class RecordingRenderer {
 public:
  std::vector<std::string> Render(const std::vector<RecLine>& lines) {
    std::vector<std::string> out;
    for (const RecLine& l : lines) {
      if (l.verb == "start") {
        std::string type = l.Get("type");
        names_[l.Get("h")] = type + "#" + std::to_string(count_[type]++);
        std::string line = "start " + type + " parent=" + Name(l.Get("parent"));
        if (type == "Coll") line += " pg=" + Name(l.Get("pg"));
        if (type == "KernelCh") line += " ch=" + l.Get("ch");
        if (type == "ProxyOp") line += " ch=" + l.Get("ch") + " send=" + l.Get("send");
        if (type == "ProxyStep") line += " step=" + l.Get("step");
        out.push_back(line);
      } else if (l.verb == "stop") {
        out.push_back("stop " + Name(l.Get("h")));
      } else if (l.verb == "state") {
        out.push_back("state " + Name(l.Get("h")) + " " + l.Get("state"));
      }
    }
    return out;
  }

 private:
  std::string Name(const std::string& id) {
    if (id == "0") return "-";
    auto it = names_.find(id);
    return it != names_.end() ? it->second : "?" + id;
  }
  std::map<std::string, std::string> names_;
  std::map<std::string, int> count_;
};

seq::Sequence Build(int mask, int channels, int steps) {
  seq::Sequence s;
  seq::BuildAllReduce(mask, channels, steps, &s);
  EXPECT_FALSE(s.overflow);
  return s;
}

// ---- against the facts --------------------------------------------------------------------------

// docs/nccl-facts.md "5.3 Call sequences" A, application thread, at a mask without KernelLaunch:
// GroupApi (states 23, 24), CollApi (stopped before the call returns), Group, Coll (parent CollApi,
// parentGroup Group), stops.
const std::vector<std::string> kAppWithoutKernelLaunch = {
    "start GroupApi parent=-",
    "state GroupApi#0 23",
    "start CollApi parent=GroupApi#0",
    "stop CollApi#0",
    "state GroupApi#0 24",
    "start Group parent=-",
    "start Coll parent=CollApi#0 pg=Group#0",
    "stop Coll#0",
    "stop Group#0",
    "stop GroupApi#0",
};

TEST(NcclCallSequenceFacts, InspectorMaskBringsEveryAncestor) {
  // docs/nccl-facts.md "4.5 The activation mask"
  for (int channels : {1, 2, 4, 8}) {
    seq::Sequence s = Build(kInspectorMask, channels, 1);
    EXPECT_EQ(Render(s, seq::Thread::kApp), kAppWithoutKernelLaunch);
    std::vector<std::string> proxy;
    for (int c = 0; c < channels; ++c) {
      proxy.push_back("start KernelCh parent=Coll#0 ch=" + std::to_string(c));
    }
    for (int c = 0; c < channels; ++c) {
      proxy.push_back("state KernelCh#" + std::to_string(c) + " 22");
      proxy.push_back("stop KernelCh#" + std::to_string(c));
    }
    EXPECT_EQ(Render(s, seq::Thread::kProxy), proxy) << channels;
    EXPECT_EQ(s.n, 10 + 3 * channels);
  }
}

TEST(NcclCallSequenceFacts, DefaultMaskMakesTheSameCallsAsInspectorMask) {
  // GroupApi, CollApi and Group come either way (docs/nccl-facts.md "4.5 The activation mask");
  // only who keeps them differs.
  for (int channels : {1, 8}) {
    seq::Sequence a = Build(kInspectorMask, channels, 1);
    seq::Sequence b = Build(kDefaultMask, channels, 1);
    EXPECT_EQ(Render(a, seq::Thread::kApp), Render(b, seq::Thread::kApp));
    EXPECT_EQ(Render(a, seq::Thread::kProxy), Render(b, seq::Thread::kProxy));
  }
}

TEST(NcclCallSequenceFacts, AllMaskAddsKernelLaunchAndTheNetwork) {
  // docs/nccl-facts.md "5.3 Call sequences" A, proxy steps 1-6
  seq::Sequence s = Build(kAllMask, 1, 1);
  std::vector<std::string> app = kAppWithoutKernelLaunch;
  app.insert(app.begin() + 5, {"start KernelLaunch parent=GroupApi#0", "stop KernelLaunch#0"});
  EXPECT_EQ(Render(s, seq::Thread::kApp), app);
  EXPECT_EQ(Render(s, seq::Thread::kProxy), (std::vector<std::string>{
                                                "start ProxyOp parent=Coll#0 ch=0 send=1",
                                                "start ProxyOp parent=Coll#0 ch=0 send=0",
                                                "start KernelCh parent=Coll#0 ch=0",
                                                "state ProxyOp#0 19",
                                                "state ProxyOp#1 19",
                                                "start ProxyStep parent=ProxyOp#0 step=0",
                                                "state ProxyStep#0 8",
                                                "state ProxyStep#0 20",
                                                "state ProxyStep#0 9",
                                                "start ProxyStep parent=ProxyOp#1 step=0",
                                                "state ProxyStep#1 10",
                                                "stop ProxyStep#0",
                                                "state ProxyStep#1 11",
                                                "state ProxyStep#1 12",
                                                "stop ProxyStep#1",
                                                "stop ProxyOp#0",
                                                "stop ProxyOp#1",
                                                "state KernelCh#0 22",
                                                "stop KernelCh#0",
                                            }));
}

TEST(NcclCallSequenceFacts, CallsOnAHandleAreGuardedByIt) {
  // profiler.cc of 2.28.9, docs/nccl-facts.md "5.6 Pitfalls" item 3
  seq::Sequence s = Build(kAllMask, 2, 2);
  std::vector<uint32_t> type_of(static_cast<size_t>(s.handles));
  for (int i = 0; i < s.n; ++i) {
    const seq::Call& c = s.calls[i];
    if (c.op == seq::Op::kStart) {
      EXPECT_EQ(c.guard, seq::kNone);  // a start depends on the mask only
      type_of[c.handle] = c.type;
      continue;
    }
    EXPECT_EQ(c.guard, c.handle) << i;  // every stop and state checks its own handle
    EXPECT_EQ(type_of[c.handle], c.type) << i;
    if (c.type == kSentinelProfileProxyStep && c.op == seq::Op::kRecord) {
      ASSERT_NE(c.guard2, seq::kNone) << i;  // and the ProxyOp handle
      EXPECT_EQ(type_of[c.guard2], static_cast<uint32_t>(kSentinelProfileProxyOp));
    } else {
      EXPECT_EQ(c.guard2, seq::kNone) << i;
    }
  }
}

TEST(NcclCallSequenceFacts, MaskWithoutCollFamilyEmitsNoCollective) {
  seq::Sequence s = Build(kSentinelProfileP2p | kSentinelProfileProxyCtrl, 2, 1);
  // GroupApi and Group still come for a P2p bit; no CollApi, Coll or proxy events.
  EXPECT_EQ(Render(s, seq::Thread::kApp),
            (std::vector<std::string>{"start GroupApi parent=-", "state GroupApi#0 23",
                                      "state GroupApi#0 24", "start Group parent=-", "stop Group#0",
                                      "stop GroupApi#0"}));
  EXPECT_TRUE(Render(s, seq::Thread::kProxy).empty());
}

// ---- against the fake NCCL ----------------------------------------------------------------------

class NcclCallSequenceFakeTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }
  void TearDown() override { RunProgram({"/bin/rm", "-rf", dir_}, {}); }

  // One AllReduce per rank on 2 ranks on 2 nodes, recorded at `mask`.
  std::vector<RecLine> Record(int mask, int channels) {
    std::string log = dir_ + "/rec." + std::to_string(++runs_) + ".log";
    std::vector<std::pair<std::string, std::string>> env = {
        {"NCCL_PROFILER_PLUGIN", FAKE_NCCL_RECORDING_PLUGIN},
        {"RECORDING_PLUGIN_LOG", log},
        {"RECORDING_PLUGIN_MASK", std::to_string(mask)},
        {"FAKE_NCCL_NODES", "2"},
        {"FAKE_NCCL_CHANNELS", std::to_string(channels)}};
    RunResult r = RunProgram({FAKE_NCCL_DRIVER, "allreduce", "2"}, env);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return ParseRecording(ReadFile(log));
  }

  std::string dir_;
  int runs_ = 0;
};

TEST_F(NcclCallSequenceFakeTest, FakeNcclMakesExactlyTheBenchmarksCalls) {
  for (int mask : {kInspectorMask, kDefaultMask, kAllMask}) {
    for (int channels : {1, 2, 4, 8}) {
      SCOPED_TRACE("mask " + std::to_string(mask) + ", " + std::to_string(channels) +
                   " channel(s)");
      std::vector<RecLine> lines = Record(mask, channels);
      // Application thread (the driver's main thread: its tid is the pid): rank 0's AllReduce,
      // from its GroupApi start to that GroupApi's stop.
      long app_tid = -1;
      for (const RecLine& l : lines) {
        if (l.verb == "init") app_tid = l.Num("pid");
      }
      std::vector<RecLine> app;
      std::string group_api;
      for (const RecLine& l : lines) {
        if (l.tid != app_tid || l.verb == "init" || l.verb == "finalize") continue;
        if (group_api.empty() && l.verb == "start" && l.Get("type") == "GroupApi") {
          group_api = l.Get("h");
        }
        if (group_api.empty()) continue;
        app.push_back(l);
        if (l.verb == "stop" && l.Get("h") == group_api) break;
      }
      // Rank 0's proxy thread: its one collective.
      std::vector<RecLine> proxy;
      int steps = 1;
      for (const RecLine& l : lines) {
        if (l.thread != "NCCL_Progress_0" || l.verb == "init" || l.verb == "finalize") continue;
        proxy.push_back(l);
        if (l.verb == "start" && l.Get("type") == "ProxyOp")
          steps = static_cast<int>(l.Num("nsteps"));
      }
      ASSERT_FALSE(app.empty());
      RecordingRenderer rec;
      std::vector<std::string> got_app = rec.Render(app);
      std::vector<std::string> got_proxy = rec.Render(proxy);
      seq::Sequence s = Build(mask, channels, steps);
      EXPECT_EQ(got_app, Render(s, seq::Thread::kApp));
      EXPECT_EQ(got_proxy, Render(s, seq::Thread::kProxy));
    }
  }
}

}  // namespace
}  // namespace sentinel::testing
