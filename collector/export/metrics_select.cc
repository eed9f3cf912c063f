// Selection of the communicators /metrics carries; see metrics_select.h.
#include "collector/export/metrics_select.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace sentinel::collector {
namespace {

bool AllowListed(const MetricsSnapshot::Comm& comm, const std::vector<std::string>& comms) {
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

bool Better(const MetricsSnapshot::RankRef* a, const MetricsSnapshot::RankRef* best) {
  return best == nullptr || PrimaryRankBefore(*a, *best);
}

// A rank its process would pick as primary but for the hash: spanning other nodes as `best` does,
// and as large. The hash is arbitrary, so two such communicators are ranked differently on
// different ranks of the same communicator (a pipeline and a data-parallel communicator of equal
// size: 4 nodes as 2 stages x 2 replicas); exporting only the lower hash left some communicators
// exported by one node alone, never judged job-wide.
bool TiesPrimary(const MetricsSnapshot::RankRef& a, const MetricsSnapshot::RankRef* best) {
  return best != nullptr && (a.nnodes > 1) == (best->nnodes > 1) && a.nranks == best->nranks;
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

bool CommSeriesExpired(const MetricsSnapshot::Comm& comm, int64_t now_mono_ns,
                       int64_t retention_ns) {
  if (comm.active_count > 0) return false;
  const int64_t ended = comm.ended_mono_ns > 0 ? comm.ended_mono_ns : comm.last_activity_mono_ns;
  return now_mono_ns - ended >= retention_ns;
}

absl::flat_hash_set<uint64_t> ExportedComms(const MetricsSnapshot& snap,
                                            const MetricsOptions& options) {
  absl::flat_hash_set<uint64_t> out;
  absl::flat_hash_set<uint64_t> expired;
  for (const MetricsSnapshot::Comm& comm : snap.comms) {
    if (CommSeriesExpired(comm, snap.now_mono_ns, options.retention_ns)) {
      expired.insert(comm.hash);
      continue;
    }
    if (options.detail.comm || AllowListed(comm, options.comms)) out.insert(comm.hash);
  }
  if (options.detail.comm) return out;
  // A communicator a local rank is stuck in (a collective in flight 5 s or more), or whose rank's
  // process sits that long in another communicator's collective: exported while so, whatever the
  // budget, so the job-wide hang, mismatch and wait-cycle rules see every communicator of a hang
  // (a pipeline communicator deadlocked with the data-parallel one is rarely the primary). Only
  // during a hang: a running job adds nothing.
  for (const MetricsSnapshot::Rank& r : snap.ranks) {
    if (expired.contains(r.comm_hash) || r.inflight.ended) continue;
    if (InFlightStuck(snap.now_mono_ns, r.inflight) || InFlightWaitingIn(snap.now_mono_ns, r)) {
      out.insert(r.comm_hash);
    }
  }
  // Each process's primary communicator as PrimaryRank picks it (spanning other nodes, then the
  // largest, then the lowest hash), and those that tie with it but for the hash, among
  // its live ranks, and among all its ranks not expired: a process that ended its world
  // communicator and made a new one exports the new one at once and the old one for the retention.
  for (const MetricsSnapshot::Process& process : snap.processes) {
    const MetricsSnapshot::RankRef* best_live = nullptr;
    const MetricsSnapshot::RankRef* best_any = nullptr;
    for (const MetricsSnapshot::RankRef& rank : process.ranks) {
      if (expired.contains(rank.comm_hash)) continue;
      if (Better(&rank, best_any)) best_any = &rank;
      if (rank.active && Better(&rank, best_live)) best_live = &rank;
    }
    if (best_any != nullptr) out.insert(best_any->comm_hash);
    if (best_live != nullptr) out.insert(best_live->comm_hash);
    // The primary's ties, where the primary spans other nodes (only those are judged job-wide):
    // every rank of a communicator then exports it, whichever hash each rank saw first.
    for (const MetricsSnapshot::RankRef& rank : process.ranks) {
      if (expired.contains(rank.comm_hash) || rank.nnodes <= 1) continue;
      if (TiesPrimary(rank, best_any) || (rank.active && TiesPrimary(rank, best_live))) {
        out.insert(rank.comm_hash);
      }
    }
  }
  return out;
}

}  // namespace sentinel::collector
