// The Aggregator as a SnapshotSource (snapshot_source.h): each call copies under one read of its
// lock (Aggregator::Read); the rendering happens in export/, after it.
#include "collector/aggregate/snapshot_source.h"

#include <algorithm>

#include "collector/aggregate/aggregator.h"

namespace sentinel::collector {

namespace {

template <typename T, typename Pred>
void KeepIf(std::vector<T>* v, Pred keep) {
  v->erase(std::remove_if(v->begin(), v->end(), [&](const T& x) { return !keep(x); }), v->end());
}

}  // namespace

bool ViewerSeesAlert(const ApiViewer& viewer, const Alert& a) {
  if (a.owner_uid != kNoUid) return viewer.Sees(a.owner_uid);
  // A node-level alert: sentineld's own measurements (NIC ports) are the node's; one raised on a
  // client's data names that client's job.
  return a.source < 0 || viewer.Sees(a.source_uid);
}

void FilterForViewer(const ApiViewer& viewer, RanksSnapshot* snap) {
  if (viewer.sees_all) return;
  KeepIf(&snap->processes, [&](const RanksSnapshot::Process& p) { return viewer.Sees(p.uid); });
  for (RanksSnapshot::Process& p : snap->processes) {
    KeepIf(&p.comms, [&](const RanksSnapshot::Comm& c) { return viewer.Sees(c.uid); });
  }
}

void FilterForViewer(const ApiViewer& viewer, TelemetrySnapshot* snap) {
  if (viewer.sees_all) return;
  KeepIf(&snap->collectives, [&](const TelemetrySnapshot::Coll& c) { return viewer.Sees(c.uid); });
  KeepIf(&snap->hang_suspects, [&](const HangSuspect& h) { return viewer.Sees(h.uid); });
  KeepIf(&snap->slow.comms, [&](const SlowCauseSnapshot::Comm& c) { return viewer.Sees(c.uid); });
  KeepIf(&snap->slow.recent, [&](const SlowSpan& s) { return viewer.Sees(s.uid); });
}

void FilterForViewer(const ApiViewer& viewer, TraceSnapshot* snap) {
  if (viewer.sees_all) return;
  KeepIf(&snap->ranks, [&](const TraceSnapshot::Rank& r) { return viewer.Sees(r.uid); });
  KeepIf(&snap->alerts, [&](const Alert& a) { return ViewerSeesAlert(viewer, a); });
  KeepIf(&snap->hangs, [&](const HangSuspect& h) { return viewer.Sees(h.uid); });
  KeepIf(&snap->processes, [&](const TraceSnapshot::Process& p) { return viewer.Sees(p.uid); });
}

void FilterForViewer(const ApiViewer& viewer, std::vector<Alert>* alerts) {
  if (viewer.sees_all) return;
  KeepIf(alerts, [&](const Alert& a) { return ViewerSeesAlert(viewer, a); });
}

MetricsSnapshot Aggregator::SnapshotMetrics(const ExcludePolicy& exclude, int64_t now_real_ns,
                                            std::vector<ExcludedHost>* excluded) const {
  MetricsSnapshot snap;
  Read([&](const State& state) {
    snap = TakeMetricsSnapshot(state);
    *excluded = DeriveExclusions(state, exclude, now_real_ns);
  });
  return snap;
}

HealthSnapshot Aggregator::SnapshotHealth() const {
  HealthSnapshot snap;
  Read([&](const State& state) { snap = TakeHealthSnapshot(state); });
  return snap;
}

RanksSnapshot Aggregator::SnapshotRanks(const ApiViewer& viewer) const {
  RanksSnapshot snap;
  Read([&](const State& state) { snap = TakeRanksSnapshot(state); });
  FilterForViewer(viewer, &snap);
  return snap;
}

TelemetrySnapshot Aggregator::SnapshotTelemetry(int64_t window_ns, int64_t now_mono_ns,
                                                const ApiViewer& viewer) const {
  TelemetrySnapshot snap;
  Read([&](const State& state) { snap = TakeTelemetrySnapshot(state, window_ns, now_mono_ns); });
  FilterForViewer(viewer, &snap);
  return snap;
}

TraceSnapshot Aggregator::SnapshotTrace(int64_t since_ns, const ApiViewer& viewer) const {
  TraceSnapshot snap;
  Read([&](const State& state) { snap = TakeTraceSnapshot(state, since_ns); });
  FilterForViewer(viewer, &snap);
  return snap;
}

std::vector<Alert> Aggregator::SnapshotAlerts(const ApiViewer& viewer) const {
  std::vector<Alert> alerts;
  Read([&](const State& state) { alerts = TakeAlerts(state); });
  FilterForViewer(viewer, &alerts);
  return alerts;
}

std::vector<ExcludedHost> Aggregator::SnapshotExclusions(const ExcludePolicy& exclude,
                                                         int64_t now_real_ns) const {
  std::vector<ExcludedHost> hosts;
  Read([&](const State& state) { hosts = DeriveExclusions(state, exclude, now_real_ns); });
  return hosts;
}

std::vector<Alert> Aggregator::FiringAlerts() const {
  std::vector<Alert> firing;
  Read([&](const State& state) {
    for (const auto& [id, a] : state.alerts.all()) {
      if (a.firing()) firing.push_back(a);
    }
  });
  return firing;
}

}  // namespace sentinel::collector
