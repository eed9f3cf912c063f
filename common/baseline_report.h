// sentinel-baseline's arithmetic and text: the size sweep, the job's figures read from sentineld's
// /v1/telemetry, the table and the one-line verdict (bandwidth formulas: collective_bandwidth.h).
// Pure functions, tested without any library or GPU. Shared by sentinel-baseline (tools/baseline/)
// and `sentinelctl baseline`, so neither reaches into the other's tree; library
// sentinel_baseline_report, which depends on nothing of the plugin.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sentinel::baseline {

enum class Coll { kAllReduce, kAllGather, kReduceScatter };
const char* CollName(Coll c);
// The kSentinelFunc* id of the wire format.
uint8_t CollWireFunc(Coll c);
// "allreduce" | "allgather" | "reducescatter" (also "all_reduce", "AllReduce", ...).
[[nodiscard]] bool ParseColl(const std::string& text, Coll* out);

// 8 B, 16 B, ... up to and including max_bytes (doubling).
std::vector<uint64_t> DoublingSizes(uint64_t min_bytes, uint64_t max_bytes);
// The element count for a size: AllReduce size/4 floats; AllGather sendcount and ReduceScatter
// recvcount size/4/n. 0 when the size is too small for one float per rank.
uint64_t CountFor(Coll c, uint64_t bytes, int nranks);
// "8 B", "64 KiB", "1 GiB", "1.5 MiB".
std::string FormatBytes(uint64_t bytes);
// "64M", "8GiB", "1024" -> bytes; false when unparsable.
[[nodiscard]] bool ParseBytes(const std::string& text, uint64_t* out);

// One (function, size bucket) of the job, from /v1/telemetry "busbw_by_size".
struct JobBucket {
  std::string func;         // "AllReduce"
  uint64_t bytes_p50 = 0;   // the job's typical message in the bucket
  uint64_t bucket_max = 0;  // upper bound of the bucket; 0 = unbounded
  uint64_t bucket_min = 0;  // exclusive lower bound (the previous bucket's max)
  double busbw_gbs = -1;    // p50 GB/s
  uint64_t collectives = 0;
};
// Parses the telemetry body: an InvalidArgument status when it is not JSON, FailedPrecondition
// when it lacks "busbw_by_size" (an older sentineld).
absl::StatusOr<std::vector<JobBucket>> ParseJobBuckets(const std::string& telemetry_json);
// The job's p50 bus bandwidth for `c` in the bucket holding `bytes`, or -1.
double JobBusbwAt(const std::vector<JobBucket>& job, Coll c, uint64_t bytes);
// The sweep from the job's buckets of `c`: each bucket's p50 message size, ascending, capped.
std::vector<uint64_t> SizesFromJob(const std::vector<JobBucket>& job, Coll c, uint64_t max_bytes);

struct SizeResult {
  Coll coll = Coll::kAllReduce;
  uint64_t bytes = 0;
  double time_ns = 0;  // mean per collective
  double algbw_gbs = 0;
  double busbw_gbs = 0;
  double job_busbw_gbs = -1;  // -1: sentineld saw no job collective in this bucket
};

// Fills algbw and busbw of `r` from bytes and time_ns (nccl-tests' formulas,
// common/collective_bandwidth.h; size = the whole buffer).
void ComputeBandwidth(int nranks, SizeResult* r);

// The table: size, count, time, algbw, busbw, job busbw, link, busbw/link, job/baseline.
// link_gbps: the link rate in Gb/s (0 unknown); bandwidths are printed in GB/s.
std::string FormatTable(const std::vector<SizeResult>& results, int nranks, double link_gbps);

struct VerdictThresholds {
  double fabric_ok = 0.80;  // baseline busbw / link rate at or above this: the fabric is fine
  double job_ok = 0.80;     // job busbw / baseline at or above this: the job is fine
};
enum class Blame { kNone, kNetwork, kJob, kUnknown };
struct Verdict {
  Blame blame = Blame::kUnknown;
  std::string line;
};
// One line, judged at the largest size the job used (else the largest swept size).
Verdict Judge(const std::vector<SizeResult>& results, int nranks, double link_gbps,
              const VerdictThresholds& thresholds);

}  // namespace sentinel::baseline
