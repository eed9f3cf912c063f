// Selection of the communicators /metrics carries; see metrics_select.h.
#include "collector/export/metrics_select.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

#include "collector/export/exporters.h"

namespace sentinel::collector {
namespace {

bool AllowListed(const CommState& comm, const std::vector<std::string>& comms) {
  for (const std::string& item : comms) {
    uint64_t hash = 0;
    if (absl::StartsWith(item, "0x") && absl::SimpleHexAtoi(item, &hash)) {
      if (hash == comm.hash) return true;
    } else if (!comm.name.empty() && item == comm.name) {
      return true;
    }
  }
  return false;
}

}  // namespace

MetricsOptions MetricsOptionsFrom(const Config& config) {
  MetricsOptions out;
  out.detail = ParseMetricsDetail(config.metrics_detail).value_or(MetricsDetail{});
  for (absl::string_view item : absl::StrSplit(config.metrics_comms, ',', absl::SkipWhitespace())) {
    out.comms.emplace_back(absl::StripAsciiWhitespace(item));
  }
  out.retention_ns = config.series_retention_ns;
  return out;
}

bool CommSeriesExpired(const CommState& comm, int64_t now_mono_ns, int64_t retention_ns) {
  if (comm.active_count > 0) return false;
  const int64_t ended = comm.ended_mono_ns > 0 ? comm.ended_mono_ns : comm.last_activity_mono_ns;
  return now_mono_ns - ended >= retention_ns;
}

absl::flat_hash_set<uint64_t> ExportedComms(const State& state, const MetricsOptions& options) {
  absl::flat_hash_set<uint64_t> out;
  for (const auto& [hash, comm] : state.comms) {
    if (CommSeriesExpired(*comm, state.now_mono_ns, options.retention_ns)) continue;
    if (options.detail.comm || AllowListed(*comm, options.comms)) out.insert(hash);
  }
  if (options.detail.comm) return out;
  for (const auto& [client, process] : state.processes) {
    const RankState* primary = PrimaryRank(state, *process);
    if (primary == nullptr) continue;
    auto it = state.comms.find(primary->comm_hash);
    if (it == state.comms.end() ||
        CommSeriesExpired(*it->second, state.now_mono_ns, options.retention_ns)) {
      continue;
    }
    out.insert(primary->comm_hash);
  }
  return out;
}

}  // namespace sentinel::collector
