// Prometheus text exposition (0.0.4) of the collector state: see prometheus_text.h.
#include "collector/export/prometheus_text.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "collector/aggregate/snapshot.h"
#include "collector/base/alert_kind.h"
#include "collector/export/baseline_export.h"
#include "collector/export/slow_cause_export.h"
#include "collector/export/version.h"

namespace sentinel::collector {

std::string PrometheusLabelEscape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

namespace {

std::string Escape(const std::string& v) { return PrometheusLabelEscape(v); }

class Writer {
 public:
  void Family(const char* name, const char* type, const char* help) {
    absl::StrAppend(&out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  void Sample(const std::string& name, const std::string& labels, double value) {
    absl::StrAppend(&out_, name, labels.empty() ? "" : "{", labels, labels.empty() ? "" : "}", " ",
                    absl::StrFormat("%.17g", value), "\n");
  }
  void Histogram(const std::string& name, const std::string& labels,
                 const collector::Histogram& h) {
    const std::string sep = labels.empty() ? "" : ",";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kLatencyBucketsS.size(); ++i) {
      cumulative += h.counts[i];
      Sample(name + "_bucket",
             absl::StrCat(labels, sep, "le=\"", absl::StrFormat("%g", kLatencyBucketsS[i]), "\""),
             static_cast<double>(cumulative));
    }
    Sample(name + "_bucket", absl::StrCat(labels, sep, "le=\"+Inf\""),
           static_cast<double>(h.count));
    Sample(name + "_sum", labels, h.sum);
    Sample(name + "_count", labels, static_cast<double>(h.count));
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string L(std::initializer_list<std::pair<const char*, std::string>> labels) {
  std::string out;
  for (const auto& [k, v] : labels) {
    if (!out.empty()) out += ",";
    absl::StrAppend(&out, k, "=\"", Escape(v), "\"");
  }
  return out;
}

void Merge(const Histogram& from, Histogram* into) {
  for (size_t i = 0; i < from.counts.size(); ++i) into->counts[i] += from.counts[i];
  into->sum += from.sum;
  into->count += from.count;
}

// NIC counters (collector/nic/): the reset-safe running totals, only for the known counter names
// (bounded label set), plus each port's link rate and state.
void RenderNic(const std::vector<MetricsSnapshot::NicPort>& ports, Writer* w) {
  w->Family("sentinel_nic_counter_total", "counter",
            "RDMA port counters from sysfs (reset-safe running totals), by counter.");
  for (const MetricsSnapshot::NicPort& p : ports) {
    const std::string port = std::to_string(p.port);
    for (int c = 0; c < kNicCounterCount; ++c) {
      if ((p.present & (1u << c)) == 0) continue;
      w->Sample("sentinel_nic_counter_total",
                L({{"device", p.device}, {"port", port}, {"counter", NicCounterName(c)}}),
                static_cast<double>(p.total[static_cast<size_t>(c)]));
    }
  }
  w->Family("sentinel_nic_port_rate_gbps", "gauge", "RDMA port link rate in Gb/s (0 = unknown).");
  for (const MetricsSnapshot::NicPort& p : ports) {
    w->Sample("sentinel_nic_port_rate_gbps",
              L({{"device", p.device}, {"port", std::to_string(p.port)}}), p.rate_gbps);
  }
  w->Family("sentinel_nic_port_active", "gauge", "1 when the RDMA port's state is ACTIVE.");
  for (const MetricsSnapshot::NicPort& p : ports) {
    w->Sample("sentinel_nic_port_active",
              L({{"device", p.device}, {"port", std::to_string(p.port)}}), p.active ? 1 : 0);
  }
}

}  // namespace

std::string RenderPrometheus(const MetricsSnapshot& snap) { return RenderPrometheus(snap, {}); }

std::string RenderPrometheus(const MetricsSnapshot& snap, const MetricsOptions& options) {
  Writer w;
  const Counters& c = snap.counters;
  w.Family("sentinel_build_info", "gauge",
           "Constant 1, labelled with the collector version and host.");
  w.Sample("sentinel_build_info", L({{"version", kSentinelVersion}, {"host", snap.host}}), 1);
  w.Family("sentinel_clients_connected", "gauge", "Plugin connections currently open.");
  w.Sample("sentinel_clients_connected", "", static_cast<double>(c.clients_connected));
  w.Family("sentinel_clients_accepted_total", "counter", "Plugin connections accepted.");
  w.Sample("sentinel_clients_accepted_total", "", static_cast<double>(c.clients_accepted));
  w.Family("sentinel_clients_refused_total", "counter", "Plugin connections refused, by reason.");
  w.Sample("sentinel_clients_refused_total", L({{"reason", "uid"}}),
           static_cast<double>(c.refused_uid));
  w.Sample("sentinel_clients_refused_total", L({{"reason", "major"}}),
           static_cast<double>(c.refused_major));
  w.Sample("sentinel_clients_refused_total", L({{"reason", "bad_hello"}}),
           static_cast<double>(c.refused_bad_hello));
  w.Sample("sentinel_clients_refused_total", L({{"reason", "too_many"}}),
           static_cast<double>(c.refused_too_many));
  w.Sample("sentinel_clients_refused_total", L({{"reason", "hello_timeout"}}),
           static_cast<double>(c.refused_hello_timeout));
  w.Family("sentinel_malformed_frames_total", "counter",
           "Connections closed for a malformed frame.");
  w.Sample("sentinel_malformed_frames_total", "", static_cast<double>(c.malformed));
  w.Family("sentinel_records_received_total", "counter", "Collective and p2p records received.");
  w.Sample("sentinel_records_received_total", "", static_cast<double>(c.records));
  w.Family("sentinel_records_invalid_total", "counter", "Records rejected by validation.");
  w.Sample("sentinel_records_invalid_total", "", static_cast<double>(c.records_invalid));
  w.Family("sentinel_records_duplicate_total", "counter",
           "Records seen twice for one (comm, rank, seq).");
  w.Sample("sentinel_records_duplicate_total", "", static_cast<double>(c.records_duplicate));
  w.Family("sentinel_late_joins_total", "counter",
           "Records that arrived after their collective was joined.");
  w.Sample("sentinel_late_joins_total", "", static_cast<double>(c.late_joins));
  w.Family("sentinel_evicted_total", "counter", "State dropped to keep memory bounded, by what.");
  const std::pair<const char*, uint64_t> evicted[] = {
      {"pending_join", c.evicted_pending}, {"too_old", c.evicted_too_old},
      {"rank_sample", c.evicted_samples},  {"collective_summary", c.evicted_collectives},
      {"rank", c.evicted_ranks},           {"comm", c.evicted_comms},
      {"process", c.evicted_processes},    {"alert", c.evicted_alerts}};
  for (const auto& [what, n] : evicted) {
    w.Sample("sentinel_evicted_total", L({{"what", what}}), static_cast<double>(n));
  }
  w.Family("sentinel_frames_refused_total", "counter",
           "Plugin frames refused by ownership or a per-peer bound, by reason.");
  const std::pair<const char*, uint64_t> refused[] = {{"not_owner", c.refused_not_owner},
                                                      {"rank_index", c.refused_rank_index},
                                                      {"budget", c.refused_budget},
                                                      {"alert_bound", c.alerts_refused}};
  for (const auto& [reason, n] : refused) {
    w.Sample("sentinel_frames_refused_total", L({{"reason", reason}}), static_cast<double>(n));
  }
  w.Family("sentinel_hang_suspects", "gauge",
           "Collectives some local ranks reached and others did not, past the hang timeout.");
  w.Sample("sentinel_hang_suspects", "", static_cast<double>(snap.hang_suspects));
  w.Family("sentinel_alerts_firing", "gauge", "Alerts currently firing, by kind.");
  std::map<std::string, int> firing = {{"straggler", 0}, {"hang", 0},          {"transport", 0},
                                       {"placement", 0}, {"link_degraded", 0}, {"nic_errors", 0}};
  for (const AlertKind kind : snap.firing) ++firing[AlertKindName(kind)];
  for (const auto& [kind, n] : firing) w.Sample("sentinel_alerts_firing", L({{"kind", kind}}), n);
  RenderNic(snap.nic, &w);

  // The series budget (metrics_select.h): only the selected communicators, and size buckets only
  // with --metrics-detail size.
  const absl::flat_hash_set<uint64_t> exported = ExportedComms(snap, options);
  const bool by_size = options.detail.size;
  std::vector<const MetricsSnapshot::Comm*> comms;
  for (const MetricsSnapshot::Comm& comm : snap.comms) {
    if (exported.contains(comm.hash)) comms.push_back(&comm);
  }
  std::sort(comms.begin(), comms.end(),
            [](const MetricsSnapshot::Comm* a, const MetricsSnapshot::Comm* b) {
              return a->hash < b->hash;
            });
  w.Family("sentinel_comm_nranks", "gauge",
           "Ranks of the communicator (job-wide) and local ranks seen.");
  for (const MetricsSnapshot::Comm* comm : comms) {
    w.Sample("sentinel_comm_nranks", L({{"comm", CommLabel(comm->hash)}, {"scope", "job"}}),
             comm->nranks);
    w.Sample("sentinel_comm_nranks", L({{"comm", CommLabel(comm->hash)}, {"scope", "local"}}),
             static_cast<double>(comm->local_ranks));
  }
  w.Family(
      "sentinel_collectives_joined_total", "counter",
      "Collectives joined across the node's ranks (by size bucket with --metrics-detail size).");
  for (const MetricsSnapshot::Comm* comm : comms) {
    for (int f = 0; f < kFuncSlots; ++f) {
      const auto& by_bucket = comm->joined_by_func_bucket[static_cast<size_t>(f)];
      uint64_t total = 0;
      for (int b = 0; b < kSizeBuckets; ++b) {
        const uint64_t n = by_bucket[static_cast<size_t>(b)];
        total += n;
        if (n == 0 || !by_size) continue;
        w.Sample("sentinel_collectives_joined_total",
                 L({{"comm", CommLabel(comm->hash)},
                    {"func", FuncName(static_cast<uint8_t>(f))},
                    {"size_bucket", SizeBucketLabel(b)}}),
                 static_cast<double>(n));
      }
      if (total == 0 || by_size) continue;
      w.Sample("sentinel_collectives_joined_total",
               L({{"comm", CommLabel(comm->hash)}, {"func", FuncName(static_cast<uint8_t>(f))}}),
               static_cast<double>(total));
    }
  }
  w.Family("sentinel_skew_seconds", "histogram",
           "Arrival skew across the node's ranks per joined collective (one clock, exact).");
  for (const MetricsSnapshot::Comm* comm : comms) {
    Histogram merged;
    for (int b = 0; b < kSizeBuckets; ++b) {
      const auto& h = comm->skew[static_cast<size_t>(b)];
      if (h.count == 0) continue;
      if (!by_size) {
        Merge(h, &merged);
        continue;
      }
      w.Histogram("sentinel_skew_seconds",
                  L({{"comm", CommLabel(comm->hash)}, {"size_bucket", SizeBucketLabel(b)}}), h);
    }
    if (merged.count > 0) {
      w.Histogram("sentinel_skew_seconds", L({{"comm", CommLabel(comm->hash)}}), merged);
    }
  }

  // By (communicator, rank), as state_order.h's SortedRanks.
  std::vector<const MetricsSnapshot::Rank*> ranks;
  for (const MetricsSnapshot::Rank& r : snap.ranks) {
    if (exported.contains(r.comm_hash)) ranks.push_back(&r);
  }
  std::sort(ranks.begin(), ranks.end(), RankListedBefore<MetricsSnapshot::Rank>);
  w.Family("sentinel_rank_up", "gauge",
           "1 while the rank's process is connected and the communicator alive.");
  for (const MetricsSnapshot::Rank* r : ranks) {
    w.Sample("sentinel_rank_up",
             L({{"comm", CommLabel(r->comm_hash)}, {"rank", absl::StrCat(r->rank)}}),
             r->active ? 1 : 0);
  }
  w.Family("sentinel_rank_last_seq", "gauge",
           "Highest collective sequence number the rank completed (hang culprits job-wide).");
  for (const MetricsSnapshot::Rank* r : ranks) {
    if (!r->has_seq) continue;
    w.Sample("sentinel_rank_last_seq",
             L({{"comm", CommLabel(r->comm_hash)}, {"rank", absl::StrCat(r->rank)}}),
             static_cast<double>(r->last_seq));
  }
  w.Family("sentinel_rank_collectives_total", "counter",
           "Operations completed by the rank, by function.");
  for (const MetricsSnapshot::Rank* r : ranks) {
    for (int f = 0; f < kFuncSlots; ++f) {
      const uint64_t n = r->count_by_func[static_cast<size_t>(f)];
      if (n == 0) continue;
      w.Sample("sentinel_rank_collectives_total",
               L({{"comm", CommLabel(r->comm_hash)},
                  {"rank", absl::StrCat(r->rank)},
                  {"func", FuncName(static_cast<uint8_t>(f))}}),
               static_cast<double>(n));
    }
  }
  // In-flight state (hang detection), one series per exported (comm, rank) that sends it. The
  // job-wide hang-culprit rule compares these across nodes, skipping ranks waiting elsewhere.
  struct InFlightFamily {
    const char* name;
    const char* help;
  };
  static constexpr InFlightFamily kInFlight[] = {
      {"sentinel_inflight_enqueued", "Ordinal of the rank's last collective enqueued on the comm."},
      {"sentinel_inflight_gpu_started",
       "Ordinal of the rank's last collective whose kernel started."},
      {"sentinel_inflight_completed", "Ordinal of the rank's last collective completed."},
      {"sentinel_inflight_oldest_age_seconds",
       "How long the rank's oldest incomplete collective has been in flight (0 when none)."},
      {"sentinel_inflight_connected", "1 while the rank's process is connected, 0 once gone."},
      {"sentinel_inflight_waiting_elsewhere",
       "1 while the rank's process has been inside another communicator's collective (kernel "
       "started) for 5 s or more: a hang here is not its doing."}};
  for (size_t f = 0; f < std::size(kInFlight); ++f) {
    w.Family(kInFlight[f].name, "gauge", kInFlight[f].help);
    for (const MetricsSnapshot::Rank* r : ranks) {
      const InFlightView& v = r->inflight;
      if (!v.has_state || v.ended) continue;
      double value = 0;
      switch (f) {
        case 0:
          value = static_cast<double>(v.enqueued);
          break;
        case 1:
          value = static_cast<double>(v.gpu_started);
          break;
        case 2:
          value = static_cast<double>(v.completed);
          break;
        case 3:
          value = InFlightAgeSeconds(snap.now_mono_ns, v);
          break;
        case 4:
          value = v.connected ? 1 : 0;
          break;
        default:
          value = InFlightWaitingElsewhere(snap.now_mono_ns, *r) ? 1 : 0;
          break;
      }
      w.Sample(kInFlight[f].name,
               L({{"comm", CommLabel(r->comm_hash)}, {"rank", absl::StrCat(r->rank)}}), value);
    }
  }
  w.Family("sentinel_rank_lateness_seconds", "histogram",
           "Arrival minus the earliest local arrival, per joined collective.");
  for (const MetricsSnapshot::Rank* r : ranks) {
    if (r->lateness.count == 0) continue;
    w.Histogram("sentinel_rank_lateness_seconds",
                L({{"comm", CommLabel(r->comm_hash)}, {"rank", absl::StrCat(r->rank)}}),
                r->lateness);
  }
  // Only its mean is read (sum / count): a summary without quantiles, 2 series per rank.
  w.Family("sentinel_rank_clock_free_lateness_seconds", "summary",
           "Longest local duration minus own duration (clock-free lateness estimate).");
  for (const MetricsSnapshot::Rank* r : ranks) {
    if (r->clock_free.count == 0) continue;
    const std::string labels =
        L({{"comm", CommLabel(r->comm_hash)}, {"rank", absl::StrCat(r->rank)}});
    w.Sample("sentinel_rank_clock_free_lateness_seconds_sum", labels, r->clock_free.sum);
    w.Sample("sentinel_rank_clock_free_lateness_seconds_count", labels,
             static_cast<double>(r->clock_free.count));
  }
  // The job-wide straggler rules compare these across nodes (examples/prometheus): over the
  // rank's recent window (its last 64 collectives, at most 10 s), so a hiccup does not move them.
  w.Family("sentinel_rank_duration_p50_seconds", "gauge",
           "p50 of the rank's collective durations over its recent window (the rank the others "
           "wait for has the shortest).");
  for (const MetricsSnapshot::Rank* r : ranks) {
    if (r->recent_duration_p50_ns < 0) continue;
    w.Sample("sentinel_rank_duration_p50_seconds",
             L({{"comm", CommLabel(r->comm_hash)}, {"rank", absl::StrCat(r->rank)}}),
             r->recent_duration_p50_ns / 1e9);
  }
  w.Family("sentinel_rank_segment_p50_seconds", "gauge",
           "p50 of the rank's compute segment (end of its previous collective to its arrival at "
           "the next, less its time inside its process's other communicators' collectives) over "
           "its recent window.");
  for (const MetricsSnapshot::Rank* r : ranks) {
    if (r->recent_segment_p50_ns < 0) continue;
    w.Sample("sentinel_rank_segment_p50_seconds",
             L({{"comm", CommLabel(r->comm_hash)}, {"rank", absl::StrCat(r->rank)}}),
             r->recent_segment_p50_ns / 1e9);
  }
  w.Family("sentinel_rank_duration_seconds", "histogram",
           "GPU duration of the rank's operations (by message-size bucket with --metrics-detail "
           "size; job-wide straggler view).");
  for (const MetricsSnapshot::Rank* r : ranks) {
    const std::string labels =
        L({{"comm", CommLabel(r->comm_hash)}, {"rank", absl::StrCat(r->rank)}});
    Histogram merged;
    for (int b = 0; b < kSizeBuckets; ++b) {
      const auto& h = r->duration[static_cast<size_t>(b)];
      if (!h) continue;
      if (!by_size) {
        Merge(*h, &merged);
        continue;
      }
      w.Histogram("sentinel_rank_duration_seconds",
                  absl::StrCat(labels, ",", L({{"size_bucket", SizeBucketLabel(b)}})), *h);
    }
    if (merged.count > 0) w.Histogram("sentinel_rank_duration_seconds", labels, merged);
  }

  // In the listing order (ProcessListedBefore); only the connected ones with a primary rank have
  // series.
  std::vector<const MetricsSnapshot::Process*> processes;
  for (const MetricsSnapshot::Process& p : snap.processes) {
    if (p.has_rank && p.connected) processes.push_back(&p);
  }
  std::sort(processes.begin(), processes.end(),
            [](const MetricsSnapshot::Process* a, const MetricsSnapshot::Process* b) {
              return ProcessListedBefore(*a, *b);
            });
  w.Family("sentinel_plugin_dropped_total", "counter",
           "Records or events the plugin dropped, by reason (from heartbeats).");
  for (const MetricsSnapshot::Process* p : processes) {
    if (!p->has_heartbeat) continue;
    const std::string rank = absl::StrCat(p->rank);
    const std::pair<const char*, uint64_t> reasons[] = {
        {"ring", p->heartbeat.records_dropped_ring},
        {"pool", p->heartbeat.events_dropped_pool},
        {"threads", p->heartbeat.events_dropped_threads},
        {"sink", p->heartbeat.records_dropped_sink}};
    for (const auto& [reason, n] : reasons) {
      w.Sample("sentinel_plugin_dropped_total", L({{"rank", rank}, {"reason", reason}}),
               static_cast<double>(n));
    }
  }
  w.Family("sentinel_plugin_overhead_ratio", "gauge",
           "Time spent in the plugin's callbacks per wall-clock time.");
  for (const MetricsSnapshot::Process* p : processes) {
    if (p->overhead_ratio < 0) continue;
    w.Sample("sentinel_plugin_overhead_ratio", L({{"rank", absl::StrCat(p->rank)}}),
             p->overhead_ratio);
  }
  // One series per process: which figures of this rank are thinned (wire_format.md: heartbeat
  // budget_level); at 2 and 3 its segment and duration p50s come from the sampled bursts only, and
  // are absent while those hold too few consecutive collectives ("not judged: sampled").
  w.Family("sentinel_plugin_budget_level", "gauge",
           "The plugin's overhead-budget step: 0 full, 1 proxy events off, 2 KernelCh on 1 of 8 "
           "collectives, 3 records sampled 1 of 8 (both in bursts of 8 consecutive).");
  for (const MetricsSnapshot::Process* p : processes) {
    if (!p->has_heartbeat) continue;
    w.Sample("sentinel_plugin_budget_level", L({{"rank", absl::StrCat(p->rank)}}),
             static_cast<double>(p->heartbeat.budget_level));
  }
  w.Family("sentinel_gpu_overlap_ratio", "gauge",
           "Share of NCCL kernel time overlapped with compute in the last GPU window.");
  for (const MetricsSnapshot::Process* p : processes) {
    if (!p->has_gpu_window || p->gpu_window.nccl_ns <= 0) continue;
    w.Sample(
        "sentinel_gpu_overlap_ratio", L({{"rank", absl::StrCat(p->rank)}}),
        static_cast<double>(p->gpu_window.overlap_ns) / static_cast<double>(p->gpu_window.nccl_ns));
  }
  {  // CUPTI GPU activity families (collector/aggregate/gpu_activity.h).
    std::vector<GpuRankView> views;
    for (const MetricsSnapshot::Process* p : processes) {
      views.push_back({absl::StrCat(p->rank), &p->gpu});
    }
    for (const GpuMetricFamily& f : GpuPrometheusFamilies(views)) {
      w.Family(f.name, f.type, f.help);
      for (const GpuMetricSample& s : f.samples) {
        w.Sample(f.name,
                 s.extra_key.empty()
                     ? L({{"rank", s.labels_rank}})
                     : L({{"rank", s.labels_rank}, {s.extra_key.c_str(), s.extra_value}}),
                 s.value);
      }
    }
  }
  std::string out = w.Take();
  AppendBaselinePrometheus(snap.baseline, &out);        // baseline_export.h
  out += snap.net.PrometheusText();                     // net plugin links (net_links.h)
  out += SlowCausePrometheusText(snap.slow, exported);  // late rank vs network (slow_cause.h)
  return out;
}

}  // namespace sentinel::collector
