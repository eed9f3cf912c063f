// Snapshots of the aggregator's state for the renderers: see snapshot.h.
#include "collector/aggregate/snapshot.h"

#include "absl/strings/str_format.h"

#include "collector/aggregate/aggregator.h"
#include "collector/aggregate/state_order.h"

namespace sentinel::collector {
namespace {

// Whether AppendGpuTraceEvents would draw anything of `g` at or after `since_ns`.
bool GpuInWindow(const GpuActivity& g, int64_t since_ns) {
  for (size_t i = 0; i < g.windows.size(); ++i) {
    if (g.windows[i].end_ns >= since_ns) return true;
  }
  for (size_t i = 0; i < g.attributions.size(); ++i) {
    if (g.attributions[i].kernel.end_ns >= since_ns) return true;
  }
  return false;
}

}  // namespace

std::string CommLabel(uint64_t comm_hash) { return absl::StrFormat("0x%016x", comm_hash); }

TraceSnapshot TakeTraceSnapshot(const State& state, int64_t since_ns) {
  TraceSnapshot snap;
  snap.host = state.host;
  snap.start_real_ns = state.start_real_ns;
  snap.start_mono_ns = state.start_mono_ns;
  const std::vector<const RankState*> ranks = SortedRanks(state);
  snap.ranks.reserve(ranks.size());
  for (const RankState* r : ranks) {
    TraceSnapshot::Rank& out = snap.ranks.emplace_back();
    out.comm_hash = r->comm_hash;
    out.rank = r->rank;
    out.pid = r->pid;
    out.uid = r->uid;
    for (size_t i = 0; i < r->history.size(); ++i) {
      if (r->history[i].arrival_ns >= since_ns) out.samples.push_back(r->history[i]);
    }
  }
  for (const auto& [id, a] : state.alerts.all()) {
    if (a.kind == AlertKind::kStraggler || a.kind == AlertKind::kHang) snap.alerts.push_back(a);
  }
  snap.hangs = state.hang_suspects;
  for (const ProcessState* p : SortedProcesses(state)) {
    TraceSnapshot::Process& out = snap.processes.emplace_back();
    const RankState* r = PrimaryRank(state, *p);
    out.pid = p->pid;
    out.uid = p->uid;
    out.has_rank = r != nullptr;
    out.rank = r != nullptr ? r->rank : -1;
    if (GpuInWindow(p->gpu, since_ns)) out.gpu = std::make_unique<GpuActivity>(p->gpu);
  }
  return snap;
}

HealthSnapshot TakeHealthSnapshot(const State& state) {
  return {state.host, state.start_real_ns, state.start_mono_ns, state.counters.clients_connected,
          state.counters.records};
}

std::vector<Alert> TakeAlerts(const State& state) {
  std::vector<Alert> out;
  out.reserve(state.alerts.all().size());
  for (const auto& [id, a] : state.alerts.all()) out.push_back(a);
  return out;
}

}  // namespace sentinel::collector
