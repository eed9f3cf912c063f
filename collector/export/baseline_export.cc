// JSON and Prometheus renderings of the baseline comparison; see baseline_export.h.
#include "collector/export/baseline_export.h"

#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "collector/base/real_time.h"
#include "collector/export/prometheus_family.h"
#include "common/collective_bandwidth.h"

namespace sentinel::collector {
namespace {

// Job figures of one (func, bucket) over the window.
struct JobBucket {
  std::vector<int64_t> bytes;
  std::vector<int64_t> busbw_mbytes;  // MB/s, so that Percentile's integers keep 3 digits
};

std::map<std::pair<int, int>, JobBucket> JobBuckets(const BaselineSnapshot& snap) {
  std::map<std::pair<int, int>, JobBucket> out;
  for (const BaselineSnapshot::Busbw& s : snap.busbw) {
    JobBucket& b = out[{s.func, SizeBucket(s.bytes)}];
    b.bytes.push_back(static_cast<int64_t>(s.bytes));
    b.busbw_mbytes.push_back(static_cast<int64_t>(s.busbw_gbps * 1000));
  }
  return out;
}

// p50 bus bandwidth of the job's bucket, GB/s; -1 when the job has none.
double JobBusbwAt(std::map<std::pair<int, int>, JobBucket>* buckets, int func, uint64_t bytes) {
  auto it = buckets->find({func, SizeBucket(bytes)});
  if (it == buckets->end()) return -1;
  return static_cast<double>(Percentile(&it->second.busbw_mbytes, 50)) / 1000;
}

nlohmann::json NumOrNull(double v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(); }

// Bounds of a size bucket (stats.h: powers of 4 from 1 KiB): (min, max]; max 0 = unbounded.
uint64_t BucketMax(int bucket) {
  return bucket >= kSizeBuckets - 1 ? 0 : uint64_t{1024} << (2 * bucket);
}
uint64_t BucketMin(int bucket) { return bucket <= 0 ? 0 : uint64_t{1024} << (2 * (bucket - 1)); }

// The labels of a baseline record's series.
std::string RecordLabels(const SentinelWireBaseline& r) {
  return PromLabels({{"func", FuncName(r.func)}, {"bytes", absl::StrCat(r.bytes)}});
}

}  // namespace

nlohmann::json JobBusbwBySizeJson(const BaselineSnapshot& snap) {
  nlohmann::json out = nlohmann::json::array();
  for (auto& [key, b] : JobBuckets(snap)) {
    const size_t n = b.bytes.size();
    const uint64_t max = BucketMax(key.second);
    out.push_back(
        {{"func", FuncName(static_cast<uint8_t>(key.first))},
         {"size_bucket", SizeBucketLabel(key.second)},
         {"bucket_min_bytes", BucketMin(key.second)},
         {"bucket_max_bytes", max == 0 ? nlohmann::json() : nlohmann::json(max)},
         {"bytes_p50", Percentile(&b.bytes, 50)},
         {"collectives", n},
         {"busbw_gbytes_per_s_p50", static_cast<double>(Percentile(&b.busbw_mbytes, 50)) / 1000}});
  }
  return out;
}

nlohmann::json BaselineJson(const BaselineSnapshot& snap) {
  if (!snap.latest) return nlohmann::json();
  const BaselineStore::Run* run = &*snap.latest;
  auto buckets = JobBuckets(snap);
  nlohmann::json sizes = nlohmann::json::array();
  double link_gbps = -1;
  for (const SentinelWireBaseline& r : run->records) {
    const double busbw = static_cast<double>(r.busbw_bps) / 1e9;
    const double link = r.link_mbps > 0 ? static_cast<double>(r.link_mbps) / 1000 : -1;
    if (link > 0) link_gbps = link;
    // The job's figure only for AllReduce: the plugin's bytes for AllGather/ReduceScatter are
    // per rank, the baseline's (nccl-tests) are the whole buffer.
    const double job =
        r.func == kSentinelFuncAllReduce ? JobBusbwAt(&buckets, r.func, r.bytes) : -1;
    sizes.push_back({{"func", FuncName(r.func)},
                     {"bytes", r.bytes},
                     {"nranks", r.nranks},
                     {"iters", r.iters},
                     {"time_us", static_cast<double>(r.time_ns) / 1e3},
                     {"algbw_gbytes_per_s", static_cast<double>(r.algbw_bps) / 1e9},
                     {"busbw_gbytes_per_s", busbw},
                     {"job_busbw_gbytes_per_s", NumOrNull(job)},
                     {"link_ratio", NumOrNull(rules::BandwidthRatio(busbw, rules::LinkGBs(link)))},
                     {"job_ratio", NumOrNull(rules::BandwidthRatio(job, busbw))}});
  }
  return {{"run_id", absl::StrFormat("%016x", run->run_id)},
          {"host", run->host},
          {"job_id", run->job_id},
          {"received_at", FormatRealTime(run->received_real_ns)},
          {"complete", run->complete},
          {"link_gbps", NumOrNull(link_gbps)},
          {"sizes", sizes}};
}

void AppendBaselinePrometheus(const BaselineSnapshot& snap, std::string* out) {
  auto buckets = JobBuckets(snap);
  PromFamily job(
      out, "sentinel_job_busbw_gbytes_per_second", PromType::kGauge,
      "The job's p50 bus bandwidth (GB/s) over the window, by function and size bucket.");
  for (auto& [key, b] : buckets) {
    job.Add(PromLabels({{"func", FuncName(static_cast<uint8_t>(key.first))},
                        {"size_bucket", SizeBucketLabel(key.second)}}),
            static_cast<double>(Percentile(&b.busbw_mbytes, 50)) / 1000);
  }
  if (!snap.latest) return;
  const BaselineStore::Run* run = &*snap.latest;
  PromFamily busbw(
      out, "sentinel_baseline_busbw_gbytes_per_second", PromType::kGauge,
      "Bus bandwidth (GB/s) sentinel-baseline measured on this allocation, by function and size.");
  for (const SentinelWireBaseline& r : run->records) {
    busbw.Add(RecordLabels(r), static_cast<double>(r.busbw_bps) / 1e9);
  }
  PromFamily link(out, "sentinel_baseline_link_ratio", PromType::kGauge,
                  "Baseline bus bandwidth / the host probe's link rate, by function and size.");
  for (const SentinelWireBaseline& r : run->records) {
    if (r.link_mbps == 0) continue;
    link.Add(RecordLabels(r),
             rules::BandwidthRatio(static_cast<double>(r.busbw_bps) / 1e9,
                                   rules::LinkGBs(static_cast<double>(r.link_mbps) / 1000)));
  }
  PromFamily job_ratio(
      out, "sentinel_baseline_job_ratio", PromType::kGauge,
      "The job's p50 bus bandwidth in the size's bucket / the baseline's (AllReduce).");
  for (const SentinelWireBaseline& r : run->records) {
    if (r.func != kSentinelFuncAllReduce || r.busbw_bps == 0) continue;
    const double job_busbw = JobBusbwAt(&buckets, r.func, r.bytes);
    if (job_busbw < 0) continue;
    job_ratio.Add(RecordLabels(r),
                  rules::BandwidthRatio(job_busbw, static_cast<double>(r.busbw_bps) / 1e9));
  }
}

}  // namespace sentinel::collector
