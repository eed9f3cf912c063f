// Prometheus text exposition (0.0.4) of the collector state: see prometheus_text.h. The node-wide
// families live here; the per-communicator, per-rank and per-process ones in
// prometheus_ranks.cc and prometheus_processes.cc.
#include "collector/export/prometheus_text.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

#include "collector/aggregate/snapshot.h"
#include "collector/base/alert_kind.h"
#include "collector/export/baseline_export.h"
#include "collector/export/net_links_export.h"
#include "collector/export/prometheus_families.h"
#include "collector/export/slow_cause_export.h"
#include "collector/export/version.h"

namespace sentinel::collector {
namespace {

// A family of one unlabelled sample.
void AppendScalar(std::string* out, const char* name, PromType type, const char* help,
                  uint64_t value) {
  PromFamily(out, name, type, help).Add("", static_cast<double>(value));
}

// One family of several counters told apart by one label.
void AppendLabelledCounters(std::string* out, const char* name, const char* help, const char* label,
                            std::initializer_list<std::pair<const char*, uint64_t>> values) {
  PromFamily f(out, name, PromType::kCounter, help);
  for (const auto& [value_label, n] : values) {
    f.Add(PromLabels({{label, value_label}}), static_cast<double>(n));
  }
}

void AppendClientFamilies(const MetricsSnapshot& snap, std::string* out) {
  const Counters& c = snap.counters;
  PromFamily(out, "sentinel_build_info", PromType::kGauge,
             "Constant 1, labelled with the collector version and host.")
      .Add(PromLabels({{"version", kSentinelVersion}, {"host", snap.host}}), 1);
  AppendScalar(out, "sentinel_clients_connected", PromType::kGauge,
               "Plugin connections currently open.", c.clients_connected);
  AppendScalar(out, "sentinel_clients_accepted_total", PromType::kCounter,
               "Plugin connections accepted.", c.clients_accepted);
  AppendLabelledCounters(out, "sentinel_clients_refused_total",
                         "Plugin connections refused, by reason.", "reason",
                         {{"uid", c.refused_uid},
                          {"major", c.refused_major},
                          {"bad_hello", c.refused_bad_hello},
                          {"too_many", c.refused_too_many},
                          {"hello_timeout", c.refused_hello_timeout},
                          {"uid_share", c.refused_uid_share},
                          {"evicted", c.refused_evicted}});
}

void AppendRecordFamilies(const Counters& c, std::string* out) {
  AppendScalar(out, "sentinel_malformed_frames_total", PromType::kCounter,
               "Connections closed for a malformed frame.", c.malformed);
  AppendScalar(out, "sentinel_records_received_total", PromType::kCounter,
               "Collective and p2p records received.", c.records);
  AppendScalar(out, "sentinel_records_invalid_total", PromType::kCounter,
               "Records rejected by validation.", c.records_invalid);
  AppendScalar(out, "sentinel_records_duplicate_total", PromType::kCounter,
               "Records seen twice for one (comm, rank, seq).", c.records_duplicate);
  AppendScalar(out, "sentinel_late_joins_total", PromType::kCounter,
               "Records that arrived after their collective was joined.", c.late_joins);
  AppendLabelledCounters(out, "sentinel_evicted_total",
                         "State dropped to keep memory bounded, by what.", "what",
                         {{"pending_join", c.evicted_pending},
                          {"too_old", c.evicted_too_old},
                          {"rank_sample", c.evicted_samples},
                          {"collective_summary", c.evicted_collectives},
                          {"rank", c.evicted_ranks},
                          {"comm", c.evicted_comms},
                          {"process", c.evicted_processes},
                          {"alert", c.evicted_alerts}});
  AppendLabelledCounters(out, "sentinel_frames_refused_total",
                         "Plugin frames refused by ownership or a per-peer bound, by reason.",
                         "reason",
                         {{"not_owner", c.refused_not_owner},
                          {"rank_index", c.refused_rank_index},
                          {"budget", c.refused_budget},
                          {"alert_bound", c.alerts_refused}});
}

void AppendAlertFamilies(const MetricsSnapshot& snap, std::string* out) {
  PromFamily(out, "sentinel_hang_suspects", PromType::kGauge,
             "Collectives some local ranks reached and others did not, past the hang timeout.")
      .Add("", static_cast<double>(snap.hang_suspects));
  PromFamily firing_family(out, "sentinel_alerts_firing", PromType::kGauge,
                           "Alerts currently firing, by kind.");
  // These kinds have a series even when none fires (0).
  std::map<std::string, int> firing = {{"straggler", 0}, {"hang", 0},          {"transport", 0},
                                       {"placement", 0}, {"link_degraded", 0}, {"nic_errors", 0}};
  for (const AlertKind kind : snap.firing) ++firing[AlertKindName(kind)];
  for (const auto& [kind, n] : firing) firing_family.Add(PromLabels({{"kind", kind}}), n);
}

// NIC counters (collector/nic/): the reset-safe running totals, only for the known counter names
// (bounded label set), plus each port's link rate and state.
void AppendNicFamilies(const std::vector<MetricsSnapshot::NicPort>& ports, std::string* out) {
  PromFamily counters(out, "sentinel_nic_counter_total", PromType::kCounter,
                      "RDMA port counters from sysfs (reset-safe running totals), by counter.");
  for (const MetricsSnapshot::NicPort& p : ports) {
    const std::string port = std::to_string(p.port);
    for (int c = 0; c < kNicCounterCount; ++c) {
      if ((p.present & (1u << c)) == 0) continue;
      counters.Add(
          PromLabels({{"device", p.device}, {"port", port}, {"counter", NicCounterName(c)}}),
          static_cast<double>(p.total[static_cast<size_t>(c)]));
    }
  }
  PromFamily rate(out, "sentinel_nic_port_rate_gbps", PromType::kGauge,
                  "RDMA port link rate in Gb/s (0 = unknown).");
  for (const MetricsSnapshot::NicPort& p : ports) {
    rate.Add(PromLabels({{"device", p.device}, {"port", std::to_string(p.port)}}), p.rate_gbps);
  }
  PromFamily active(out, "sentinel_nic_port_active", PromType::kGauge,
                    "1 when the RDMA port's state is ACTIVE.");
  for (const MetricsSnapshot::NicPort& p : ports) {
    active.Add(PromLabels({{"device", p.device}, {"port", std::to_string(p.port)}}),
               p.active ? 1 : 0);
  }
}

// The series budget (metrics_select.h): only the selected communicators and their ranks; the
// processes that are connected with a primary rank. Each in its listing order.
MetricsRows SelectRows(const MetricsSnapshot& snap, const MetricsOptions& options,
                       const absl::flat_hash_set<uint64_t>& exported) {
  MetricsRows rows;
  rows.snap = &snap;
  rows.by_size = options.detail.size;
  for (const MetricsSnapshot::Comm& comm : snap.comms) {
    if (exported.contains(comm.hash)) rows.comms.push_back(&comm);
  }
  std::sort(rows.comms.begin(), rows.comms.end(),
            [](const MetricsSnapshot::Comm* a, const MetricsSnapshot::Comm* b) {
              return a->hash < b->hash;
            });
  // By (communicator, rank), as state_order.h's SortedRanks.
  for (const MetricsSnapshot::Rank& r : snap.ranks) {
    if (exported.contains(r.comm_hash)) rows.ranks.push_back(&r);
  }
  std::sort(rows.ranks.begin(), rows.ranks.end(), RankListedBefore<MetricsSnapshot::Rank>);
  for (const MetricsSnapshot::Process& p : snap.processes) {
    if (p.has_rank && p.connected) rows.processes.push_back(&p);
  }
  std::sort(rows.processes.begin(), rows.processes.end(),
            [](const MetricsSnapshot::Process* a, const MetricsSnapshot::Process* b) {
              return ProcessListedBefore(*a, *b);
            });
  return rows;
}

// Where each rank's time went (aggregate/time_breakdown.h): at most 4 counters per process, under
// its primary rank, when that rank's communicator is exported. A part that is not known has no
// series (never 0): without CUPTI only the wait is there, without GPU-timed joins only the others.
void AppendTimeBreakdown(const MetricsRows& rows, const absl::flat_hash_set<uint64_t>& exported,
                         std::string* out) {
  PromFamily f(out, "sentinel_rank_time_seconds_total", PromType::kCounter,
               "Where the rank's GPU time went, by part: compute (non-NCCL kernels), "
               "communication (NCCL not hidden under compute, less the wait), wait (for late "
               "peers inside collectives), host (GPU idle).");
  for (const MetricsSnapshot::Process* p : rows.processes) {
    if (!exported.contains(p->primary_comm)) continue;
    const TimeBreakdownInput& t = p->time;
    const std::string comm = CommLabel(p->primary_comm);
    const std::string uid = absl::StrCat(p->uid);
    const std::string rank = absl::StrCat(p->rank);
    for (int i = 0; i < kTimeParts; ++i) {
      const auto part = static_cast<TimePart>(i);
      if (!(part == TimePart::kWait ? t.wait_known : t.gpu_known)) continue;
      f.Add(
          PromLabels({{"comm", comm}, {"uid", uid}, {"rank", rank}, {"part", TimePartName(part)}}),
          static_cast<double>(t.totals.Part(part)) / 1e9);
    }
  }
}

}  // namespace

std::string RenderPrometheus(const MetricsSnapshot& snap) { return RenderPrometheus(snap, {}); }

std::string RenderPrometheus(const MetricsSnapshot& snap, const MetricsOptions& options) {
  std::string out;
  AppendClientFamilies(snap, &out);
  AppendRecordFamilies(snap.counters, &out);
  AppendAlertFamilies(snap, &out);
  AppendNicFamilies(snap.nic, &out);
  const absl::flat_hash_set<uint64_t> exported = ExportedComms(snap, options);
  const MetricsRows rows = SelectRows(snap, options, exported);
  AppendCommFamilies(rows, &out);
  AppendRankProgressFamilies(rows, &out);
  AppendInFlightFamilies(rows, &out);
  AppendRankTimingFamilies(rows, &out);
  AppendProcessFamilies(rows, &out);
  AppendGpuFamilies(rows, &out);
  AppendTimeBreakdown(rows, exported, &out);            // aggregate/time_breakdown.h
  AppendBaselinePrometheus(snap.baseline, &out);        // baseline_export.h
  AppendNetLinksPrometheus(snap.net, &out);             // net plugin links (net_links_export.h)
  out += SlowCausePrometheusText(snap.slow, exported);  // late rank vs network
  return out;
}

std::string ExcludePrometheus(const std::vector<ExcludedHost>& hosts) {
  std::string out;
  PromFamily f(&out, "sentinel_exclude_host", PromType::kGauge,
               "Hosts a restart should avoid (GET /v1/exclude), by reason.");
  for (const ExcludedHost& h : hosts) {
    for (const std::string& reason : h.reasons) {
      f.Add(PromLabels({{"host", h.host}, {"reason", reason}}), 1);
    }
  }
  return out;
}

}  // namespace sentinel::collector
