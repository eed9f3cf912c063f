// The rules' mirror (prom_mirror.h) against the cases examples/prometheus/sentinel_rules_test.yml
// gives promtool: the same inputs, the same alerts at the same evaluation instants.
#include "tests/eval/prom_mirror.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sentinel::collector::eval::prom {
namespace {

constexpr int64_t kSec = 1000000000;

Sample S(const std::string& instance, const std::string& comm, int rank, double v) {
  return {
      {{"job", "sentinel"}, {"instance", instance}, {"comm", comm}, {"rank", std::to_string(rank)}},
      v};
}

// 4 nodes x 2 ranks at 10 ms of compute between collectives; the others spend about 1.5 ms in each
// collective. From sample 8 (2m) the culprits compute 20 % longer: they spend 1 ms inside, the
// others 2 ms more (as the promtool case "20 % at 10 ms steps").
Store Scrape(int i, const std::vector<int>& slow_ranks, bool slow_compute = true) {
  static const double kJitter[4] = {0.0014, 0.0016, 0.0013, 0.0015};
  Store s;
  for (int r = 0; r < 8; ++r) {
    const std::string inst = "n" + std::to_string(r / 2 + 1);
    const bool slow =
        i >= 8 && std::find(slow_ranks.begin(), slow_ranks.end(), r) != slow_ranks.end();
    double d = kJitter[(i + r) % 4];
    if (i >= 8) d = slow ? 0.001 : d + 0.002;
    s["sentinel_rank_duration_p50_seconds"].push_back(S(inst, "0xdd", r, d));
    s["sentinel_rank_segment_p50_seconds"].push_back(
        S(inst, "0xdd", r, slow && slow_compute ? 0.012 : 0.01));
  }
  return s;
}

std::vector<AlertEvent> Named(const std::vector<AlertEvent>& v, const std::string& alert) {
  std::vector<AlertEvent> out;
  for (const AlertEvent& e : v) {
    if (e.alert == alert) out.push_back(e);
  }
  return out;
}

double Recorded(const JobwideRules& rules, const std::string& name, const std::string& rank) {
  for (const Sample& s : rules.recorded().at(name)) {
    if (s.labels.at("rank") == rank) return s.value;
  }
  return NAN;
}

// A communicator-wide recorded figure (one communicator in these cases).
double CommFigure(const JobwideRules& rules, const std::string& name) {
  const Vector& v = rules.recorded().at(name);
  return v.size() == 1 ? v[0].value : NAN;
}

double Input(const Store& scrape, const std::string& metric, const std::string& rank) {
  for (const Sample& s : scrape.at(metric)) {
    if (s.labels.at("rank") == rank) return s.value;
  }
  return NAN;
}

// The per-rank figures the rules no longer record (they compare each rank's p50 with the
// communicator's bar instead), computed as the promtool cases query them.
double LatenessShare(const JobwideRules& rules, const Store& scrape, const std::string& rank) {
  return (CommFigure(rules, "sentinel:comm_duration_p50_seconds:max") -
          Input(scrape, "sentinel_rank_duration_p50_seconds", rank)) /
         CommFigure(rules, "sentinel:comm_segment_p50_seconds:fastest_node");
}
double LatenessSpreads(const JobwideRules& rules, const Store& scrape, const std::string& rank) {
  return (CommFigure(rules, "sentinel:comm_duration_p50_seconds:median") -
          Input(scrape, "sentinel_rank_duration_p50_seconds", rank)) /
         CommFigure(rules, "sentinel:comm_duration_p50_seconds:iqr");
}
double SegmentGrowth(const JobwideRules& rules, const Store& scrape, const std::string& rank) {
  return Input(scrape, "sentinel_rank_segment_p50_seconds", rank) /
             CommFigure(rules, "sentinel:comm_segment_p50_seconds:fastest_node") -
         1;
}

// Late at 2m and 2m15s: late at 2 of the last 4 evaluations at 2m15s, named then (no `for`).
TEST(PromMirrorTest, SlowRankFiresAtItsSecondLateEvaluation) {
  JobwideRules rules;
  for (int i = 0; i <= 12; ++i) {
    const auto fired = rules.Evaluate(i * 15 * kSec, Scrape(i, {5}));
    EXPECT_TRUE(Named(fired, "SentinelJobSlowNode").empty()) << "at sample " << i;
    const auto straggler = Named(fired, "SentinelJobStraggler");
    if (i != 9) {
      EXPECT_TRUE(straggler.empty()) << "at sample " << i;
      continue;
    }
    ASSERT_EQ(straggler.size(), 1u);  // 2m15s
    EXPECT_EQ(straggler[0].labels.at("instance"), "n3");
    EXPECT_EQ(straggler[0].labels.at("rank"), "5");
    EXPECT_EQ(straggler[0].active_at_ns, 9 * 15 * kSec);
  }
  // As promtool's lateness share of rank 5 at 3m: 0.26, rank_late's value.
  EXPECT_NEAR(LatenessShare(rules, Scrape(12, {5}), "5"), 0.26, 0.005);
  EXPECT_NEAR(Recorded(rules, "sentinel:rank_late", "5"), 0.26, 0.005);
}

TEST(PromMirrorTest, EveryRankOfANodeLateIsASlowNodeNotStragglers) {
  JobwideRules rules;
  for (int i = 0; i <= 12; ++i) {
    const auto fired = rules.Evaluate(i * 15 * kSec, Scrape(i, {4, 5}));
    EXPECT_TRUE(Named(fired, "SentinelJobStraggler").empty()) << "at sample " << i;
    const auto node = Named(fired, "SentinelJobSlowNode");
    if (i != 9) {
      EXPECT_TRUE(node.empty()) << "at sample " << i;
      continue;
    }
    ASSERT_EQ(node.size(), 1u);
    EXPECT_EQ(node[0].labels.at("instance"), "n3");
    EXPECT_EQ(node[0].value, 2);
  }
}

// As the promtool case "A rank that arrives late only because it waited elsewhere".
TEST(PromMirrorTest, LateWithoutComputingLongerIsNotNamed) {
  JobwideRules rules;
  for (int i = 0; i <= 12; ++i) {
    EXPECT_TRUE(rules.Evaluate(i * 15 * kSec, Scrape(i, {5}, /*slow_compute=*/false)).empty())
        << "at sample " << i;
  }
}

// As the promtool case "under --metrics-detail comm": every node also exports an on-time
// node-local communicator; n3 is still the slow node.
TEST(PromMirrorTest, NodeLocalSeriesDoNotHideASlowNode) {
  JobwideRules rules;
  for (int i = 0; i <= 12; ++i) {
    Store s = Scrape(i, {4, 5});
    for (int n = 1; n <= 4; ++n) {
      const std::string inst = "n" + std::to_string(n);
      const std::string comm = "0x10" + std::to_string(n);
      s["sentinel_rank_duration_p50_seconds"].push_back(S(inst, comm, 0, 0.0014));
      s["sentinel_rank_segment_p50_seconds"].push_back(S(inst, comm, 0, 0.01));
    }
    const auto fired = rules.Evaluate(i * 15 * kSec, s);
    EXPECT_TRUE(Named(fired, "SentinelJobStraggler").empty()) << "at sample " << i;
    const auto node = Named(fired, "SentinelJobSlowNode");
    if (i != 9) {
      EXPECT_TRUE(node.empty()) << "at sample " << i;
      continue;
    }
    ASSERT_EQ(node.size(), 1u);
    EXPECT_EQ(node[0].labels.at("instance"), "n3");
  }
}

// As the promtool cases "Half the job" and "Flicker": 2 nodes x 2 ranks at 200 ms of compute;
// from 2m (sample 8) n2's ranks compute 10 % longer (both at once, or by turns: 220 ms, then
// 209 ms, never both over the bar at the same evaluation) and n1's wait 20 ms for them.
Store HalfTheJob(int i, bool flicker) {
  static const double kJitter[4] = {0.0041, 0.0039, 0.0040, 0.0042};
  Store s;
  for (int r = 0; r < 4; ++r) {
    const std::string inst = r < 2 ? "n1" : "n2";
    const double j = kJitter[(i + r) % 4];
    double d = j;
    double seg = r % 2 == 0 ? 0.2 : 0.201;
    if (i >= 8 && r < 2) d = j + 0.02;
    if (i >= 8 && r >= 2) {
      d = 0.004;
      seg = r == 2 ? 0.22 : 0.221;
      if (flicker) seg = ((i % 2 == 0) == (r == 2)) ? 0.22 : 0.209;
    }
    s["sentinel_rank_duration_p50_seconds"].push_back(S(inst, "0xe1", r, d));
    s["sentinel_rank_segment_p50_seconds"].push_back(S(inst, "0xe1", r, seg));
  }
  return s;
}

TEST(PromMirrorTest, HalfTheJobSlowIsNamedAgainstTheFastestNode) {
  JobwideRules rules;
  for (int i = 0; i <= 15; ++i) {
    const auto fired = rules.Evaluate(i * 15 * kSec, HalfTheJob(i, false));
    EXPECT_TRUE(Named(fired, "SentinelJobStraggler").empty()) << "at sample " << i;
    const auto node = Named(fired, "SentinelJobSlowNode");
    if (i != 9) {
      EXPECT_TRUE(node.empty()) << "at sample " << i;
      continue;
    }
    ASSERT_EQ(node.size(), 1u);  // 2m15s
    EXPECT_EQ(node[0].labels.at("instance"), "n2");
    EXPECT_EQ(node[0].value, 2);
  }
  // The median over all four ranks moved to 210.5 ms; the fastest node stayed at 200.5 ms.
  ASSERT_EQ(rules.recorded().at("sentinel:comm_segment_p50_seconds:fastest_node").size(), 1u);
  EXPECT_NEAR(rules.recorded().at("sentinel:comm_segment_p50_seconds:fastest_node")[0].value,
              0.2005, 1e-9);
  EXPECT_NEAR(SegmentGrowth(rules, HalfTheJob(15, false), "2"), 0.0973, 0.0005);
  EXPECT_NEAR(LatenessShare(rules, HalfTheJob(15, false), "2"), 0.1007, 0.0005);
}

TEST(PromMirrorTest, AFlickeringSlowNodeIsNamedAndNotItsRanks) {
  JobwideRules rules;
  for (int i = 0; i <= 15; ++i) {
    const auto fired = rules.Evaluate(i * 15 * kSec, HalfTheJob(i, true));
    EXPECT_TRUE(Named(fired, "SentinelJobStraggler").empty()) << "at sample " << i;
    int late_n2 = 0;
    for (const Sample& l : rules.recorded().at("sentinel:rank_late")) {
      if (l.labels.at("instance") == "n2") ++late_n2;
    }
    EXPECT_EQ(late_n2, i >= 8 ? 1 : 0) << "at sample " << i;  // never both at once
    const auto node = Named(fired, "SentinelJobSlowNode");
    if (i != 11) {
      EXPECT_TRUE(node.empty()) << "at sample " << i;
      continue;
    }
    ASSERT_EQ(node.size(), 1u);  // 2m45s: each rank late at 2 of the last 4 evaluations
    EXPECT_EQ(node[0].labels.at("instance"), "n2");
  }
}

TEST(PromMirrorTest, CountOverTimeCountsTheSamplesInTheLeftOpenRange) {
  History h;
  const Vector one = {S("a", "c", 0, 1)};
  for (int i = 0; i < 6; ++i) {
    if (i != 3) h.Add(i * 15 * kSec, one);  // absent (stale) at the fourth evaluation
  }
  const Vector c = h.CountOverTime(5 * 15 * kSec, 50 * kSec);  // samples at 30, 60, 75 s
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].value, 3);
  EXPECT_EQ(h.CountOverTime(5 * 15 * kSec, 45 * kSec)[0].value, 2);  // 30 s is not in (30, 75]
}

TEST(PromMirrorTest, OneScrapeDipIsNotNamed) {
  JobwideRules rules;
  for (int i = 0; i <= 12; ++i) {
    Store s = Scrape(i, {});
    if (i == 10) s["sentinel_rank_duration_p50_seconds"][2].value = 0.0002;
    EXPECT_TRUE(rules.Evaluate(i * 15 * kSec, s).empty()) << "at sample " << i;
  }
}

// As the promtool cases "Noise spread over many ranks" and "... with a real straggler": 8 nodes of
// one rank, 100 ms between collectives, p50s inside the collectives spread from 20 to 32 ms; rank 0
// computes 10 % longer (noise) or, from sample 8, 30 % longer (a straggler).
Store Spread(int i, double rank0_before, double rank0_after, double seg0_before, double seg0_after,
             const std::string& comm) {
  static const double kP50[8] = {0, 0.024, 0.026, 0.028, 0.029, 0.030, 0.031, 0.032};
  Store s;
  for (int r = 0; r < 8; ++r) {
    const std::string inst = "n" + std::to_string(r + 1);
    const double d = r != 0 ? kP50[r] : (i >= 8 ? rank0_after : rank0_before);
    s["sentinel_rank_duration_p50_seconds"].push_back(S(inst, comm, r, d));
    const double seg = r != 0 ? 0.1 : (i >= 8 ? seg0_after : seg0_before);
    s["sentinel_rank_segment_p50_seconds"].push_back(S(inst, comm, r, seg));
  }
  return s;
}

TEST(PromMirrorTest, NoiseSpreadOverManyRanksIsNotLate) {
  JobwideRules rules;
  for (int i = 0; i <= 20; ++i) {
    EXPECT_TRUE(rules.Evaluate(i * 15 * kSec, Spread(i, 0.020, 0.020, 0.11, 0.11, "0xf0")).empty())
        << "at sample " << i;
  }
  // 12 % of the compute below the longest (over the 5 % bar), 1.79 interquartile ranges below
  // the median.
  const Store last = Spread(20, 0.020, 0.020, 0.11, 0.11, "0xf0");
  EXPECT_NEAR(LatenessShare(rules, last, "0"), 0.12, 0.005);
  EXPECT_NEAR(LatenessSpreads(rules, last, "0"), 1.79, 0.005);
  EXPECT_TRUE(rules.recorded().at("sentinel:rank_late").empty());
}

TEST(PromMirrorTest, AnOutlierAmongManyRanksIsNamed) {
  JobwideRules rules;
  for (int i = 0; i <= 12; ++i) {
    const auto fired = rules.Evaluate(i * 15 * kSec, Spread(i, 0.027, 0.002, 0.1, 0.13, "0xf1"));
    EXPECT_TRUE(Named(fired, "SentinelJobStraggler").empty()) << "at sample " << i;
    const auto node = Named(fired, "SentinelJobSlowNode");
    if (i != 9) {
      EXPECT_TRUE(node.empty()) << "at sample " << i;
      continue;
    }
    ASSERT_EQ(node.size(), 1u);  // its node's only rank: a slow node
    EXPECT_EQ(node[0].labels.at("instance"), "n1");
  }
  EXPECT_NEAR(LatenessSpreads(rules, Spread(12, 0.027, 0.002, 0.1, 0.13, "0xf1"), "0"), 5.58,
              0.005);
}

// As the promtool case "A spread of 0 over more than 4 nodes": 6 nodes of one rank, identical
// p50s (30 ms inside, 100 ms between) until sample 8, then rank 0 computes 20 % longer and spends
// 20 ms inside. The interquartile range stays 0, so the 5 % bar binds (25 ms).
Store ZeroSpread(int i) {
  Store s;
  for (int r = 0; r < 6; ++r) {
    const std::string inst = "n" + std::to_string(r + 1);
    const bool slow = r == 0 && i >= 8;
    s["sentinel_rank_duration_p50_seconds"].push_back(S(inst, "0xf2", r, slow ? 0.02 : 0.03));
    s["sentinel_rank_segment_p50_seconds"].push_back(S(inst, "0xf2", r, slow ? 0.12 : 0.1));
  }
  return s;
}

TEST(PromMirrorTest, ASpreadOfZeroLeavesTheShareBarToJudge) {
  JobwideRules rules;
  for (int i = 0; i <= 12; ++i) {
    const auto fired = rules.Evaluate(i * 15 * kSec, ZeroSpread(i));
    EXPECT_NEAR(CommFigure(rules, "sentinel:comm_duration_p50_seconds:late_below"), 0.025, 1e-12);
    EXPECT_EQ(CommFigure(rules, "sentinel:comm_duration_p50_seconds:iqr"), 0);
    EXPECT_EQ(rules.recorded().at("sentinel:rank_late").size(), i >= 8 ? 1u : 0u)
        << "at sample " << i;
    EXPECT_TRUE(Named(fired, "SentinelJobStraggler").empty()) << "at sample " << i;
    const auto node = Named(fired, "SentinelJobSlowNode");
    if (i != 9) {
      EXPECT_TRUE(node.empty()) << "at sample " << i;
      continue;
    }
    ASSERT_EQ(node.size(), 1u);  // 2m15s: its node's only rank
    EXPECT_EQ(node[0].labels.at("instance"), "n1");
  }
  EXPECT_NEAR(Recorded(rules, "sentinel:rank_late", "0"), 0.1, 1e-9);
}

// One rank per node n1..n4 of communicator `comm`: the ranks in `behind` have not started the
// collective (gpu_started 10, nothing in flight), the others have waited in it for `age` seconds.
// With `elsewhere` >= 0 every node exports sentinel_inflight_waiting_elsewhere, 1 for that rank
// only; otherwise the series is absent (a sentineld that does not export it).
Store StuckComm(const std::string& comm, double age, const std::set<int>& behind, int elsewhere) {
  Store s;
  for (int r = 0; r < 4; ++r) {
    const std::string inst = "n" + std::to_string(r + 1);
    const bool is_behind = behind.count(r) != 0;
    s["sentinel_inflight_gpu_started"].push_back(S(inst, comm, r, is_behind ? 10 : 11));
    s["sentinel_inflight_oldest_age_seconds"].push_back(S(inst, comm, r, is_behind ? 0 : age));
    s["sentinel_inflight_connected"].push_back(S(inst, comm, r, 1));
    if (elsewhere >= 0) {
      s["sentinel_inflight_waiting_elsewhere"].push_back(S(inst, comm, r, r == elsewhere ? 1 : 0));
    }
  }
  return s;
}

TEST(PromMirrorTest, InFlightCulpritFiresAtTheFirstEvaluationPastThirtySeconds) {
  JobwideRules rules;
  for (int i = 0; i <= 6; ++i) {
    const Store s = StuckComm("0xee", i * 15.0, {2}, -1);  // stuck since 0
    const auto fired = Named(rules.Evaluate(i * 15 * kSec, s), "SentinelJobInFlightHangCulprit");
    if (i != 3) {  // 45 s > 30 at the third evaluation; 30 is not > 30
      EXPECT_TRUE(fired.empty()) << "at sample " << i;
      continue;
    }
    ASSERT_EQ(fired.size(), 1u);
    EXPECT_EQ(fired[0].labels.at("rank"), "2");
    EXPECT_EQ(fired[0].value, 1);
  }
}

// The ranks behind are recorded only where a collective has been in flight 5 s or more: a
// running job, whose ranks are always a collective or two apart, records none.
TEST(PromMirrorTest, RanksBehindAreRecordedOnlyInACommunicatorStuckFiveSeconds) {
  JobwideRules rules;
  rules.Evaluate(0, StuckComm("0xee", 4.9, {2}, -1));
  EXPECT_TRUE(rules.recorded().at("sentinel:rank_inflight_behind").empty());
  const auto fired = rules.Evaluate(15 * kSec, StuckComm("0xee", 5, {2}, -1));
  ASSERT_EQ(rules.recorded().at("sentinel:rank_inflight_behind").size(), 1u);
  EXPECT_EQ(rules.recorded().at("sentinel:rank_inflight_behind")[0].labels.at("rank"), "2");
  EXPECT_EQ(rules.recorded().at("sentinel:rank_inflight_behind")[0].value, 1);
  EXPECT_TRUE(Named(fired, "SentinelJobInFlightHangCulprit").empty());  // not past 30 s yet
}

// As the promtool case: rank 1 has not started the collective because its process waits in
// another node-spanning communicator's collective (sentinel_inflight_waiting_elsewhere 1), rank 2
// never started it: only rank 2 is named, at the same evaluation as without the victim.
TEST(PromMirrorTest, InFlightCulpritSkipsARankWaitingElsewhere) {
  JobwideRules rules;
  for (int i = 0; i <= 6; ++i) {
    const Store s = StuckComm("0xed", i * 15.0, {1, 2}, 1);  // stuck since 0
    const auto fired = Named(rules.Evaluate(i * 15 * kSec, s), "SentinelJobInFlightHangCulprit");
    if (i != 3) {
      EXPECT_TRUE(fired.empty()) << "at sample " << i;
      continue;
    }
    ASSERT_EQ(fired.size(), 1u);
    EXPECT_EQ(fired[0].labels.at("rank"), "2");
  }
}

TEST(PromMirrorTest, QuantileInterpolatesAsPrometheus) {
  const Vector v = {S("a", "c", 0, 1), S("a", "c", 1, 2), S("a", "c", 2, 4), S("a", "c", 3, 10)};
  const Vector q = QuantileBy(v, {"job", "comm"}, 0.5);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_DOUBLE_EQ(q[0].value, 3);  // rank 1.5 between 2 and 4
}

// As the promtool case: 4 ranks on 2 nodes stuck at one position of comm 0xf1 from 0 (every
// kernel started), rank 3 on another operation (digest); and comm 0xf2's 2 ranks split one to
// one. Named at the first evaluation past 30 s: rank 3 of 0xf1, both ranks of 0xf2; no culprit.
Store Disagreeing(double age) {
  Store s;
  auto rank = [&s, age](const std::string& comm, int r, double ordinal, double digest) {
    const std::string inst = r < 2 ? "n1" : "n2";
    s["sentinel_inflight_gpu_started"].push_back(S(inst, comm, r, ordinal));
    s["sentinel_inflight_oldest_age_seconds"].push_back(S(inst, comm, r, age));
    if (age < 5) return;  // sentineld exports what a rank is stuck on from 5 s
    s["sentinel_inflight_stuck_ordinal"].push_back(S(inst, comm, r, ordinal));
    s["sentinel_inflight_stuck_signature"].push_back(S(inst, comm, r, digest));
  };
  for (int r = 0; r < 4; ++r) rank("0xf1", r, 1041, r < 3 ? 149101467473106 : 98765432101);
  rank("0xf2", 0, 7, 149101467473106);
  rank("0xf2", 2, 7, 55555555555);
  return s;
}

TEST(PromMirrorTest, RanksStuckOnDifferentOperationsAreNamed) {
  JobwideRules rules;
  for (int i = 0; i <= 6; ++i) {
    const auto fired = rules.Evaluate(i * 15 * kSec, Disagreeing(i * 15.0));
    EXPECT_TRUE(Named(fired, "SentinelJobInFlightHangCulprit").empty()) << "at sample " << i;
    const auto named = Named(fired, "SentinelJobCollectiveMismatch");
    if (i != 3) {
      EXPECT_TRUE(named.empty()) << "at sample " << i;
      continue;
    }
    std::set<std::string> who;
    for (const AlertEvent& e : named) who.insert(e.labels.at("comm") + "/" + e.labels.at("rank"));
    EXPECT_EQ(who, (std::set<std::string>{"0xf1/3", "0xf2/0", "0xf2/2"}));
  }
  // The majority's digest is the median exactly: ranks 0-2 of 0xf1 agree with it.
  size_t agree = 0;
  for (const Sample& a : rules.recorded().at("sentinel:inflight_stuck_agrees")) {
    if (a.labels.at("comm") == "0xf1") ++agree;
  }
  EXPECT_EQ(agree, 3u);
}

// Ranks stuck at two positions (a rank one collective behind has its own oldest in flight):
// only the first position is compared, where they agree: nothing named.
TEST(PromMirrorTest, OnlyTheFirstStuckPositionIsCompared) {
  JobwideRules rules;
  for (int i = 0; i <= 6; ++i) {
    Store s;
    for (int r = 0; r < 4; ++r) {
      const std::string inst = "n" + std::to_string(r + 1);
      const double ordinal = r == 3 ? 1040 : 1041;
      s["sentinel_inflight_gpu_started"].push_back(S(inst, "0xf3", r, ordinal));
      s["sentinel_inflight_oldest_age_seconds"].push_back(S(inst, "0xf3", r, i * 15.0));
      s["sentinel_inflight_stuck_ordinal"].push_back(S(inst, "0xf3", r, ordinal));
      s["sentinel_inflight_stuck_signature"].push_back(
          S(inst, "0xf3", r, r == 3 ? 98765432101 : 149101467473106));
    }
    EXPECT_TRUE(Named(rules.Evaluate(i * 15 * kSec, s), "SentinelJobCollectiveMismatch").empty())
        << "at sample " << i;
  }
}

// As the promtool case: rank 0 (n1) sits in comm 0xa1's collective and is behind in 0xb2; rank 1
// (n2) sits in 0xb2's and is behind in 0xa1. Both named by the cycle at the first evaluation
// past 30 s, neither by the in-flight culprit rule (each waits elsewhere).
TEST(PromMirrorTest, TwoRanksWaitingInEachOthersCommunicatorAreACycle) {
  JobwideRules rules;
  for (int i = 0; i <= 6; ++i) {
    const double age = i * 15.0;
    Store s;
    auto rank = [&s, age](const std::string& inst, const std::string& comm, int r, bool inside,
                          const std::string& waits_in, double waits_ordinal) {
      s["sentinel_inflight_gpu_started"].push_back(S(inst, comm, r, inside ? 40 : 39));
      s["sentinel_inflight_oldest_age_seconds"].push_back(S(inst, comm, r, inside ? age : 0));
      s["sentinel_inflight_waiting_elsewhere"].push_back(S(inst, comm, r, inside ? 0 : 1));
      if (inside || age < 5) return;
      Sample w = S(inst, comm, r, waits_ordinal);
      w.labels["in_comm"] = waits_in;
      s["sentinel_inflight_waiting_in"].push_back(w);
    };
    rank("n1", "0xa1", 0, true, "", 0);
    rank("n2", "0xa1", 1, false, "0xb2", 12);
    rank("n2", "0xb2", 1, true, "", 0);
    rank("n1", "0xb2", 0, false, "0xa1", 40);
    const auto fired = rules.Evaluate(i * 15 * kSec, s);
    EXPECT_TRUE(Named(fired, "SentinelJobInFlightHangCulprit").empty()) << "at sample " << i;
    const auto cycle = Named(fired, "SentinelJobDeadlockCycle");
    if (i != 3) {
      EXPECT_TRUE(cycle.empty()) << "at sample " << i;
      continue;
    }
    ASSERT_EQ(cycle.size(), 2u);
    std::set<std::string> who;
    for (const AlertEvent& e : cycle) {
      who.insert(e.labels.at("comm") + "/" + e.labels.at("rank") + " in " + e.labels.at("in_comm"));
    }
    EXPECT_EQ(who, (std::set<std::string>{"0xa1/1 in 0xb2", "0xb2/0 in 0xa1"}));
  }
}

// One rank waiting in another communicator with nobody waiting back is no cycle.
TEST(PromMirrorTest, WaitingElsewhereWithoutTheWayBackIsNoCycle) {
  JobwideRules rules;
  for (int i = 0; i <= 6; ++i) {
    Store s;
    s["sentinel_inflight_gpu_started"].push_back(S("n1", "0xa2", 0, 40));
    s["sentinel_inflight_oldest_age_seconds"].push_back(S("n1", "0xa2", 0, i * 15.0));
    s["sentinel_inflight_gpu_started"].push_back(S("n2", "0xa2", 1, 39));
    s["sentinel_inflight_oldest_age_seconds"].push_back(S("n2", "0xa2", 1, 0));
    Sample w = S("n2", "0xa2", 1, 12);
    w.labels["in_comm"] = "0xb3";
    s["sentinel_inflight_waiting_in"].push_back(w);
    EXPECT_TRUE(Named(rules.Evaluate(i * 15 * kSec, s), "SentinelJobDeadlockCycle").empty())
        << "at sample " << i;
  }
}

}  // namespace
}  // namespace sentinel::collector::eval::prom
