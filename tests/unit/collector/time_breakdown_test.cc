// Where a rank's time went (collector/aggregate/time_breakdown.h): the four parts from scripted
// CUPTI windows and joins, through the aggregator and its exports, exactly; CUPTI off, budget-
// sampled streams, a process that disconnects; and the verdict over the ranks' wait shares.
#include "collector/aggregate/time_breakdown.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/wait_evidence.h"
#include "collector/export/api_json.h"
#include "collector/export/prometheus_text.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

using testing::FakeClock;
using testing::MakeColl;
using testing::MakeCommInit;

constexpr uint64_t kComm = 0x00000000000000a1ULL;
constexpr int64_t kMs = 1000000;
constexpr int64_t kSec = 1000 * kMs;

SentinelWireGpuWindow Window(int64_t start, int64_t compute, int64_t nccl, int64_t overlap,
                             int64_t idle, uint32_t steps = 0) {
  SentinelWireGpuWindow w{};
  w.start_ns = start;
  w.end_ns = start + kSec;
  w.compute_ns = compute;
  w.nccl_ns = nccl;
  w.overlap_ns = overlap;
  w.idle_ns = idle;
  w.kernels = 10;
  w.nccl_kernels = 2;
  w.steps = steps;
  if (steps > 0) {
    w.step_start_ns = start;
    w.step_end_ns = start + kSec / 2;
  }
  return w;
}

// --- the parts of one process, scripted ---------------------------------------------------------

TEST(TimeOnGpuWindow, PartsOfOneWindowExactly) {
  ProcessTime t;
  // 1 s: compute 500 ms, NCCL 400 ms of which 100 under compute (exposed 300), idle 150 ms,
  // memcpy-only the remaining 50 ms. 120 ms of wait in collectives that arrived in it.
  TimeOnWait(&t, 10 * kSec + 200 * kMs, 70 * kMs, 1);
  TimeOnWait(&t, 10 * kSec + 800 * kMs, 50 * kMs, 1);
  TimeOnGpuWindow(&t, Window(10 * kSec, 500 * kMs, 400 * kMs, 100 * kMs, 150 * kMs, 2), 2);
  EXPECT_EQ(t.totals.compute_ns, 500 * kMs);
  EXPECT_EQ(t.totals.communication_ns, 180 * kMs);  // exposed 300 less 120 of wait
  EXPECT_EQ(t.totals.wait_ns, 120 * kMs);
  EXPECT_EQ(t.totals.host_ns, 150 * kMs);
  EXPECT_EQ(t.totals.steps, 2u);
  EXPECT_EQ(t.wait_unplaced_ns, 0);
  // The memcpy-only 50 ms is in no part.
  EXPECT_EQ(t.totals.compute_ns + t.totals.communication_ns + t.totals.wait_ns + t.totals.host_ns,
            950 * kMs);
}

TEST(TimeOnGpuWindow, WaitBeyondTheExposedCommunicationLeavesItZeroNeverNegative) {
  ProcessTime t;
  TimeOnWait(&t, 10 * kSec + 100 * kMs, 400 * kMs, 1);  // hidden under compute in part
  TimeOnGpuWindow(&t, Window(10 * kSec, 800 * kMs, 300 * kMs, 200 * kMs, 100 * kMs), 2);
  EXPECT_EQ(t.totals.communication_ns, 0);
  EXPECT_EQ(t.totals.wait_ns, 400 * kMs);
  EXPECT_EQ(t.wait_unplaced_ns, 300 * kMs);
}

TEST(TimeOnGpuWindow, WaitOfALaterWindowWaitsForItAndAnOlderOneIsNotPlaced) {
  ProcessTime t;
  TimeOnWait(&t, 5 * kSec, 30 * kMs, 1);               // before the first window: no window
  TimeOnWait(&t, 11 * kSec + 500 * kMs, 40 * kMs, 1);  // in the second window
  TimeOnWait(&t, 10 * kSec + 500 * kMs, 20 * kMs, 1);  // out of order, in the first
  TimeOnGpuWindow(&t, Window(10 * kSec, 0, 100 * kMs, 0, 900 * kMs), 2);
  EXPECT_EQ(t.totals.communication_ns, 80 * kMs);
  EXPECT_EQ(t.wait_unplaced_ns, 30 * kMs);
  TimeOnGpuWindow(&t, Window(11 * kSec, 0, 100 * kMs, 0, 900 * kMs), 3);
  EXPECT_EQ(t.totals.communication_ns, 140 * kMs);
  EXPECT_EQ(t.totals.wait_ns, 90 * kMs);
}

TEST(TimeOnGpuWindow, AReplayedOrOverlappingWindowIsCountedOnce) {
  ProcessTime t;
  const SentinelWireGpuWindow w = Window(10 * kSec, 500 * kMs, 100 * kMs, 0, 400 * kMs);
  TimeOnGpuWindow(&t, w, 1);
  TimeOnGpuWindow(&t, w, 2);
  SentinelWireGpuWindow half = Window(10 * kSec + 500 * kMs, 500 * kMs, 100 * kMs, 0, 400 * kMs);
  TimeOnGpuWindow(&t, half, 3);
  EXPECT_EQ(t.totals.compute_ns, 500 * kMs);
  EXPECT_EQ(t.windows_overlapping, 2u);
}

TEST(TimeOnGpuWindow, CuptiOffOrNotMeasuredIsUnknownNeverZero) {
  ProcessTime t;
  TimeOnWait(&t, 10 * kSec, 30 * kMs, 1);
  TimeBreakdownInput in = TimeBreakdownInputOf(t, 1);
  EXPECT_FALSE(in.gpu_known);
  EXPECT_TRUE(in.wait_known);
  nlohmann::json j = TimeRankJson(in);
  EXPECT_FALSE(j["cupti"].get<bool>());
  EXPECT_TRUE(j["seconds"]["compute"].is_null());
  EXPECT_TRUE(j["seconds"]["communication"].is_null());
  EXPECT_TRUE(j["seconds"]["host"].is_null());
  EXPECT_DOUBLE_EQ(j["seconds"]["wait"].get<double>(), 0.03);
  // Measured once, then another tool took CUPTI: unknown again (the counters stop, and a stopped
  // counter would read as 0 % compute).
  TimeOnGpuWindow(&t, Window(10 * kSec, 500 * kMs, 100 * kMs, 0, 400 * kMs), 2);
  EXPECT_TRUE(TimeBreakdownInputOf(t, 2).gpu_known);
  SentinelWireGpuWindow foreign{};
  foreign.start_ns = 11 * kSec;
  foreign.end_ns = 12 * kSec;
  foreign.status = kSentinelGpuWindowForeignOwner;
  TimeOnGpuWindow(&t, foreign, 3);
  in = TimeBreakdownInputOf(t, 3);
  EXPECT_FALSE(in.gpu_known);
  EXPECT_EQ(in.totals.compute_ns, 500 * kMs);  // nothing of the foreign window counted
  EXPECT_TRUE(TimeRankJson(in)["seconds"]["compute"].is_null());
}

TEST(TimeOnGpuWindow, RecentFiguresAreOverTheLastMinute) {
  ProcessTime t;
  for (int s = 0; s < 100; ++s) {
    TimeOnGpuWindow(&t, Window(s * kSec, 600 * kMs, 0, 0, 400 * kMs), (s + 1) * kSec);
  }
  const TimeBreakdownInput in = TimeBreakdownInputOf(t, 100 * kSec);
  EXPECT_EQ(in.totals.compute_ns, 60 * kSec);
  EXPECT_GE(in.recent_span_ns, 60 * kSec);
  EXPECT_LE(in.recent_span_ns, 70 * kSec);
  EXPECT_EQ(in.recent.compute_ns * 1000 / in.recent_span_ns, 600);  // 0.6 of the span
}

// --- the waits of one join ----------------------------------------------------------------------

TEST(JoinWaits, LocalRanksWaitForTheLatestArrivalExactly) {
  // Rank 2 arrives 3 ms after rank 0 and 1 ms after rank 1; they end together.
  const std::vector<WaitObservation> obs = {
      {0, 100 * kMs, 4 * kMs, -1}, {1, 102 * kMs, 2 * kMs, -1}, {2, 103 * kMs, 1 * kMs, -1}};
  EXPECT_EQ(JoinWaits(obs, false, -1), (std::vector<int64_t>{3 * kMs, 1 * kMs, 0}));
  // Spanning nodes with a floor of 0.5 ms: the part after the last local arrival above the floor
  // is the wait for the other nodes (0.5 ms here, for every rank).
  EXPECT_EQ(JoinWaits(obs, true, kMs / 2),
            (std::vector<int64_t>{3 * kMs + kMs / 2, 1 * kMs + kMs / 2, kMs / 2}));
  // Floor unknown: only the local part.
  EXPECT_EQ(JoinWaits(obs, true, -1), (std::vector<int64_t>{3 * kMs, 1 * kMs, 0}));
}

TEST(JoinWaits, ARankWithoutGpuTimesMakesTheJoinUnknownAndAWaitNeverExceedsTheDuration) {
  const std::vector<WaitObservation> no_gpu = {{0, 100 * kMs, 4 * kMs, -1}, {1, 103 * kMs, -1, -1}};
  EXPECT_EQ(JoinWaits(no_gpu, false, -1), (std::vector<int64_t>{-1, -1}));
  // A hostile duration shorter than the wait it must contain.
  const std::vector<WaitObservation> short_dur = {{0, 100 * kMs, 1 * kMs, -1},
                                                  {1, 105 * kMs, 1 * kMs, -1}};
  EXPECT_EQ(JoinWaits(short_dur, false, -1), (std::vector<int64_t>{1 * kMs, 0}));
}

// --- the verdict --------------------------------------------------------------------------------

TEST(JudgeWaiting, OneRankTheOthersWaitFor) {
  const WaitVerdict v = JudgeWaiting({0.20, 0.21, 0.19, 0.01, 0.20, 0.22, 0.20, 0.21});
  EXPECT_EQ(v.kind, WaitVerdictKind::kOneRank);
  EXPECT_EQ(v.culprits, std::vector<size_t>{3});
}

TEST(JudgeWaiting, TwoOfEightAreAFewRanks) {
  const WaitVerdict v = JudgeWaiting({0.20, 0.01, 0.19, 0.02, 0.20, 0.22, 0.20, 0.21});
  EXPECT_EQ(v.kind, WaitVerdictKind::kFewRanks);
  EXPECT_EQ(v.culprits, (std::vector<size_t>{1, 3}));
}

TEST(JudgeWaiting, EveryRankLateNowAndThenIsAWidenedDistribution) {
  // Each rank waits 10-16 %: each is the last one sometimes, none stands apart.
  const WaitVerdict v = JudgeWaiting({0.12, 0.10, 0.16, 0.13, 0.11, 0.15, 0.14, 0.12});
  EXPECT_EQ(v.kind, WaitVerdictKind::kWidened);
  EXPECT_TRUE(v.culprits.empty());
  EXPECT_NEAR(v.reference_share, 0.1425, 1e-9);
  // Half the ranks barely waiting is no "few ranks" either.
  EXPECT_EQ(JudgeWaiting({0.2, 0.01, 0.2, 0.01, 0.2, 0.01, 0.2, 0.01}).kind,
            WaitVerdictKind::kWidened);
}

TEST(JudgeWaiting, LittleWaitingAndNotEnoughData) {
  EXPECT_EQ(JudgeWaiting({0.02, 0.0, 0.03, 0.02}).kind, WaitVerdictKind::kLittleWaiting);
  EXPECT_EQ(JudgeWaiting({0.3}).kind, WaitVerdictKind::kNotEnoughData);
  EXPECT_EQ(JudgeWaiting({0.3, -1, -1}).kind, WaitVerdictKind::kNotEnoughData);
  EXPECT_EQ(JudgeWaiting({}).kind, WaitVerdictKind::kNotEnoughData);
}

// --- through the aggregator and its exports -----------------------------------------------------

class TimeBreakdownAggTest : public ::testing::Test {
 protected:
  static constexpr int kRanks = 4;
  void SetUp() override {
    agg_ = std::make_unique<Aggregator>(config_, &clock_);
    for (int r = 0; r < kRanks; ++r) {
      agg_->NoteAccepted(Client(r), static_cast<uint32_t>(3000 + r), 0);
      agg_->OnHello(Client(r), testing::MakeHello(static_cast<uint32_t>(3000 + r)));
      Control(Client(r), kSentinelWireCommInit, MakeCommInit(kComm, r, kRanks));
    }
    t0_ = clock_.MonoNs() - 100 * kSec;
  }
  static int Client(int rank) { return 20 + rank; }
  // The connection feeding `rank` now: Client(rank) unless a test moved it to another.
  int Feeding(int rank) const { return rank == moved_rank_ ? moved_to_ : Client(rank); }
  template <typename T>
  void Control(int client, uint16_t type, const T& body) {
    testing::DeliverControl(agg_.get(), client, type, body);
  }
  // Second `s` of the job: 100 collectives 10 ms apart; `late` arrives `late_ms` after the others
  // and every rank ends 1 ms after it. Then each rank's CUPTI window of that second: compute 700
  // ms, its NCCL time (its waits + 1 ms transfer each), no overlap, idle the rest.
  void Second(int s, int late, int64_t late_ns, uint16_t flags = 0, bool skip_even = false) {
    const int64_t start = t0_ + s * kSec;
    for (int k = 0; k < 100; ++k) {
      const uint64_t seq = static_cast<uint64_t>(s) * 100 + static_cast<uint64_t>(k);
      if (skip_even && (seq / 8) % 8 != 0) continue;  // the budget's kept bursts
      const int64_t at = start + k * 10 * kMs;
      for (int r = 0; r < kRanks; ++r) {
        if (gone_ == r) continue;
        const int64_t arrival = at + (r == late ? late_ns : 0);
        auto rec = MakeColl(kComm, r, kRanks, seq, arrival, at + late_ns + kMs - arrival);
        rec.ordinal_lo = static_cast<uint32_t>(seq + 1);
        rec.flags |= flags;
        agg_->OnRecords(Feeding(r), &rec, 1);
      }
    }
    for (int r = 0; r < kRanks; ++r) {
      if (gone_ == r) continue;
      const int64_t nccl = 100 * ((r == late ? 0 : late_ns) + kMs);
      Control(Feeding(r), kSentinelWireGpuWindow,
              Window(start, 700 * kMs, nccl, 0, kSec - 700 * kMs - nccl, 2));
    }
    clock_.Advance(kSec);
  }
  nlohmann::json Ranks() {
    RanksSnapshot snap;
    agg_->Read([&](const State& st) { snap = TakeRanksSnapshot(st); });
    return RanksJson(snap);
  }
  std::string Prom() {
    std::string out;
    agg_->Read([&](const State& st) { out = RenderPrometheus(TakeMetricsSnapshot(st)); });
    return out;
  }
  TimeTotals Totals(int rank) { return TotalsOfClient(Client(rank)); }
  TimeTotals TotalsOfClient(int client) {
    TimeTotals out;
    agg_->Read([&](const State& st) {
      auto p = st.processes.find(client);
      if (p != st.processes.end()) out = p->second->time.totals;
    });
    return out;
  }
  static std::string Series(int rank, const char* part, const std::string& value) {
    return "sentinel_rank_time_seconds_total{comm=\"0x00000000000000a1\",uid=\"0\",rank=\"" +
           std::to_string(rank) + "\",part=\"" + part + "\"} " + value + "\n";
  }

  FakeClock clock_;
  Config config_;
  std::unique_ptr<Aggregator> agg_;
  int64_t t0_ = 0;
  int gone_ = -1;
  int moved_rank_ = -1;
  int moved_to_ = -1;
};

TEST_F(TimeBreakdownAggTest, OneLateRankTheOthersWaitForIsNamed) {
  for (int s = 0; s < 3; ++s) Second(s, 3, 2 * kMs);
  // The straggler warm-up (2 joins) is not counted: 298 collectives of 2 ms waits.
  for (int r = 0; r < 3; ++r) {
    const TimeTotals t = Totals(r);
    EXPECT_EQ(t.wait_ns, 298 * 2 * kMs) << r;
    EXPECT_EQ(t.compute_ns, 3 * 700 * kMs);
    // Exposed 300 ms a second, less the wait placed in its window (196 ms in the first).
    EXPECT_EQ(t.communication_ns, 3 * 300 * kMs - 298 * 2 * kMs) << r;
    EXPECT_EQ(t.host_ns, 0);
  }
  const TimeTotals late = Totals(3);
  EXPECT_EQ(late.wait_ns, 0);
  EXPECT_EQ(late.communication_ns, 3 * 100 * kMs);
  EXPECT_EQ(late.host_ns, 3 * 200 * kMs);

  const std::string prom = Prom();
  EXPECT_NE(prom.find(Series(0, "compute", "2.1000000000000001")), std::string::npos) << prom;
  EXPECT_NE(prom.find(Series(0, "wait", "0.59599999999999997")), std::string::npos) << prom;
  EXPECT_NE(prom.find(Series(3, "wait", "0")), std::string::npos) << prom;
  EXPECT_NE(prom.find(Series(3, "host", "0.59999999999999998")), std::string::npos) << prom;

  const nlohmann::json j = Ranks();
  ASSERT_EQ(j["breakdown"].size(), 1u);
  const nlohmann::json& b = j["breakdown"][0];
  EXPECT_EQ(b["verdict"], "one_rank");
  ASSERT_EQ(b["culprits"].size(), 1u);
  EXPECT_EQ(b["culprits"][0]["rank"], 3);
  EXPECT_EQ(b["culprits"][0]["pid"], 3003);
  EXPECT_EQ(b["ranks_cupti"], 4);
  // Rank 0's share: 596 ms of wait over 3 s of parts.
  for (const auto& r : j["ranks"]) {
    if (r["rank"] != 0) continue;
    EXPECT_NEAR(r["time"]["wait_share"].get<double>(), 0.596 / 3.0, 1e-9);
    EXPECT_EQ(r["time"]["steps"], 6);
    EXPECT_NEAR(r["time"]["per_step_ms"]["compute"].get<double>(), 350.0, 1e-9);
  }
}

TEST(TimeBreakdownRemote, ANodeWaitingForAnotherNodeCountsTheTimeAboveTheTransferFloor) {
  // Two local ranks of a 4-rank communicator spanning 2 nodes: 200 collectives whose transfer
  // takes 1 ms after both local ranks arrived, then 100 in which a rank on the other node is 2 ms
  // late (both local ranks end 3 ms after they arrived).
  FakeClock clock;
  Config config;
  Aggregator agg(config, &clock);
  for (int r = 0; r < 2; ++r) {
    agg.NoteAccepted(40 + r, static_cast<uint32_t>(4000 + r), 0);
    agg.OnHello(40 + r, testing::MakeHello(static_cast<uint32_t>(4000 + r)));
    SentinelWireCommInit init = MakeCommInit(kComm, r, 4);
    init.nnodes = 2;
    testing::DeliverControl(&agg, 40 + r, kSentinelWireCommInit, init);
  }
  const int64_t t0 = clock.MonoNs() - 100 * kSec;
  for (int k = 0; k < 300; ++k) {
    const int64_t at = t0 + k * 10 * kMs;
    for (int r = 0; r < 2; ++r) {
      auto rec = MakeColl(kComm, r, 4, static_cast<uint64_t>(k), at, k < 200 ? kMs : 3 * kMs);
      rec.ordinal_lo = static_cast<uint32_t>(k + 1);
      agg.OnRecords(40 + r, &rec, 1);
    }
  }
  agg.Read([&](const State& st) {
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(st.processes.at(40 + r)->time.totals.wait_ns, 100 * 2 * kMs) << r;
    }
  });
}

TEST_F(TimeBreakdownAggTest, CuptiOffExportsTheWaitAlone) {
  // The same job without windows.
  const int64_t start = t0_;
  for (int k = 0; k < 50; ++k) {
    const int64_t at = start + k * 10 * kMs;
    for (int r = 0; r < kRanks; ++r) {
      const int64_t arrival = at + (r == 1 ? 2 * kMs : 0);
      auto rec =
          MakeColl(kComm, r, kRanks, static_cast<uint64_t>(k), arrival, at + 3 * kMs - arrival);
      agg_->OnRecords(Client(r), &rec, 1);
    }
  }
  const std::string prom = Prom();
  EXPECT_NE(prom.find(Series(0, "wait", "0.096000000000000002")), std::string::npos) << prom;
  for (const char* part : {"compute", "communication", "host"}) {
    EXPECT_EQ(prom.find(std::string("part=\"") + part + "\""), std::string::npos) << part;
  }
  const nlohmann::json j = Ranks();
  for (const auto& r : j["ranks"]) {
    EXPECT_FALSE(r["time"]["cupti"].get<bool>());
    EXPECT_TRUE(r["time"]["seconds"]["compute"].is_null());
  }
  EXPECT_TRUE(j["breakdown"][0]["shares"].is_null());
}

TEST_F(TimeBreakdownAggTest, ABudgetSampledStreamCountsEachKeptCollectiveForEight) {
  // Level 3: only the bursts (8 of every 64) arrive, each marked sampled; 1 ms waits.
  for (int s = 0; s < 3; ++s) Second(s, 2, kMs, kSentinelCollSampled, /*skip_even=*/true);
  // 300 collectives, of which the kept ones are those with (seq / 8) % 8 == 0: 40, less the
  // 2 of the warm-up, each weighted 8.
  EXPECT_EQ(Totals(0).wait_ns, 38 * 8 * kMs);
  EXPECT_EQ(Totals(2).wait_ns, 0);
  // Against the full stream's 298 ms of wait: within the sampling's granularity.
}

TEST_F(TimeBreakdownAggTest, AProcessThatDisconnectsLeavesTheOthersCounting) {
  Second(0, 3, 2 * kMs);
  agg_->OnDisconnect(Client(2));
  gone_ = 2;
  Second(1, 3, 2 * kMs);
  Second(2, 3, 2 * kMs);
  EXPECT_EQ(Totals(0).wait_ns, 298 * 2 * kMs);
  const std::string prom = Prom();
  EXPECT_EQ(prom.find("rank=\"2\",part="), std::string::npos) << prom;
  EXPECT_NE(prom.find(Series(1, "wait", "0.59599999999999997")), std::string::npos) << prom;
  const nlohmann::json j = Ranks();
  EXPECT_EQ(j["breakdown"][0]["ranks"], 3);
  EXPECT_EQ(j["breakdown"][0]["verdict"], "one_rank");
}

TEST_F(TimeBreakdownAggTest, ARankTakenOverByARestartedProcessCountsForTheNewProcess) {
  Second(0, 3, 2 * kMs);
  const TimeTotals before = Totals(2);
  EXPECT_EQ(before.wait_ns, 98 * 2 * kMs);
  // Rank 2's process restarts: its old connection goes, a new one (another pid) feeds the rank.
  agg_->OnDisconnect(Client(2));
  constexpr int kRestarted = 40;
  agg_->NoteAccepted(kRestarted, 3102, 0);
  agg_->OnHello(kRestarted, testing::MakeHello(3102));
  Control(kRestarted, kSentinelWireCommInit, MakeCommInit(kComm, 2, kRanks));
  moved_rank_ = 2;
  moved_to_ = kRestarted;
  Second(1, 3, 2 * kMs);
  Second(2, 3, 2 * kMs);
  // Its waits from then on are the new process's; the gone one's figures stay as they were.
  EXPECT_EQ(TotalsOfClient(kRestarted).wait_ns, 200 * 2 * kMs);
  EXPECT_EQ(Totals(2).wait_ns, before.wait_ns);
  EXPECT_EQ(Totals(0).wait_ns, 298 * 2 * kMs);
}

TEST_F(TimeBreakdownAggTest,
       AJoinCompletedByItsProcessDisconnectingCountsNothingForTheGoneProcess) {
  // Rank 1's process goes and rank 0's takes the rank over: one process now feeds ranks 0 and 1.
  agg_->OnDisconnect(Client(1));
  Control(Client(0), kSentinelWireCommInit, MakeCommInit(kComm, 1, kRanks));
  moved_rank_ = 1;
  moved_to_ = Client(0);
  Second(0, 3, 2 * kMs);
  // One more collective that ranks 1, 2 and 3 reach (3 late by 2 ms) and rank 0 never does.
  const uint64_t seq = 100;
  const int64_t at = t0_ + kSec;
  for (int r = 1; r < kRanks; ++r) {
    const int64_t arrival = at + (r == 3 ? 2 * kMs : 0);
    auto rec = MakeColl(kComm, r, kRanks, seq, arrival, at + 3 * kMs - arrival);
    rec.ordinal_lo = static_cast<uint32_t>(seq + 1);
    agg_->OnRecords(Feeding(r), &rec, 1);
  }
  const TimeTotals gone_before = Totals(0);
  const TimeTotals other_before = Totals(2);
  ASSERT_GT(gone_before.wait_ns, 0);
  // Its process disconnects: rank 0 deactivated first completes the join with rank 1, whose
  // process is the one going. The gone process's figures stay; the others count the join.
  agg_->OnDisconnect(Client(0));
  EXPECT_EQ(Totals(0).wait_ns, gone_before.wait_ns);
  EXPECT_EQ(Totals(2).wait_ns, other_before.wait_ns + 2 * kMs);
}

TEST_F(TimeBreakdownAggTest, SeriesAreFourAtMostPerProcessAndOnlyUnderItsPrimaryRank) {
  Second(0, 3, 2 * kMs);
  const std::string prom = Prom();
  size_t n = 0;
  for (size_t at = prom.find("\nsentinel_rank_time_seconds_total{"); at != std::string::npos;
       at = prom.find("\nsentinel_rank_time_seconds_total{", at + 1)) {
    ++n;
  }
  EXPECT_EQ(n, 4u * kRanks);
  EXPECT_NE(prom.find("# TYPE sentinel_rank_time_seconds_total counter\n"), std::string::npos);
}

}  // namespace
}  // namespace sentinel::collector
