// sentinel-baseline's arithmetic and text (common/baseline_report.h) and its launcher environment
// (launch.h), without any library or GPU.
#include "common/baseline_report.h"

#include <unistd.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "tests/unit/baseline/launch_text.h"
#include "tools/baseline/launch.h"

namespace sentinel::baseline {
namespace {

using testing::Fetch;
using testing::Listen;
using testing::Read;
using testing::Serve;

TEST(Formulas, MatchNcclTests) {
  // nccl-tests: AllReduce 2(n-1)/n, AllGather and ReduceScatter (n-1)/n
  // (common/collective_bandwidth.h; its own test: rules_collective_bandwidth_test).
  // 1 GiB in 10 ms: 107.3741824 GB/s algbw; busbw x 1.75 on 8 ranks.
  SizeResult r;
  r.bytes = 1ULL << 30;
  r.time_ns = 10e6;
  ComputeBandwidth(8, &r);
  EXPECT_DOUBLE_EQ(r.algbw_gbs, 107.3741824);
  EXPECT_DOUBLE_EQ(r.busbw_gbs, 107.3741824 * 1.75);
  r.coll = Coll::kAllGather;
  ComputeBandwidth(4, &r);
  EXPECT_DOUBLE_EQ(r.busbw_gbs, 107.3741824 * 0.75);
}

TEST(Sweep, DoublingAndCounts) {
  std::vector<uint64_t> s = DoublingSizes(8, 8ULL << 30);
  ASSERT_EQ(s.size(), 31u);  // 8 B .. 8 GiB
  EXPECT_EQ(s.front(), 8u);
  EXPECT_EQ(s.back(), 8ULL << 30);
  EXPECT_EQ(DoublingSizes(8, 100), (std::vector<uint64_t>{8, 16, 32, 64}));
  EXPECT_EQ(CountFor(Coll::kAllReduce, 1024, 8), 256u);
  EXPECT_EQ(CountFor(Coll::kAllGather, 1024, 8), 32u);  // sendcount: size / 4 / n
  EXPECT_EQ(CountFor(Coll::kReduceScatter, 16, 8), 0u);
  uint64_t b = 0;
  ASSERT_TRUE(ParseBytes("64M", &b));
  EXPECT_EQ(b, 64u << 20);
  ASSERT_TRUE(ParseBytes("8GiB", &b));
  EXPECT_EQ(b, 8ULL << 30);
  EXPECT_FALSE(ParseBytes("12 parsecs", &b));
  EXPECT_EQ(FormatBytes(64u << 20), "64 MiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  Coll c;
  EXPECT_TRUE(ParseColl("all_reduce", &c));
  EXPECT_EQ(c, Coll::kAllReduce);
  EXPECT_FALSE(ParseColl("alltoall", &c));
}

constexpr const char* kTelemetry = R"({"busbw_by_size":[
  {"func":"AllReduce","size_bucket":"<=64MiB","bucket_min_bytes":16777216,"bucket_max_bytes":67108864,"bytes_p50":50000000,
   "collectives":10,"busbw_gbytes_per_s_p50":4.5},
  {"func":"AllReduce","size_bucket":"<=1KiB","bucket_min_bytes":0,"bucket_max_bytes":1024,"bytes_p50":512,
   "collectives":3,"busbw_gbytes_per_s_p50":0.01},
  {"func":"AllGather","size_bucket":">1GiB","bucket_min_bytes":1073741824,"bucket_max_bytes":null,"bytes_p50":2147483648,
   "collectives":1,"busbw_gbytes_per_s_p50":9.0}]})";

TEST(JobFigures, BucketsAndSizes) {
  absl::StatusOr<std::vector<JobBucket>> parsed = ParseJobBuckets(kTelemetry);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const std::vector<JobBucket> job = *parsed;
  ASSERT_EQ(job.size(), 3u);
  EXPECT_DOUBLE_EQ(JobBusbwAt(job, Coll::kAllReduce, 64u << 20), 4.5);
  EXPECT_DOUBLE_EQ(JobBusbwAt(job, Coll::kAllReduce, (16u << 20) + 1), 4.5);
  EXPECT_EQ(JobBusbwAt(job, Coll::kAllReduce, 16u << 20), -1);  // the <=16MiB bucket: unused
  EXPECT_DOUBLE_EQ(JobBusbwAt(job, Coll::kAllReduce, 8), 0.01);
  EXPECT_DOUBLE_EQ(JobBusbwAt(job, Coll::kAllGather, 4ULL << 30), 9.0);
  EXPECT_EQ(SizesFromJob(job, Coll::kAllReduce, 1ULL << 40),
            (std::vector<uint64_t>{512, 50000000}));
  EXPECT_EQ(SizesFromJob(job, Coll::kAllReduce, 1u << 20), (std::vector<uint64_t>{512, 1u << 20}));
  const absl::Status older = ParseJobBuckets(R"({"collectives":3})").status();
  EXPECT_EQ(older.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(older.message().find("older collector"), std::string::npos);
  EXPECT_EQ(ParseJobBuckets("not json").status().code(), absl::StatusCode::kInvalidArgument);
}

SizeResult Row(uint64_t bytes, double busbw, double job) {
  SizeResult r;
  r.bytes = bytes;
  r.busbw_gbs = busbw;
  r.algbw_gbs = busbw / 1.75;
  r.time_ns = static_cast<double>(bytes) / r.algbw_gbs;
  r.job_busbw_gbs = job;
  return r;
}

TEST(Verdict, BlamesTheJob) {
  // 400 Gb/s = 50 GB/s; the fabric reaches 46 (92 %), the job 18.86 (41 %).
  std::vector<SizeResult> rs = {Row(1u << 20, 20, -1), Row(64u << 20, 46, 18.86)};
  Verdict v = Judge(rs, 8, 400, VerdictThresholds());
  EXPECT_EQ(v.blame, Blame::kJob);
  EXPECT_EQ(v.line,
            "fabric reaches 92 % of link rate at 64 MiB; the job reaches 41 % of the baseline: "
            "look at the job (overlap, arrival skew), not the network");
}

TEST(Verdict, BlamesTheNetwork) {
  std::vector<SizeResult> rs = {Row(64u << 20, 15, 14), Row(256u << 20, 16, -1)};
  Verdict v = Judge(rs, 8, 400, VerdictThresholds());
  EXPECT_EQ(v.blame, Blame::kNetwork);
  // Judged at the largest size the job used (64 MiB), not the largest swept.
  EXPECT_EQ(v.line,
            "fabric reaches 30 % of link rate at 64 MiB; the job reaches 93 % of the baseline: "
            "look at the network (links, NICs, switches, transport), not the job");
}

TEST(Verdict, OtherCases) {
  std::vector<SizeResult> rs = {Row(64u << 20, 46, 44)};
  EXPECT_EQ(Judge(rs, 8, 400, VerdictThresholds()).blame, Blame::kNone);
  EXPECT_NE(Judge(rs, 8, 400, VerdictThresholds()).line.find("neither"), std::string::npos);
  rs = {Row(64u << 20, 46, -1)};
  EXPECT_EQ(Judge(rs, 8, 0, VerdictThresholds()).line,
            "fabric reaches 46.00 GB/s bus bandwidth at 64 MiB (link rate unknown); no link rate "
            "and no job figures: nothing to compare with");
  EXPECT_NE(Judge(rs, 1, 400, VerdictThresholds()).line.find("one rank"), std::string::npos);
  VerdictThresholds strict;
  strict.fabric_ok = 0.95;
  EXPECT_EQ(Judge(rs, 8, 400, strict).blame, Blame::kNetwork);
}

TEST(Table, ColumnsAndRatios) {
  std::vector<SizeResult> rs = {Row(64u << 20, 46, 18.86)};
  std::string t = FormatTable(rs, 8, 400);
  EXPECT_NE(t.find("link 400.0 Gb/s"), std::string::npos) << t;
  EXPECT_NE(t.find("job_busbw"), std::string::npos);
  // size, count (floats), busbw, job busbw, link in GB/s, busbw/link, job/baseline.
  EXPECT_NE(t.find("64 MiB     16777216"), std::string::npos) << t;
  EXPECT_NE(t.find("46.00      18.86    50.00      92 %        41 %"), std::string::npos) << t;
  std::string unknown = FormatTable({Row(8, 0.001, -1)}, 2, 0);
  EXPECT_NE(unknown.find("link unknown"), std::string::npos);
}

TEST(Launch, Schemes) {
  std::map<std::string, std::string> env;
  auto get = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  LaunchInfo li;
  std::string err;
  ASSERT_TRUE(Read(get, &li, &err));
  EXPECT_EQ(li.launcher, "single");
  EXPECT_EQ(li.world, 1);
  EXPECT_EQ(li.port, 29401);
  env = {{"SLURM_PROCID", "5"},
         {"SLURM_NTASKS", "16"},
         {"SLURM_LOCALID", "1"},
         {"SLURM_JOB_NODELIST", "gpu[003-006,9]"},
         {"SENTINEL_BASELINE_TOKEN", "0123456789abcdef0123"}};
  ASSERT_TRUE(Read(get, &li, &err)) << err;
  EXPECT_EQ(li.launcher, "srun");
  EXPECT_EQ(li.rank, 5);
  EXPECT_EQ(li.world, 16);
  EXPECT_EQ(li.local_rank, 1);
  EXPECT_EQ(li.master_addr, "gpu003");
  // torchrun wins over Slurm; its store holds MASTER_PORT, so the baseline takes the next one.
  env["RANK"] = "2";
  env["WORLD_SIZE"] = "4";
  env["MASTER_ADDR"] = "10.1.2.3";
  env["MASTER_PORT"] = "29500";
  ASSERT_TRUE(Read(get, &li, &err));
  EXPECT_EQ(li.launcher, "torchrun");
  EXPECT_EQ(li.rank, 2);
  EXPECT_EQ(li.master_addr, "10.1.2.3");
  EXPECT_EQ(li.port, 29501);
  env["SENTINEL_BASELINE_PORT"] = "4000";
  ASSERT_TRUE(Read(get, &li, &err));
  EXPECT_EQ(li.port, 4000);
  env["RANK"] = "4";  // not below WORLD_SIZE
  EXPECT_FALSE(Read(get, &li, &err));
  EXPECT_NE(err.find("RANK='4'"), std::string::npos) << err;
  env = {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
  // More than one rank and no token: refused, saying how to make one.
  EXPECT_FALSE(Read(get, &li, &err));
  EXPECT_NE(err.find("SENTINEL_BASELINE_TOKEN is not set"), std::string::npos) << err;
  EXPECT_NE(err.find("/dev/urandom"), std::string::npos) << err;
  env["SENTINEL_BASELINE_TOKEN"] = "short";
  EXPECT_FALSE(Read(get, &li, &err));
  EXPECT_NE(err.find("shorter than 16"), std::string::npos) << err;
  env["SENTINEL_BASELINE_TOKEN"] = "0123456789abcdef";
  ASSERT_TRUE(Read(get, &li, &err)) << err;
  EXPECT_EQ(li.token, "0123456789abcdef");
  EXPECT_EQ(li.launcher, "mpirun");
  EXPECT_EQ(FirstSlurmHost("a,b"), "a");
  EXPECT_EQ(FirstSlurmHost("node7"), "node7");
}

TEST(Launch, RendezvousOverLoopback) {
  Rendezvous rv;
  for (int i = 0; i < kNcclUniqueIdBytes; ++i) rv.id.internal[i] = static_cast<char>(i * 7);
  rv.sizes = {8, 1u << 20, 64u << 20};
  int port = 0;  // the kernel picks a free one: a fixed or random port can be held by another test
  std::string err0;
  const int listen_fd = Listen(0, &port, &err0);
  ASSERT_GE(listen_fd, 0) << err0;
  ASSERT_GT(port, 0);
  const std::string token = "job-token-0123456789";
  std::thread server([&] { EXPECT_TRUE(Serve(listen_fd, 3, rv, token, 20, &err0)) << err0; });
  std::vector<Rendezvous> got(2);
  std::vector<std::thread> clients;
  for (int r = 1; r <= 2; ++r) {
    clients.emplace_back([&, r] {
      std::string err;
      EXPECT_TRUE(Fetch("127.0.0.1", port, r, token, 20, &got[static_cast<size_t>(r - 1)], &err))
          << err;
    });
  }
  for (auto& t : clients) t.join();
  server.join();
  for (const Rendezvous& g : got) {
    EXPECT_EQ(std::string(g.id.internal, kNcclUniqueIdBytes),
              std::string(rv.id.internal, kNcclUniqueIdBytes));
    EXPECT_EQ(g.sizes, rv.sizes);
  }
  // Nobody serving: a bounded wait and a message naming the address.
  Rendezvous none;
  std::string err;
  EXPECT_FALSE(Fetch("127.0.0.1", port, 1, token, 1, &none, &err));
  EXPECT_NE(err.find("127.0.0.1"), std::string::npos);
}

}  // namespace
}  // namespace sentinel::baseline
