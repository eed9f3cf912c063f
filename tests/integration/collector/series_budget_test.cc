// The /metrics series budget on the real sentineld: a simulated node of 8 ranks runs
// jobs in a row, each with 6 communicators, 5 functions and 6 size buckets (node_feeder.h). In the
// default mode a rank contributes at most 100 series, the count does not grow from job to job, and
// an ended job's series leave /metrics after --series-retention (while the JSON API keeps every
// communicator); per-communicator and per-size series appear only with --metrics-detail or the
// --metrics-comms allow-list.
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

#include "tests/integration/collector/daemon_fixture.h"
#include "tests/integration/collector/node_feeder.h"

namespace sentinel::testing {
namespace {

struct Series {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// The samples of a text exposition (0.0.4), one per series.
std::vector<Series> ParseExposition(const std::string& body) {
  std::vector<Series> out;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    Series s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') s.name.push_back(line[i++]);
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        std::string key;
        while (i < line.size() && line[i] != '=') key.push_back(line[i++]);
        i += 2;  // ="
        std::string value;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) ++i;
          value.push_back(line[i++]);
        }
        ++i;  // closing quote
        if (i < line.size() && line[i] == ',') ++i;
        s.labels[key] = value;
      }
    }
    s.value = std::atof(line.c_str() + line.rfind(' ') + 1);
    out.push_back(std::move(s));
  }
  return out;
}

std::string Hex(uint64_t comm) { return absl::StrFormat("0x%016x", comm); }

std::set<std::string> LabelValues(const std::vector<Series>& series, const std::string& key) {
  std::set<std::string> out;
  for (const Series& s : series) {
    auto it = s.labels.find(key);
    if (it != s.labels.end()) out.insert(it->second);
  }
  return out;
}

// Series that carry a size_bucket label, apart from the node-level job bus bandwidth (one series
// per function and size bucket for the whole node, see collector/README.md).
size_t SizeBucketSeries(const std::vector<Series>& series) {
  size_t n = 0;
  for (const Series& s : series) {
    if (s.labels.count("size_bucket") != 0 && s.name != "sentinel_job_busbw_gbytes_per_second") ++n;
  }
  return n;
}

class SeriesBudgetTest : public DaemonFixture {
 protected:
  // Runs `job` and waits until the daemon joined all of its world communicator's collectives.
  void RunJob(const NodeJob& job, NodeFeeder* feeder) {
    const std::string prefix = absl::StrFormat("0x%08x", job.job + 1);
    auto ready = [&] {
      for (int i = 0; i < 200; ++i) {
        const nlohmann::json j = GetJson("/v1/ranks");
        int known = 0;
        for (const auto& p : j["ranks"]) {
          for (const auto& c : p["comms"]) {
            known += c["comm"].get<std::string>().rfind(prefix, 0) == 0 && c["active"] ? 1 : 0;
          }
        }
        if (known == job.ranks * job.comms) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      return false;
    };
    ASSERT_TRUE(feeder->Run(socket_, job, ready));
    // Every world collective joined, and every rank's world in-flight state (sent after its
    // records, so possibly read in a later batch) in.
    const double want = static_cast<double>(job.Seqs() * job.funcs.size());
    double joined = 0;
    int inflight = 0;
    for (int i = 0; i < 200 && (joined != want || inflight != job.ranks); ++i) {
      joined = 0;
      inflight = 0;
      for (const Series& s : Scrape()) {
        if (s.labels.count("comm") == 0 || s.labels.at("comm") != Hex(job.Comm(0))) continue;
        if (s.name == "sentinel_collectives_joined_total") joined += s.value;
        if (s.name == "sentinel_inflight_completed" && s.value == want) ++inflight;
      }
      if (joined != want || inflight != job.ranks) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    ASSERT_EQ(inflight, job.ranks) << "the daemon did not get every rank's in-flight state";
    ASSERT_EQ(joined, want) << "the daemon did not join the world communicator's collectives";
  }
  const std::vector<Series>& Scrape() {
    std::string body;
    EXPECT_EQ(Get("/metrics", &body), 200);
    last_bytes_ = body.size();
    last_series_ = ParseExposition(body);
    return last_series_;
  }
  // The most series any one rank label carries, plus the unlabelled (node) series shared by 8.
  static double MaxPerRank(const std::vector<Series>& series, int ranks) {
    std::map<std::string, size_t> by_rank;
    size_t node = 0;
    for (const Series& s : series) {
      auto it = s.labels.find("rank");
      if (it == s.labels.end()) {
        ++node;
      } else {
        ++by_rank[it->second];
      }
    }
    size_t most = 0;
    for (const auto& [rank, n] : by_rank) most = std::max(most, n);
    return static_cast<double>(most) + static_cast<double>(node) / ranks;
  }

  std::vector<Series> last_series_;
  size_t last_bytes_ = 0;
};

TEST_F(SeriesBudgetTest, DefaultStaysWithinBudgetAcrossJobsAndEndedSeriesLeave) {
  Start({"--series-retention", "2s"});
  std::vector<size_t> counts;
  for (int j = 0; j < 3; ++j) {
    NodeJob job;
    job.job = j;
    NodeFeeder feeder;
    RunJob(job, &feeder);
    if (HasFatalFailure()) return;
    const std::vector<Series> series = Scrape();
    const double per_rank = static_cast<double>(series.size()) / job.ranks;
    std::printf("[series] default mode, job %d: %zu series, %.1f per rank (max rank %.1f), %zu B\n",
                j, series.size(), per_rank, MaxPerRank(series, job.ranks), last_bytes_);
    EXPECT_LE(per_rank, 100.0);
    EXPECT_LE(MaxPerRank(series, job.ranks), 100.0);
    counts.push_back(series.size());
    // Only the ranks' primary communicator (the world), and no size buckets.
    EXPECT_EQ(LabelValues(series, "comm"), std::set<std::string>{Hex(job.Comm(0))});
    EXPECT_EQ(SizeBucketSeries(series), 0u);
    EXPECT_EQ(LabelValues(series, "rank").size(), static_cast<size_t>(job.ranks));
    // The per-rank summaries are there.
    for (const char* name : {"sentinel_rank_lateness_seconds_count", "sentinel_rank_last_seq",
                             "sentinel_rank_duration_seconds_count", "sentinel_inflight_completed",
                             "sentinel_gpu_overlap_ratio", "sentinel_plugin_overhead_ratio"}) {
      size_t n = 0;
      for (const Series& s : series) n += s.name == name ? 1 : 0;
      EXPECT_EQ(n, static_cast<size_t>(job.ranks)) << name;
    }
    // Where each rank's time went: the four parts of every rank, under its primary communicator
    // only (collector/aggregate/time_breakdown.h), whatever its other communicators.
    std::map<std::string, size_t> parts;
    for (const Series& s : series) {
      if (s.name != "sentinel_rank_time_seconds_total") continue;
      ++parts[s.labels.at("part")];
      EXPECT_EQ(s.labels.at("comm"), Hex(job.Comm(0)));
    }
    const size_t n = static_cast<size_t>(job.ranks);
    EXPECT_EQ(parts, (std::map<std::string, size_t>{
                         {"communication", n}, {"compute", n}, {"host", n}, {"wait", n}}));
    // The JSON API keeps every communicator of every rank.
    const nlohmann::json ranks = GetJson("/v1/ranks");
    size_t comms = 0;
    for (const auto& p : ranks["ranks"]) {
      for (const auto& c : p["comms"]) {
        comms += c["comm"].get<std::string>().rfind(Hex(job.Comm(0)).substr(0, 10), 0) == 0;
      }
    }
    EXPECT_EQ(comms, static_cast<size_t>(job.ranks * job.comms));

    ASSERT_TRUE(feeder.End());
    // Within the retention the ended job's series stay (its ranks are down)...
    double down = -1;
    for (int i = 0; i < 100 && down != 0; ++i) {
      down = Metric("sentinel_rank_up{comm=\"" + Hex(job.Comm(0)) + "\",uid=\"0\",rank=\"0\"}");
      if (down != 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(down, 0) << "rank 0 of the ended job should read down within the retention";
    // ... and then they leave.
    const auto ended = std::chrono::steady_clock::now();
    std::set<std::string> left = {"?"};
    for (int i = 0; i < 200 && !left.empty(); ++i) {
      left = LabelValues(Scrape(), "comm");
      if (!left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(left.empty()) << "ended communicators still on /metrics: " << *left.begin();
    const double gone_after =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - ended).count();
    std::printf("[series] job %d's series left /metrics %.2f s after it ended (retention 2 s)\n", j,
                gone_after);
    EXPECT_EQ(LabelValues(last_series_, "rank").size(), 0u);
  }
  // The same job shape gives the same count: nothing of the earlier jobs accumulates.
  EXPECT_EQ(counts[1], counts[0]);
  EXPECT_EQ(counts[2], counts[0]);
}

TEST_F(SeriesBudgetTest, DetailOnlyWhenEnabled) {
  Start({"--metrics-detail", "comm,size"});
  NodeJob job;
  NodeFeeder feeder;
  RunJob(job, &feeder);
  if (HasFatalFailure()) return;
  const std::vector<Series>& series = Scrape();
  std::printf("[series] detail mode (comm,size): %zu series, %.1f per rank, %zu B\n", series.size(),
              static_cast<double>(series.size()) / job.ranks, last_bytes_);
  EXPECT_EQ(LabelValues(series, "comm").size(), static_cast<size_t>(job.comms));
  std::set<std::string> buckets;
  for (const Series& s : series) {
    if (s.name == "sentinel_rank_duration_seconds_count")
      buckets.insert(s.labels.at("size_bucket"));
  }
  EXPECT_EQ(buckets.size(), job.sizes.size());
  EXPECT_GT(static_cast<double>(series.size()) / job.ranks, 100.0)
      << "the detail mode should carry the per-communicator, per-size series";
}

TEST_F(SeriesBudgetTest, AllowListAddsOnlyNamedCommunicators) {
  NodeJob job;
  Start({"--metrics-comms", Hex(job.Comm(3))});
  NodeFeeder feeder;
  RunJob(job, &feeder);
  if (HasFatalFailure()) return;
  const std::vector<Series>& series = Scrape();
  EXPECT_EQ(LabelValues(series, "comm"),
            (std::set<std::string>{Hex(job.Comm(0)), Hex(job.Comm(3))}));
  EXPECT_EQ(SizeBucketSeries(series), 0u);
}

TEST(SeriesBudgetFlags, BadValuesExit2) {
  for (const char* bad : {"--metrics-detail bogus", "--metrics-detail comm,rank",
                          "--series-retention -1s", "--series-retention soon"}) {
    std::string out;
    EXPECT_EQ(RunCommand(std::string(SENTINELD_PATH) + " " + bad, &out), 2) << bad << ": " << out;
    EXPECT_NE(out.find(std::string(bad).substr(2, std::string(bad).find(' ') - 2)),
              std::string::npos)
        << "the error should name the flag: " << out;
  }
}

}  // namespace
}  // namespace sentinel::testing
