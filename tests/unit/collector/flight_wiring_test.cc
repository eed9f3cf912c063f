// The flight record wired into sentineld's aggregator: each local rank's history is fed from the
// records and in-flight frames it sends, a confirmed hang writes one record per stuck collective
// beside the record log (its path in the hang alert), older files are pruned, a record is written
// on demand for the job's own user only, and a mismatch verdict names where the ranks' histories
// first diverged when that is before the stuck collective.
#include <dirent.h>
#include <httplib.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

#include "collector/aggregate/aggregator.h"
#include "collector/config/config.h"
#include "collector/export/http_server.h"
#include "collector/export/record_route.h"
#include "collector/log/flight_record.h"
#include "tests/unit/collector/flight_test_util.h"
#include "tests/unit/collector/wire_test_util.h"

namespace sentinel::collector {
namespace {

using testing::Coll;
using testing::InFlight;
using testing::kBf16;
using testing::kMiB;
using testing::kSec;

constexpr uint64_t kComm = 0x00000000000000c2ULL;
constexpr uint32_t kUid = 1000;
constexpr int kRanks = 4;

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = readdir(d)) {  // NOLINT(concurrency-mt-unsafe): one thread
    const std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

void Touch(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "we");
  ASSERT_NE(f, nullptr) << path;
  std::fputs("{}", f);
  std::fclose(f);
}

class FlightWiringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "flight-wiring-XXXXXX";
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    ASSERT_EQ(chmod(dir_.c_str(), 0700), 0);
    config_.node_name = "node-a";
    config_.record_log = dir_ + "/records.jsonl";
    config_.hang_timeout_ns = 2 * kSec;
  }
  void TearDown() override {
    for (const std::string& f : FilesIn(dir_)) unlink((dir_ + "/" + f).c_str());
    rmdir(dir_.c_str());
  }
  void Start() {
    agg_ = std::make_unique<Aggregator>(config_, &clock_);
    for (int r = 0; r < kRanks; ++r) {
      agg_->NoteAccepted(r + 1, static_cast<uint32_t>(500 + r), uid_);
      agg_->OnHello(r + 1, sentinel::testing::MakeHello(9));
      sentinel::testing::DeliverControl(agg_.get(), r + 1, kSentinelWireCommInit,
                                        sentinel::testing::MakeCommInit(kComm, r, kRanks));
    }
  }
  // Positions 1..n completed by every rank: AllReduce 16 MiB bf16, but `odd_rank` issued
  // `odd_bytes` at `odd_position` (0: none).
  void Completed(uint32_t n, int odd_rank = -1, uint32_t odd_position = 0, uint64_t odd_bytes = 0) {
    for (uint32_t p = 1; p <= n; ++p) {
      for (int r = 0; r < kRanks; ++r) {
        const uint64_t bytes = r == odd_rank && p == odd_position ? odd_bytes : 16 * kMiB;
        const SentinelWireCollRecord rec = Coll(kComm, r, kRanks, p, kSentinelFuncAllReduce, bytes,
                                                kBf16, clock_.MonoNs() + p * 1000000);
        agg_->OnRecords(r + 1, &rec, 1);
      }
    }
  }
  // Every rank reports: ranks in `inside` wait in collective n + 1 since `since` (rank 3 with
  // AllGather 4 MiB when `rank3_gathers`), the others are still at n.
  void Report(uint64_t n, const std::vector<int>& inside, int64_t since, bool rank3_gathers) {
    for (int r = 0; r < kRanks; ++r) {
      const bool in = std::find(inside.begin(), inside.end(), r) != inside.end();
      const bool gathers = rank3_gathers && r == 3;
      SentinelWireInFlight f = InFlight(kComm, r, kRanks, n, in ? n + 1 : n, in ? n + 1 : n,
                                        gathers ? kSentinelFuncAllGather : kSentinelFuncAllReduce,
                                        since, clock_.MonoNs());
      if (in) {
        f.flags |= kSentinelInFlightSignature;
        f.oldest_bytes = gathers ? 4 * kMiB : 16 * kMiB;
        f.oldest_datatype = kBf16;
        f.oldest_root = -1;
      }
      sentinel::testing::DeliverControl(agg_.get(), r + 1, kSentinelWireInFlight, f);
    }
  }
  // Ticks once a second until the hang alert fires (at most 30 s); returns it.
  Alert TickUntilHang(uint64_t n, const std::vector<int>& inside, bool rank3_gathers) {
    const int64_t since = clock_.MonoNs();
    for (int s = 0; s < 30; ++s) {
      Report(n, inside, since, rank3_gathers);
      clock_.Advance(kSec);
      agg_->Tick();
      for (const Alert& a : agg_->SnapshotAlerts(ApiViewer::Everything())) {
        if (a.kind == AlertKind::kHang && a.firing()) return a;
      }
    }
    ADD_FAILURE() << "no hang alert";
    return Alert{};
  }
  std::vector<std::string> Records() {
    std::vector<std::string> out;
    for (const std::string& f : FilesIn(dir_)) {
      if (f.rfind("flight-", 0) == 0) out.push_back(f);
    }
    return out;
  }

  std::string dir_;
  uint32_t uid_ = kUid;  // the job's user
  Config config_;
  sentinel::testing::FakeClock clock_;
  std::unique_ptr<Aggregator> agg_;
};

// Rank 2 never launches collective #6. The alert names the file; the file holds every local
// rank's five completed operations and the in-flight one of the waiting ranks, and is written once
// for the stuck collective however long it stays stuck.
TEST_F(FlightWiringTest, HangWritesOneRecordNamedInTheAlert) {
  Start();
  Completed(5);
  EXPECT_EQ(agg_->FlightRanks(), static_cast<uint64_t>(kRanks));
  const Alert a = TickUntilHang(5, {0, 1, 3}, false);
  ASSERT_TRUE(a.evidence.contains("flight_record")) << a.evidence.dump();
  ASSERT_TRUE(a.evidence["flight_record"].is_string()) << a.evidence.dump();
  const std::string path = a.evidence["flight_record"].get<std::string>();
  EXPECT_EQ(path.rfind(dir_ + "/flight-node-a-", 0), 0u) << path;
  EXPECT_NE(path.find("-hang-0x00000000000000c2.json"), std::string::npos) << path;
  EXPECT_NE(a.summary.find("; flight record: " + path), std::string::npos) << a.summary;

  FlightRecord r;
  ASSERT_TRUE(ReadFlightRecordFile(path, &r).ok());
  EXPECT_EQ(r.node, "node-a");
  EXPECT_EQ(r.reason, "hang");
  EXPECT_EQ(r.alert_id, "hang-0x00000000000000c2");
  EXPECT_NE(r.verdict.find("rank 2 never_launched"), std::string::npos) << r.verdict;
  EXPECT_EQ(r.ops_per_rank, 2000u);
  ASSERT_EQ(r.comms.size(), 1u);
  EXPECT_EQ(r.comms[0].hash, kComm);
  ASSERT_EQ(r.comms[0].ranks.size(), static_cast<size_t>(kRanks));
  for (const FlightRank& rank : r.comms[0].ranks) {
    SCOPED_TRACE(rank.rank);
    EXPECT_EQ(rank.pid, static_cast<uint32_t>(500 + rank.rank));
    ASSERT_GE(rank.ops.size(), 5u);
    EXPECT_EQ(rank.ops[0].position, 1u);
    EXPECT_EQ(rank.ops[4].position, 5u);
    EXPECT_EQ(rank.ops[4].state, FlightState::kCompleted);
    EXPECT_TRUE(rank.progress.known);
    if (rank.rank == 2) {
      EXPECT_EQ(rank.ops.size(), 5u);
    } else {
      ASSERT_EQ(rank.ops.size(), 6u);
      EXPECT_EQ(rank.ops[5].position, 6u);
      EXPECT_EQ(rank.ops[5].state, FlightState::kKernelStarted);
    }
  }
  for (int s = 0; s < 5; ++s) {  // still stuck at #6: no second file
    Report(5, {0, 1, 3}, clock_.MonoNs() - 10 * kSec, false);
    clock_.Advance(kSec);
    agg_->Tick();
  }
  EXPECT_EQ(Records().size(), 1u);
}

// Rank 2 never reaches #3 of the hung communicator because its process waits in another one (a
// deadlock's other end, or a victim's wait): the record holds that communicator too.
TEST_F(FlightWiringTest, RecordHoldsTheCommunicatorsItsRanksWaitIn) {
  constexpr uint64_t kOther = 0x00000000000000b1ULL;
  Start();
  Completed(2);
  sentinel::testing::DeliverControl(agg_.get(), 3, kSentinelWireCommInit,
                                    sentinel::testing::MakeCommInit(kOther, 0, 2));
  const int64_t since = clock_.MonoNs();
  Alert a;
  for (int s = 0; s < 30 && a.id.empty(); ++s) {
    Report(2, {0, 1, 3}, since, false);
    sentinel::testing::DeliverControl(
        agg_.get(), 3, kSentinelWireInFlight,
        InFlight(kOther, 0, 2, 0, 1, 1, kSentinelFuncAllReduce, since, clock_.MonoNs()));
    clock_.Advance(kSec);
    agg_->Tick();
    for (const Alert& x : agg_->SnapshotAlerts(ApiViewer::Everything())) {
      if (x.kind == AlertKind::kHang && x.firing() && x.comm == "0x00000000000000c2") a = x;
    }
  }
  ASSERT_FALSE(a.id.empty()) << "no hang alert on comm c2";
  FlightRecord r;
  ASSERT_TRUE(ReadFlightRecordFile(a.evidence.value("flight_record", ""), &r).ok());
  ASSERT_EQ(r.comms.size(), 2u);
  EXPECT_EQ(r.comms[0].hash, kComm);
  EXPECT_EQ(r.comms[1].hash, kOther);
  ASSERT_EQ(r.comms[1].ranks.size(), 1u);
  EXPECT_EQ(r.comms[1].ranks[0].pid, 502u) << "rank 2's process";
  ASSERT_EQ(r.comms[1].ranks[0].ops.size(), 1u);
  EXPECT_EQ(r.comms[1].ranks[0].ops[0].state, FlightState::kKernelStarted);
}

// The record of a hang beside the record log, never more of each kind than kFlightFilesKept: the
// oldest hang records of this node go; other nodes' files, on-demand records, look-alike names
// and a link are left as they are.
TEST_F(FlightWiringTest, OlderRecordsArePrunedPerKindAndNode) {
  for (int i = 0; i < 40; ++i) {
    Touch(absl::StrFormat("%s/flight-node-a-20250101T0000%02d.000Z-hang-0x%016x.json", dir_, i, i));
  }
  for (int i = 0; i < 3; ++i) {
    Touch(
        absl::StrFormat("%s/flight-node-a-20250101T0000%02d.000Z-on-demand-uid1000.json", dir_, i));
  }
  Touch(dir_ + "/flight-node-a-b-20240101T000000.000Z-hang-0x1.json");  // node "node-a-b"
  Touch(dir_ + "/flight-node-b-20240101T000000.000Z-hang-0x1.json");
  Touch(dir_ + "/flight-node-a-notatime-hang-0x1.json");
  ASSERT_EQ(
      symlink("/nonexistent", (dir_ + "/flight-node-a-20000101T000000.000Z-hang-x.json").c_str()),
      0);
  Start();
  Completed(2);
  const Alert a = TickUntilHang(2, {0, 1, 3}, false);
  const std::string path = a.evidence.value("flight_record", "");
  ASSERT_FALSE(path.empty()) << a.evidence.dump();
  std::vector<std::string> hang_a;
  size_t on_demand = 0;
  for (const std::string& f : Records()) {
    if (f.rfind("flight-node-a-2", 0) == 0 && f.find("-on-demand-") == std::string::npos &&
        f.find("20000101") == std::string::npos) {
      hang_a.push_back(f);
    }
    on_demand += f.find("-on-demand-") != std::string::npos ? 1 : 0;
  }
  ASSERT_EQ(hang_a.size(), Aggregator::kFlightFilesKept);
  // The newest 31 of the old ones (09..39) and the new one.
  EXPECT_EQ(hang_a.front(), "flight-node-a-20250101T000009.000Z-hang-0x0000000000000009.json");
  EXPECT_EQ(dir_ + "/" + hang_a.back(), path);
  EXPECT_EQ(on_demand, 3u);
  const std::vector<std::string> all = FilesIn(dir_);
  for (const char* kept :
       {"flight-node-a-b-20240101T000000.000Z-hang-0x1.json",
        "flight-node-b-20240101T000000.000Z-hang-0x1.json", "flight-node-a-notatime-hang-0x1.json",
        "flight-node-a-20000101T000000.000Z-hang-x.json"}) {
    EXPECT_NE(std::find(all.begin(), all.end(), kept), all.end()) << kept;
  }
}

// Rank 3 took another size at #3 (NCCL let it through), then issued AllGather where the others
// issued AllReduce at #6: the alert names both sides at #6 and where they first diverged.
TEST_F(FlightWiringTest, MismatchNamesTheFirstDivergenceFromTheHistories) {
  Start();
  Completed(5, /*odd_rank=*/3, /*odd_position=*/3, 8 * kMiB);
  const Alert a = TickUntilHang(5, {0, 1, 2, 3}, /*rank3_gathers=*/true);
  EXPECT_NE(a.summary.find("rank 3 issued AllGather 4 MiB as collective #6 of comm "
                           "0x00000000000000c2; the other 3 ranks issued AllReduce 16 MiB bf16"),
            std::string::npos)
      << a.summary;
  EXPECT_NE(a.summary.find("; first diverged at collective #3: rank 3 issued AllReduce 8 MiB bf16; "
                           "the other 3 ranks issued AllReduce 16 MiB bf16"),
            std::string::npos)
      << a.summary;
  EXPECT_NE(a.evidence.value("mismatch", "").find("first diverged at collective #3"),
            std::string::npos);
  // The record carries the same verdict.
  FlightRecord r;
  ASSERT_TRUE(ReadFlightRecordFile(a.evidence.value("flight_record", ""), &r).ok());
  EXPECT_NE(r.verdict.find("first diverged at collective #3"), std::string::npos) << r.verdict;
}

// Agreeing histories add nothing: the mismatch at the stuck collective is the first divergence.
TEST_F(FlightWiringTest, NoEarlierDivergenceIsNamedWhenTheHistoriesAgree) {
  Start();
  Completed(5);
  const Alert a = TickUntilHang(5, {0, 1, 2, 3}, /*rank3_gathers=*/true);
  EXPECT_NE(a.summary.find("rank 3 issued AllGather 4 MiB as collective #6"), std::string::npos)
      << a.summary;
  EXPECT_EQ(a.summary.find("first diverged"), std::string::npos) << a.summary;
}

// POST /v1/record's aggregator side: the job's own uid and root write a record; another user,
// an unknown communicator, a second request within a second and a daemon without a record log
// are refused with their reasons.
TEST_F(FlightWiringTest, OnDemandRecordIsTheOwnersAndRoots) {
  Start();
  Completed(3);
  FlightRecordAnswer a = agg_->RecordFlight({kUid, false}, std::nullopt);
  ASSERT_EQ(a.status, 200) << a.error;
  EXPECT_EQ(a.comms, std::vector<uint64_t>{kComm});
  EXPECT_EQ(a.ranks, static_cast<size_t>(kRanks));
  EXPECT_NE(a.path.find("-on-demand-uid1000.json"), std::string::npos) << a.path;
  FlightRecord r;
  ASSERT_TRUE(ReadFlightRecordFile(a.path, &r).ok());
  EXPECT_EQ(r.reason, "on_demand");
  EXPECT_TRUE(r.alert_id.empty());
  ASSERT_EQ(r.comms.size(), 1u);
  EXPECT_EQ(r.comms[0].ranks[0].ops.size(), 3u);

  EXPECT_EQ(agg_->RecordFlight({kUid, false}, std::nullopt).status, 429);
  const FlightRecordAnswer other = agg_->RecordFlight({kUid + 1, false}, kComm);
  EXPECT_EQ(other.status, 404) << "another user's job";
  EXPECT_NE(other.error.find("of yours"), std::string::npos) << other.error;
  EXPECT_EQ(agg_->RecordFlight({0, true}, uint64_t{0x1234}).status, 404);
  const FlightRecordAnswer root = agg_->RecordFlight({0, true}, kComm);
  ASSERT_EQ(root.status, 200) << root.error;
  clock_.Advance(2 * kSec);
  EXPECT_EQ(agg_->RecordFlight({kUid, false}, kComm).status, 200) << "a second later";

  config_.record_log.clear();
  Aggregator without(config_, &clock_);
  const FlightRecordAnswer off = without.RecordFlight({kUid, false}, std::nullopt);
  EXPECT_EQ(off.status, 409);
  EXPECT_NE(off.error.find("--record-log"), std::string::npos) << off.error;
}

// Without a record log no file is written: the alert says so in its evidence, nothing else.
TEST_F(FlightWiringTest, NoRecordLogNoFileAndTheAlertSaysWhy) {
  config_.record_log.clear();
  Start();
  Completed(2);
  const Alert a = TickUntilHang(2, {0, 1, 3}, false);
  EXPECT_TRUE(a.evidence["flight_record"].is_null()) << a.evidence.dump();
  EXPECT_NE(a.evidence.value("flight_record_error", "").find("--record-log"), std::string::npos);
  EXPECT_EQ(a.summary.find("flight record"), std::string::npos) << a.summary;
  EXPECT_TRUE(Records().empty());
}

// A directory other users may write to is refused at the write (common/fs_trust.h): the alert
// then says the record was not written and why, instead of naming a file that is not there.
TEST_F(FlightWiringTest, FailedWriteIsSaidInTheAlert) {
  Start();
  Completed(2);
  ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);
  const Alert first = TickUntilHang(2, {0, 1, 3}, false);
  EXPECT_TRUE(first.evidence["flight_record"].is_string()) << "named before the write";
  Report(2, {0, 1, 3}, clock_.MonoNs() - 5 * kSec, false);
  clock_.Advance(kSec);
  agg_->Tick();
  Alert a;
  for (const Alert& x : agg_->SnapshotAlerts(ApiViewer::Everything())) {
    if (x.kind == AlertKind::kHang && x.firing()) a = x;
  }
  EXPECT_TRUE(a.evidence["flight_record"].is_null()) << a.evidence.dump();
  const std::string why = a.evidence.value("flight_record_error", "");
  EXPECT_EQ(why.rfind("not written: ", 0), 0u) << why;
  EXPECT_NE(a.summary.find("; flight record not written: "), std::string::npos) << a.summary;
  EXPECT_TRUE(Records().empty());
  ASSERT_EQ(chmod(dir_.c_str(), 0700), 0);
}

// The history is bounded per user: past the share a rank keeps none (counted), and an ended
// communicator gives its ranks' share back.
TEST_F(FlightWiringTest, HistoriesAreBoundedPerUserAndGivenBackAtTheEnd) {
  config_.flight_ops = 100000;  // ~7 MiB a rank: 9 fit in the 64 MiB share
  Start();
  const int64_t per_rank = FlightRankHistory::BytesFor(100000);
  const int64_t fit = Aggregator::kUidFlightBudgetBytes / per_rank;
  ASSERT_LT(fit, 16);
  // Ranks of other communicators of the same user until the share is spent.
  for (int c = 0; c < 16; ++c) {
    const SentinelWireCollRecord rec = Coll(0x1000 + static_cast<uint64_t>(c), 0, 1, 1,
                                            kSentinelFuncAllReduce, kMiB, kBf16, clock_.MonoNs());
    agg_->OnRecords(1, &rec, 1);
  }
  EXPECT_EQ(agg_->FlightRanks(), static_cast<uint64_t>(fit));
  EXPECT_EQ(agg_->FlightRefused(), static_cast<uint64_t>(16 - fit));
  agg_->OnDisconnect(1);  // its communicators end: their histories go
  EXPECT_EQ(agg_->FlightRanks(), 0u);
  EXPECT_EQ(agg_->RecordFlight({kUid, false}, std::nullopt).status, 404);
}

// The route end to end in the process: POST /v1/record from this process's own user (the kernel
// names it through /proc/net/tcp) writes the record of its job and answers the path; a repeat
// within a second, a bad hash, a body and a GET are refused.
TEST_F(FlightWiringTest, PostRecordAnswersThePathToTheJobsUser) {
  uid_ = static_cast<uint32_t>(getuid());
  Start();
  Completed(3);
  HttpServer http(agg_.get());
  const absl::StatusOr<int> port = http.Start("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  httplib::Client c("127.0.0.1", *port);
  auto res = c.Post("/v1/record");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const nlohmann::json body = nlohmann::json::parse(res->body);
  const std::string path = body.value("path", "");
  EXPECT_EQ(path.rfind(dir_ + "/flight-node-a-", 0), 0u) << res->body;
  EXPECT_EQ(body["comms"], nlohmann::json::array({"0x00000000000000c2"})) << res->body;
  EXPECT_EQ(body["ranks"], kRanks);
  FlightRecord r;
  EXPECT_TRUE(ReadFlightRecordFile(path, &r).ok());
  res = c.Post("/v1/record?comm=0x00000000000000c2");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429) << res->body;
  // Both answers as their schemas say (schemas/api/record.schema.json, error.schema.json).
  const std::string ok_file = dir_ + "/answer-ok.json";
  const std::string error_file = dir_ + "/answer-error.json";
  std::ofstream(ok_file) << body.dump();
  std::ofstream(error_file) << res->body;
  const std::string cmd = std::string("python3 ") + VALIDATOR_PATH + " " + SCHEMA_DIR +
                          "/api record=" + ok_file + " error=" + error_file + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string said;
  char buf[512];
  while (fgets(buf, sizeof(buf), p) != nullptr) said += buf;
  const int rc = WEXITSTATUS(pclose(p));
  if (rc != 77) {  // 77: python3-jsonschema missing
    EXPECT_EQ(rc, 0) << said;
  }
  res = c.Post("/v1/record?comm=zz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  res = c.Post("/v1/record?comm=0x99");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404) << res->body;
  res = c.Post("/v1/record", "x", "text/plain");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413) << res->body;
  res = c.Get("/v1/record");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405) << res->body;
  EXPECT_EQ(res->get_header_value("Allow"), "POST");
  res = c.Post("/v1/ranks");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405) << res->body;
  EXPECT_EQ(res->get_header_value("Allow"), "GET");
  http.Stop();
  EXPECT_EQ(Records().size(), 1u);
}

TEST(FlightWiringConfig, FlightOpsFlag) {
  Config c;
  EXPECT_EQ(c.flight_ops, 2000);
  EXPECT_TRUE(c.Set("flight-ops", "0").ok());
  EXPECT_EQ(c.flight_ops, 0);
  EXPECT_TRUE(c.Set("flight-ops", "100000").ok());
  EXPECT_FALSE(c.Set("flight-ops", "100001").ok());
  EXPECT_FALSE(c.Set("flight-ops", "-1").ok());
  EXPECT_NE(UsageText().find("--flight-ops N"), std::string::npos);
}

// Who may ask for a record over HTTP: a local peer the kernel names, for its own jobs; root and
// sentineld's user for any; a remote peer or an unnamed one never (even where they may read).
TEST(FlightWiringRoute, OnlyLocalUsersMayAskAndOnlyRootForAnyJob) {
  ApiReadPolicy policy;
  policy.daemon_uid = 999;
  policy.remote_details = true;
  FlightRequester who;
  PeerIdentity remote;
  EXPECT_FALSE(FlightRequesterFor(policy, remote, &who));
  PeerIdentity unnamed;
  unnamed.local = true;
  EXPECT_FALSE(FlightRequesterFor(policy, unnamed, &who));
  PeerIdentity user;
  user.local = true;
  user.uid = 1000;
  ASSERT_TRUE(FlightRequesterFor(policy, user, &who));
  EXPECT_EQ(who.uid, 1000u);
  EXPECT_FALSE(who.any_job);
  for (const uint32_t uid : {0u, 999u}) {
    PeerIdentity op;
    op.local = true;
    op.uid = uid;
    ASSERT_TRUE(FlightRequesterFor(policy, op, &who));
    EXPECT_TRUE(who.any_job) << uid;
  }
}

}  // namespace
}  // namespace sentinel::collector
