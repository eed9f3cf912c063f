// The Aggregator as a SnapshotSource (snapshot_source.h): each call copies under one read of its
// lock (Aggregator::Read); the rendering happens in export/, after it.
#include "collector/aggregate/snapshot_source.h"

#include "collector/aggregate/aggregator.h"

namespace sentinel::collector {

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

RanksSnapshot Aggregator::SnapshotRanks(const ApiViewer& /*viewer*/) const {
  RanksSnapshot snap;
  Read([&](const State& state) { snap = TakeRanksSnapshot(state); });
  return snap;
}

TelemetrySnapshot Aggregator::SnapshotTelemetry(int64_t window_ns, int64_t now_mono_ns,
                                                const ApiViewer& /*viewer*/) const {
  TelemetrySnapshot snap;
  Read([&](const State& state) { snap = TakeTelemetrySnapshot(state, window_ns, now_mono_ns); });
  return snap;
}

TraceSnapshot Aggregator::SnapshotTrace(int64_t since_ns, const ApiViewer& /*viewer*/) const {
  TraceSnapshot snap;
  Read([&](const State& state) { snap = TakeTraceSnapshot(state, since_ns); });
  return snap;
}

std::vector<Alert> Aggregator::SnapshotAlerts(const ApiViewer& /*viewer*/) const {
  std::vector<Alert> alerts;
  Read([&](const State& state) { alerts = TakeAlerts(state); });
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
