// Formulas, sweep, job figures, table and verdict of sentinel-baseline; see baseline_report.h.
#include "common/baseline_report.h"

#include <strings.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/collective_bandwidth.h"
#include "common/wire_names.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::baseline {
namespace {

// `v` with `digits` decimals.
std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Pct(double ratio) { return Fixed(ratio * 100, 0) + " %"; }

}  // namespace

const char* CollName(Coll c) { return rules::FuncName(CollWireFunc(c)); }

uint8_t CollWireFunc(Coll c) {
  switch (c) {
    case Coll::kAllReduce:
      return kSentinelFuncAllReduce;
    case Coll::kAllGather:
      return kSentinelFuncAllGather;
    case Coll::kReduceScatter:
      return kSentinelFuncReduceScatter;
  }
  return kSentinelFuncUnknown;
}

bool ParseColl(const std::string& text, Coll* out) {
  std::string t;
  for (char ch : text) {
    if (ch != '_' && ch != '-') t.push_back(static_cast<char>(tolower(ch)));
  }
  if (t == "allreduce")
    *out = Coll::kAllReduce;
  else if (t == "allgather")
    *out = Coll::kAllGather;
  else if (t == "reducescatter")
    *out = Coll::kReduceScatter;
  else
    return false;
  return true;
}

std::vector<uint64_t> DoublingSizes(uint64_t min_bytes, uint64_t max_bytes) {
  std::vector<uint64_t> out;
  for (uint64_t s = std::max<uint64_t>(min_bytes, 1); s <= max_bytes && s != 0; s *= 2) {
    out.push_back(s);
  }
  return out;
}

uint64_t CountFor(Coll c, uint64_t bytes, int nranks) {
  if (c == Coll::kAllReduce) return bytes / 4;
  return nranks > 0 ? bytes / 4 / static_cast<uint64_t>(nranks) : 0;
}

std::string FormatBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::string num = v == std::floor(v) ? Fixed(v, 0) : Fixed(v, 1);
  return num + " " + units[u];
}

bool ParseBytes(const std::string& text, uint64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  double v = strtod(text.c_str(), &end);
  if (end == text.c_str() || v < 0) return false;
  std::string unit(end);
  double mult = 1;
  if (unit.empty() || strcasecmp(unit.c_str(), "b") == 0)
    mult = 1;
  else if (strcasecmp(unit.c_str(), "k") == 0 || strcasecmp(unit.c_str(), "kib") == 0)
    mult = 1024.0;
  else if (strcasecmp(unit.c_str(), "m") == 0 || strcasecmp(unit.c_str(), "mib") == 0)
    mult = 1048576.0;
  else if (strcasecmp(unit.c_str(), "g") == 0 || strcasecmp(unit.c_str(), "gib") == 0)
    mult = 1073741824.0;
  else
    return false;
  double bytes = v * mult;
  if (bytes > 1.8e19) return false;
  *out = static_cast<uint64_t>(bytes);
  return true;
}

absl::StatusOr<std::vector<JobBucket>> ParseJobBuckets(const std::string& telemetry_json) {
  nlohmann::json j = nlohmann::json::parse(telemetry_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("the telemetry answer is not JSON");
  }
  auto it = j.find("busbw_by_size");
  if (it == j.end() || !it->is_array()) {
    return absl::FailedPreconditionError(
        "this sentineld's /v1/telemetry has no busbw_by_size (older collector)");
  }
  std::vector<JobBucket> out;
  for (const nlohmann::json& e : *it) {
    if (!e.is_object()) continue;
    JobBucket b;
    b.func = e.value("func", std::string());
    b.bytes_p50 = e.value("bytes_p50", uint64_t{0});
    b.bucket_min = e.value("bucket_min_bytes", uint64_t{0});
    const auto max = e.find("bucket_max_bytes");
    b.bucket_max = max != e.end() && max->is_number_unsigned() ? max->get<uint64_t>() : 0;
    b.busbw_gbs = e.value("busbw_gbytes_per_s_p50", -1.0);
    b.collectives = e.value("collectives", uint64_t{0});
    out.push_back(b);
  }
  return out;
}

double JobBusbwAt(const std::vector<JobBucket>& job, Coll c, uint64_t bytes) {
  for (const JobBucket& b : job) {
    if (b.func != CollName(c)) continue;
    if (bytes > b.bucket_min && (b.bucket_max == 0 || bytes <= b.bucket_max)) return b.busbw_gbs;
  }
  return -1;
}

std::vector<uint64_t> SizesFromJob(const std::vector<JobBucket>& job, Coll c, uint64_t max_bytes) {
  std::vector<uint64_t> out;
  for (const JobBucket& b : job) {
    if (b.func == CollName(c) && b.bytes_p50 > 0) out.push_back(std::min(b.bytes_p50, max_bytes));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void ComputeBandwidth(int nranks, SizeResult* r) {
  r->algbw_gbs = rules::AlgBwGBs(r->bytes, r->time_ns);
  r->busbw_gbs = r->algbw_gbs * rules::BusBwFactor(CollWireFunc(r->coll), nranks);
}

std::string FormatTable(const std::vector<SizeResult>& results, int nranks, double link_gbps) {
  std::string out;
  char line[256];
  const double link = rules::LinkGBs(link_gbps);
  std::snprintf(line, sizeof line, "# %d rank(s); bandwidths in GB/s (1e9 bytes/s); link %s\n",
                nranks, link_gbps > 0 ? (Fixed(link_gbps, 1) + " Gb/s").c_str() : "unknown");
  out += line;
  std::snprintf(line, sizeof line, "%-13s %10s %12s %10s %10s %10s %10s %8s %9s %11s\n", "#coll",
                "size", "count", "time(us)", "algbw", "busbw", "job_busbw", "link", "bus/link",
                "job/base");
  out += line;
  for (const SizeResult& r : results) {
    std::string job = r.job_busbw_gbs >= 0 ? Fixed(r.job_busbw_gbs, 2) : "-";
    std::string lk = link > 0 ? Fixed(link, 2) : "-";
    const double bus_link = rules::BandwidthRatio(r.busbw_gbs, link);
    const double job_base = rules::BandwidthRatio(r.job_busbw_gbs, r.busbw_gbs);
    std::string bl = bus_link >= 0 ? Pct(bus_link) : "-";
    std::string jb = job_base >= 0 ? Pct(job_base) : "-";
    std::snprintf(line, sizeof line, "%-13s %10s %12llu %10.1f %10.2f %10.2f %10s %8s %9s %11s\n",
                  CollName(r.coll), FormatBytes(r.bytes).c_str(),
                  static_cast<unsigned long long>(CountFor(r.coll, r.bytes, nranks)),
                  r.time_ns / 1e3, r.algbw_gbs, r.busbw_gbs, job.c_str(), lk.c_str(), bl.c_str(),
                  jb.c_str());
    out += line;
  }
  return out;
}

Verdict Judge(const std::vector<SizeResult>& results, int nranks, double link_gbps,
              const VerdictThresholds& thresholds) {
  Verdict v;
  if (results.empty()) {
    v.line = "no size was measured: nothing to judge";
    return v;
  }
  if (nranks <= 1) {
    v.line =
        "one rank: nothing crosses the fabric (bus bandwidth is 0 by definition); run one "
        "rank per GPU on the job's nodes to judge the network";
    return v;
  }
  // The size to judge at: the largest one the job also used (AllReduce first), else the largest.
  const SizeResult* ref = nullptr;
  for (const SizeResult& r : results) {
    if (r.job_busbw_gbs >= 0 && (ref == nullptr || r.bytes >= ref->bytes)) ref = &r;
  }
  if (ref == nullptr) {
    for (const SizeResult& r : results) {
      if (ref == nullptr || r.bytes > ref->bytes ||
          (r.bytes == ref->bytes && r.coll == Coll::kAllReduce)) {
        ref = &r;
      }
    }
  }
  const std::string at = FormatBytes(ref->bytes);
  const double link_ratio = rules::BandwidthRatio(ref->busbw_gbs, rules::LinkGBs(link_gbps));
  const double job_ratio = rules::BandwidthRatio(ref->job_busbw_gbs, ref->busbw_gbs);
  const bool link_known = link_ratio >= 0;
  const bool job_known = job_ratio >= 0;
  std::string fabric = link_known ? "fabric reaches " + Pct(link_ratio) + " of link rate at " + at
                                  : "fabric reaches " + Fixed(ref->busbw_gbs, 2) +
                                        " GB/s bus bandwidth at " + at + " (link rate unknown)";
  std::string job = job_known ? "; the job reaches " + Pct(job_ratio) + " of the baseline" : "";
  if (link_known && link_ratio < thresholds.fabric_ok) {
    v.blame = Blame::kNetwork;
    v.line = fabric + job + ": look at the network (links, NICs, switches, transport), not the job";
  } else if (job_known && job_ratio < thresholds.job_ok) {
    v.blame = Blame::kJob;
    v.line = fabric + job + ": look at the job (overlap, arrival skew), not the network";
  } else if (job_known) {
    v.blame = link_known ? Blame::kNone : Blame::kUnknown;
    v.line = fabric + job + ": neither the network nor the job falls short at this size";
  } else if (link_known) {
    v.blame = Blame::kNone;
    v.line = fabric + "; no job figures from sentineld at this size to compare with";
  } else {
    v.line = fabric + "; no link rate and no job figures: nothing to compare with";
  }
  return v;
}

}  // namespace sentinel::baseline
