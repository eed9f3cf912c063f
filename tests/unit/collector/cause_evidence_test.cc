// The late-rank evidence as sentineld gathers it (cause_evidence.h): per collective, over the late
// span against the span before it, from a State built by hand (the rank's history and CUPTI
// windows, its peers') and an EvidencePoller polling a fake /proc and cgroup tree under a fake
// clock. The judgement itself is late_cause_test.cc's.
#include "collector/aggregate/cause_evidence.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "gtest/gtest.h"

#include "collector/aggregate/aggregator.h"
#include "collector/evidence/evidence_poller.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

constexpr int64_t kMs = 1000000;
constexpr int64_t kS = 1000 * kMs;

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A fake /proc/<pid> with one thread, whose schedstat the test advances.
struct FakeProcess {
  std::string root;
  uint32_t pid;
  void Write(uint64_t cpu_ns, uint64_t wait_ns) const {
    const std::string p = root + "/" + std::to_string(pid);
    mkdir(p.c_str(), 0755);
    mkdir((p + "/task").c_str(), 0755);
    const std::string t = p + "/task/" + std::to_string(pid);
    mkdir(t.c_str(), 0755);
    WriteFile(p + "/stat", std::to_string(pid) +
                               " (python3) R 1 1 1 0 -1 0 10 0 0 0 100 20 0 0 20 0 1 0 4242 0 0");
    WriteFile(t + "/schedstat", std::to_string(cpu_ns) + " " + std::to_string(wait_ns) + " 10\n");
    WriteFile(t + "/status",
              "Name:\tpython3\nvoluntary_ctxt_switches:\t5\n"
              "nonvoluntary_ctxt_switches:\t7\n");
    WriteFile(p + "/cgroup", "0::/job\n");
  }
};

class CauseEvidenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cause_evidence_XXXXXX";
    root_ = mkdtemp(tmpl);
    mkdir((root_ + "/proc").c_str(), 0755);
    mkdir((root_ + "/cgroup").c_str(), 0755);
    state_.host = "node-a";
    comm_ = std::make_unique<CommState>();
    comm_->hash = 0xabc;
    comm_->uid = 1000;
    comm_->nranks = 2;
    for (int r = 0; r < 2; ++r) {
      auto rs = std::make_unique<RankState>();
      rs->comm_hash = comm_->hash;
      rs->rank = r;
      rs->client = 10 + r;
      rs->local_index = r;
      rs->pid = 100 + r;
      rs->history.Reset(8192);
      comm_->members.push_back(rs.get());
      ranks_.push_back(std::move(rs));
      auto p = std::make_unique<ProcessState>();
      p->client = 10 + r;
      p->pid = 100 + r;
      state_.processes[10 + r] = std::move(p);
    }
  }
  void TearDown() override { std::system(("rm -rf " + root_).c_str()); }

  // Collectives every 10 ms from t0 for `seconds`; rank 0 late by `late_ms` from `late_from`.
  void Collectives(int64_t t0, int seconds, int64_t late_from, double late_ms) {
    uint64_t seq = 1;
    for (int64_t t = t0; t < t0 + seconds * kS; t += 10 * kMs, ++seq) {
      for (auto& rs : ranks_) {
        RankSample s;
        s.seq = seq;
        const bool late = rs->rank == 0 && t >= late_from;
        s.arrival_ns = t + (late ? static_cast<int64_t>(late_ms * kMs) : 0);
        s.lateness_ns = late ? static_cast<int64_t>(late_ms * kMs) : 0;
        rs->history.Push(s);
      }
    }
  }
  // One measured CUPTI window per second per process, computing `compute_share` of it.
  void GpuWindows(int64_t t0, int seconds, int64_t slow_from, double usual, double slow) {
    for (auto& [client, p] : state_.processes) {
      for (int64_t t = t0; t < t0 + seconds * kS; t += kS) {
        SentinelWireGpuWindow w{};
        w.start_ns = t;
        w.end_ns = t + kS;
        const double share = client == 10 && t >= slow_from ? slow : usual;
        w.compute_ns = static_cast<int64_t>(share * kS);
        w.idle_ns = kS - w.compute_ns;
        w.pid = p->pid;
        p->gpu.windows.Push(w);
      }
    }
  }

  std::string root_;
  State state_;
  std::unique_ptr<CommState> comm_;
  std::vector<std::unique_ptr<RankState>> ranks_;
};

// A neighbour takes rank 0's CPU from 30 s: its run-queue wait goes from 1 ms to 300 ms per
// second, 3 ms per 10 ms collective, and it is 3 ms late per collective: host CPU contention,
// with the figures per collective.
TEST_F(CauseEvidenceTest, RunQueueWaitPerCollectiveOverTheLateSpanAgainstTheUsual) {
  const int64_t t0 = 100 * kS;
  Collectives(t0, 40, t0 + 30 * kS, 3.0);
  GpuWindows(t0, 40, t0 + 30 * kS, 0.7, 0.7);
  testing::FakeClock clock;
  EvidenceOptions options;
  options.roots.proc = root_ + "/proc";
  options.roots.cgroup = root_ + "/cgroup";
  options.nvml_library = "off";
  EvidencePoller poller(options, &clock, [] { return std::vector<uint32_t>{100, 101}; });
  FakeProcess p0{root_ + "/proc", 100};
  FakeProcess p1{root_ + "/proc", 101};
  uint64_t wait0 = 0;
  for (int s = 0; s <= 40; ++s) {
    clock.Set(t0 + s * kS);
    p0.Write(static_cast<uint64_t>(s) * 700 * kMs, wait0);
    p1.Write(static_cast<uint64_t>(s) * 700 * kMs, static_cast<uint64_t>(s) * kMs);
    poller.PollOnce();
    wait0 += s < 30 ? kMs : 300 * kMs;
  }
  state_.evidence = &poller;
  const LateSpan span = LateSpanSince(*ranks_[0], 3001, 3.0, 0.0, 10.0, t0 + 40 * kS);
  EXPECT_EQ(span.from_ns, t0 + 30 * kS + 3 * kMs);
  const CauseEvidence ev = GatherCauseEvidence(state_, *comm_, *ranks_[0], span, &poller);
  EXPECT_NEAR(ev.runq_wait_ms.now, 3.0, 0.3);
  EXPECT_NEAR(ev.runq_wait_ms.usual, 0.01, 0.005);
  EXPECT_NEAR(ev.compute_ms.now, 7.0, 0.2);  // 70 % of a 10 ms collective
  EXPECT_NEAR(ev.peer_compute_ms, 7.0, 0.2);
  EXPECT_GT(ev.steps, 900);
  EXPECT_TRUE(ev.missing.proc.empty()) << ev.missing.proc;
  const CauseVerdict v = JudgeLateCause(ev);
  EXPECT_EQ(v.Cause(), LateCause::kHostCpu) << CauseSentence(v);
  EXPECT_NE(CauseSentence(v).find("run-queue wait"), std::string::npos) << CauseSentence(v);
  // The GPU could not be judged: NVML is off, and the alert's JSON says the cause's name.
  EXPECT_FALSE(ev.gpu.known);
  EXPECT_EQ(CauseJson(v)["cause"], "host_cpu");
}

// The rank's compute kernels take 15 % longer than its usual and its peer's (CUPTI windows):
// GPU slower, why unknown without NVML.
TEST_F(CauseEvidenceTest, LongerKernelsThanItsUsualAndItsPeers) {
  const int64_t t0 = 100 * kS;
  Collectives(t0, 40, t0 + 30 * kS, 1.05);
  GpuWindows(t0, 40, t0 + 30 * kS, 0.70, 0.805);
  const LateSpan span = LateSpanSince(*ranks_[0], 3001, 1.05, 0.0, 10.0, t0 + 40 * kS);
  const CauseEvidence ev = GatherCauseEvidence(state_, *comm_, *ranks_[0], span, nullptr);
  EXPECT_NEAR(ev.compute_ms.now, 8.05, 0.2);
  EXPECT_NEAR(ev.compute_ms.usual, 7.0, 0.2);
  EXPECT_NEAR(ev.peer_compute_ms, 7.0, 0.2);
  EXPECT_FALSE(ev.missing.proc.empty());  // no evidence poll
  const CauseVerdict v = JudgeLateCause(ev);
  EXPECT_EQ(v.Cause(), LateCause::kGpuSlower) << CauseSentence(v);
}

// Nothing measured: no CUPTI windows, no poll. The cause is unknown and the evidence says why.
TEST_F(CauseEvidenceTest, NothingMeasuredIsUnknownWithTheReasons) {
  const int64_t t0 = 100 * kS;
  Collectives(t0, 40, t0 + 30 * kS, 3.0);
  const LateSpan span = LateSpanSince(*ranks_[0], 3001, 3.0, 0.0, 10.0, t0 + 40 * kS);
  const CauseEvidence ev = GatherCauseEvidence(state_, *comm_, *ranks_[0], span, nullptr);
  EXPECT_NE(ev.missing.cupti.find("CUPTI"), std::string::npos) << ev.missing.cupti;
  EXPECT_NE(ev.missing.proc.find("off"), std::string::npos) << ev.missing.proc;
  const CauseVerdict v = JudgeLateCause(ev);
  EXPECT_EQ(v.Cause(), LateCause::kUnknown);
  EXPECT_FALSE(v.unknown_reason.empty());
}

// The cache judges a rank again only after a second, or at once for a new late run.
TEST(CauseCacheTest, JudgesAgainAfterASecondOrForANewLateRun) {
  CauseCache cache;
  int judged = 0;
  auto judge = [&] {
    ++judged;
    return CauseVerdict{};
  };
  const CauseCache::Key key{1000, 0xabc, 3, false};
  cache.Get(key, 40, 10 * kS, judge);
  cache.Get(key, 40, 10 * kS + 500 * kMs, judge);
  EXPECT_EQ(judged, 1);
  cache.Get(key, 40, 11 * kS, judge);
  EXPECT_EQ(judged, 2);
  cache.Get(key, 41, 11 * kS + kMs, judge);
  EXPECT_EQ(judged, 3);
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace sentinel::collector
