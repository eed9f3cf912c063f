// Prometheus text and JSON renderings of the collector state: see exporters.h.
#include "collector/export/exporters.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

#include "collector/export/baseline_export.h"

namespace sentinel::collector {
namespace {

std::string Escape(const std::string& v) {
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

std::vector<const RankState*> SortedRanks(const State& state) {
  std::vector<const RankState*> ranks;
  ranks.reserve(state.ranks.size());
  for (const auto& [key, r] : state.ranks) ranks.push_back(r.get());
  std::sort(ranks.begin(), ranks.end(), [](const RankState* a, const RankState* b) {
    return a->comm_hash != b->comm_hash ? a->comm_hash < b->comm_hash : a->rank < b->rank;
  });
  return ranks;
}

std::vector<const ProcessState*> SortedProcesses(const State& state) {
  std::vector<const ProcessState*> out;
  for (const auto& [client, p] : state.processes) out.push_back(p.get());
  std::sort(out.begin(), out.end(), [&](const ProcessState* a, const ProcessState* b) {
    const RankState* ra = PrimaryRank(state, *a);
    const RankState* rb = PrimaryRank(state, *b);
    const int xa = ra ? ra->rank : INT32_MAX;
    const int xb = rb ? rb->rank : INT32_MAX;
    return xa != xb ? xa < xb : a->client < b->client;
  });
  return out;
}

uint64_t Drops(const SentinelWireHeartbeat& hb) {
  return hb.records_dropped_ring + hb.events_dropped_pool + hb.events_dropped_threads +
         hb.records_dropped_sink;
}

nlohmann::json NumOrNull(bool valid, double v) {
  return valid ? nlohmann::json(v) : nlohmann::json();
}

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

void Merge(const Histogram& from, Histogram* into) {
  for (size_t i = 0; i < from.counts.size(); ++i) into->counts[i] += from.counts[i];
  into->sum += from.sum;
  into->count += from.count;
}

// NIC counters (collector/nic/): the reset-safe running totals, only for the known counter names
// (bounded label set), plus each port's link rate and state.
void RenderNic(const NicState& nic, Writer* w) {
  w->Family("sentinel_nic_counter_total", "counter",
            "RDMA port counters from sysfs (reset-safe running totals), by counter.");
  for (const auto& [key, p] : nic.ports) {
    const std::string port = std::to_string(key.second);
    for (int c = 0; c < kNicCounterCount; ++c) {
      if ((p.last.present & (1u << c)) == 0) continue;
      w->Sample("sentinel_nic_counter_total",
                L({{"device", key.first}, {"port", port}, {"counter", NicCounterName(c)}}),
                static_cast<double>(p.total[static_cast<size_t>(c)]));
    }
  }
  w->Family("sentinel_nic_port_rate_gbps", "gauge", "RDMA port link rate in Gb/s (0 = unknown).");
  for (const auto& [key, p] : nic.ports) {
    w->Sample("sentinel_nic_port_rate_gbps",
              L({{"device", key.first}, {"port", std::to_string(key.second)}}), p.last.rate_gbps);
  }
  w->Family("sentinel_nic_port_active", "gauge", "1 when the RDMA port's state is ACTIVE.");
  for (const auto& [key, p] : nic.ports) {
    w->Sample("sentinel_nic_port_active",
              L({{"device", key.first}, {"port", std::to_string(key.second)}}),
              p.last.active ? 1 : 0);
  }
}

}  // namespace

const RankState* PrimaryRank(const State& state, const ProcessState& process) {
  const RankState* best = nullptr;
  for (const auto& key : process.ranks) {
    auto it = state.ranks.find(key);
    if (it == state.ranks.end()) continue;
    const RankState* r = it->second.get();
    if (best == nullptr || r->nranks > best->nranks ||
        (r->nranks == best->nranks && r->comm_hash < best->comm_hash)) {
      best = r;
    }
  }
  return best;
}

std::string FormatRealTime(int64_t real_ns) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixNanos(real_ns),
                          absl::UTCTimeZone());
}

double InFlightAgeSeconds(const State& state, const InFlightView& v) {
  if (v.oldest_since_ns <= 0 || v.enqueued <= v.completed) return 0;
  return std::max(0.0, static_cast<double>(state.now_mono_ns - v.oldest_since_ns) / 1e9);
}

std::string RenderPrometheus(const State& state) { return RenderPrometheus(state, {}); }

std::string RenderPrometheus(const State& state, const MetricsOptions& options) {
  Writer w;
  const Counters& c = state.counters;
  w.Family("sentinel_build_info", "gauge",
           "Constant 1, labelled with the collector version and host.");
  w.Sample("sentinel_build_info", L({{"version", kSentinelVersion}, {"host", state.host}}), 1);
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
  w.Family("sentinel_hang_suspects", "gauge",
           "Collectives some local ranks reached and others did not, past the hang timeout.");
  w.Sample("sentinel_hang_suspects", "", static_cast<double>(state.hang_suspects.size()));
  w.Family("sentinel_alerts_firing", "gauge", "Alerts currently firing, by kind.");
  std::map<std::string, int> firing = {{"straggler", 0}, {"hang", 0},          {"transport", 0},
                                       {"placement", 0}, {"link_degraded", 0}, {"nic_errors", 0}};
  for (const auto& [id, a] : state.alerts.all()) {
    if (a.firing()) ++firing[AlertKindName(a.kind)];
  }
  for (const auto& [kind, n] : firing) w.Sample("sentinel_alerts_firing", L({{"kind", kind}}), n);
  RenderNic(state.nic, &w);

  // The series budget (metrics_select.h): only the selected communicators, and size buckets only
  // with --metrics-detail size.
  const absl::flat_hash_set<uint64_t> exported = ExportedComms(state, options);
  const bool by_size = options.detail.size;
  std::vector<const CommState*> comms;
  for (const auto& [hash, comm] : state.comms) {
    if (exported.contains(hash)) comms.push_back(comm.get());
  }
  std::sort(comms.begin(), comms.end(),
            [](const CommState* a, const CommState* b) { return a->hash < b->hash; });
  w.Family("sentinel_comm_nranks", "gauge",
           "Ranks of the communicator (job-wide) and local ranks seen.");
  for (const CommState* comm : comms) {
    w.Sample("sentinel_comm_nranks", L({{"comm", CommLabel(comm->hash)}, {"scope", "job"}}),
             comm->nranks);
    w.Sample("sentinel_comm_nranks", L({{"comm", CommLabel(comm->hash)}, {"scope", "local"}}),
             static_cast<double>(comm->members.size()));
  }
  w.Family(
      "sentinel_collectives_joined_total", "counter",
      "Collectives joined across the node's ranks (by size bucket with --metrics-detail size).");
  for (const CommState* comm : comms) {
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
  for (const CommState* comm : comms) {
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

  std::vector<const RankState*> ranks = SortedRanks(state);
  ranks.erase(std::remove_if(ranks.begin(), ranks.end(),
                             [&](const RankState* r) { return !exported.contains(r->comm_hash); }),
              ranks.end());
  w.Family("sentinel_rank_up", "gauge",
           "1 while the rank's process is connected and the communicator alive.");
  for (const RankState* r : ranks) {
    w.Sample("sentinel_rank_up",
             L({{"comm", CommLabel(r->comm_hash)}, {"rank", absl::StrCat(r->rank)}}),
             r->active ? 1 : 0);
  }
  w.Family("sentinel_rank_last_seq", "gauge",
           "Highest collective sequence number the rank completed (hang culprits job-wide).");
  for (const RankState* r : ranks) {
    if (!r->has_seq) continue;
    w.Sample("sentinel_rank_last_seq",
             L({{"comm", CommLabel(r->comm_hash)}, {"rank", absl::StrCat(r->rank)}}),
             static_cast<double>(r->last_seq));
  }
  w.Family("sentinel_rank_collectives_total", "counter",
           "Operations completed by the rank, by function.");
  for (const RankState* r : ranks) {
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
  // job-wide hang-culprit rule compares these across nodes.
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
      {"sentinel_inflight_connected", "1 while the rank's process is connected, 0 once gone."}};
  for (size_t f = 0; f < std::size(kInFlight); ++f) {
    w.Family(kInFlight[f].name, "gauge", kInFlight[f].help);
    for (const RankState* r : ranks) {
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
          value = InFlightAgeSeconds(state, v);
          break;
        default:
          value = v.connected ? 1 : 0;
          break;
      }
      w.Sample(kInFlight[f].name,
               L({{"comm", CommLabel(r->comm_hash)}, {"rank", absl::StrCat(r->rank)}}), value);
    }
  }
  w.Family("sentinel_rank_lateness_seconds", "histogram",
           "Arrival minus the earliest local arrival, per joined collective.");
  for (const RankState* r : ranks) {
    if (r->lateness.count == 0) continue;
    w.Histogram("sentinel_rank_lateness_seconds",
                L({{"comm", CommLabel(r->comm_hash)}, {"rank", absl::StrCat(r->rank)}}),
                r->lateness);
  }
  // Only its mean is read (sum / count): a summary without quantiles, 2 series per rank.
  w.Family("sentinel_rank_clock_free_lateness_seconds", "summary",
           "Longest local duration minus own duration (clock-free lateness estimate).");
  for (const RankState* r : ranks) {
    if (r->clock_free.count == 0) continue;
    const std::string labels =
        L({{"comm", CommLabel(r->comm_hash)}, {"rank", absl::StrCat(r->rank)}});
    w.Sample("sentinel_rank_clock_free_lateness_seconds_sum", labels, r->clock_free.sum);
    w.Sample("sentinel_rank_clock_free_lateness_seconds_count", labels,
             static_cast<double>(r->clock_free.count));
  }
  w.Family("sentinel_rank_duration_seconds", "histogram",
           "GPU duration of the rank's operations (by message-size bucket with --metrics-detail "
           "size; job-wide straggler view).");
  for (const RankState* r : ranks) {
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

  const std::vector<const ProcessState*> processes = SortedProcesses(state);
  w.Family("sentinel_plugin_dropped_total", "counter",
           "Records or events the plugin dropped, by reason (from heartbeats).");
  for (const ProcessState* p : processes) {
    const RankState* r = PrimaryRank(state, *p);
    if (!p->has_heartbeat || r == nullptr || !p->connected) continue;
    const std::string rank = absl::StrCat(r->rank);
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
  for (const ProcessState* p : processes) {
    const RankState* r = PrimaryRank(state, *p);
    if (p->overhead_ratio < 0 || r == nullptr || !p->connected) continue;
    w.Sample("sentinel_plugin_overhead_ratio", L({{"rank", absl::StrCat(r->rank)}}),
             p->overhead_ratio);
  }
  w.Family("sentinel_gpu_overlap_ratio", "gauge",
           "Share of NCCL kernel time overlapped with compute in the last GPU window.");
  for (const ProcessState* p : processes) {
    const RankState* r = PrimaryRank(state, *p);
    if (!p->has_gpu_window || p->gpu_window.nccl_ns <= 0 || r == nullptr || !p->connected) continue;
    w.Sample(
        "sentinel_gpu_overlap_ratio", L({{"rank", absl::StrCat(r->rank)}}),
        static_cast<double>(p->gpu_window.overlap_ns) / static_cast<double>(p->gpu_window.nccl_ns));
  }
  {  // CUPTI GPU activity families (collector/aggregate/gpu_activity.h).
    std::vector<GpuRankView> views;
    for (const ProcessState* p : processes) {
      const RankState* r = PrimaryRank(state, *p);
      if (r != nullptr && p->connected) views.push_back({absl::StrCat(r->rank), &p->gpu});
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
  AppendBaselinePrometheus(state, INT64_MIN, &out);  // baseline_export.h
  out += state.net.PrometheusText();                 // net plugin links (net_links.h)
  return out;
}

nlohmann::json HealthzJson(const State& state, int64_t now_real_ns, int64_t now_mono_ns) {
  return {{"status", "ok"},
          {"version", kSentinelVersion},
          {"host", state.host},
          {"started_at", FormatRealTime(state.start_real_ns)},
          {"now", FormatRealTime(now_real_ns)},
          {"uptime_s", static_cast<double>(now_mono_ns - state.start_mono_ns) / 1e9},
          {"clients", state.counters.clients_connected},
          {"records", state.counters.records}};
}

nlohmann::json InFlightJson(const State& state, const InFlightView& v) {
  if (!v.has_state) return nullptr;
  return {{"enqueued", v.enqueued},
          {"gpu_started", v.gpu_started},
          {"completed", v.completed},
          {"oldest_age_s", InFlightAgeSeconds(state, v)},
          {"oldest_func", v.oldest_since_ns > 0 && v.enqueued > v.completed
                              ? nlohmann::json(FuncName(v.oldest_func))
                              : nlohmann::json()},
          {"oldest_seq", v.oldest_since_ns > 0 && v.enqueued > v.completed
                             ? nlohmann::json(v.oldest_seq)
                             : nlohmann::json()}};
}

nlohmann::json RanksJson(const State& state, int64_t now_mono_ns) {
  (void)now_mono_ns;
  nlohmann::json ranks = nlohmann::json::array();
  for (const ProcessState* p : SortedProcesses(state)) {
    const RankState* primary = PrimaryRank(state, *p);
    nlohmann::json comms = nlohmann::json::array();
    for (const auto& key : p->ranks) {
      auto it = state.ranks.find(key);
      if (it == state.ranks.end()) continue;
      const RankState* r = it->second.get();
      if (r->client != p->client && r->client >= 0) continue;  // moved to a newer connection
      comms.push_back({{"comm", CommLabel(r->comm_hash)},
                       {"rank", r->rank},
                       {"nranks", r->nranks},
                       {"last_seq", r->has_seq ? nlohmann::json(r->last_seq) : nlohmann::json()},
                       {"collectives", r->collectives},
                       {"p2p", r->p2p},
                       {"active", r->active},
                       {"inflight", InFlightJson(state, r->inflight)}});
    }
    std::vector<int64_t> late;
    std::vector<int64_t> clock_free;
    std::vector<int64_t> dur;
    if (primary != nullptr) {
      for (size_t i = 0; i < primary->history.size(); ++i) {
        const RankSample& s = primary->history[i];
        if (s.lateness_ns >= 0) late.push_back(s.lateness_ns);
        if (s.clock_free_ns >= 0) clock_free.push_back(s.clock_free_ns);
        if (s.duration_ns >= 0) dur.push_back(s.duration_ns);
      }
    }
    const bool has_late = !late.empty();
    const bool has_cf = !clock_free.empty();
    const bool has_dur = !dur.empty();
    const bool overlap_valid = p->has_gpu_window && p->gpu_window.nccl_ns > 0;
    ranks.push_back(
        {{"pid", p->pid},
         {"host", p->host},
         {"job_id", p->job_id},
         {"rank", primary ? nlohmann::json(primary->rank) : nlohmann::json()},
         {"nranks", primary ? nlohmann::json(primary->nranks) : nlohmann::json()},
         {"connected", p->connected},
         {"comms", comms},
         {"last_seq",
          primary && primary->has_seq ? nlohmann::json(primary->last_seq) : nlohmann::json()},
         {"collectives", primary ? primary->collectives : 0},
         {"lateness_p50_ms", NumOrNull(has_late, has_late ? Ms(Percentile(&late, 50)) : 0)},
         {"lateness_p99_ms", NumOrNull(has_late, has_late ? Ms(Percentile(&late, 99)) : 0)},
         {"clock_free_lateness_p50_ms",
          NumOrNull(has_cf, has_cf ? Ms(Percentile(&clock_free, 50)) : 0)},
         {"duration_p50_ms", NumOrNull(has_dur, has_dur ? Ms(Percentile(&dur, 50)) : 0)},
         {"overlap",
          NumOrNull(overlap_valid, overlap_valid ? static_cast<double>(p->gpu_window.overlap_ns) /
                                                       static_cast<double>(p->gpu_window.nccl_ns)
                                                 : 0)},
         {"gpu", GpuRankJson(p->gpu)},
         {"drops", p->has_heartbeat ? Drops(p->heartbeat) : 0},
         {"overhead_ratio", NumOrNull(p->overhead_ratio >= 0, p->overhead_ratio)},
         // The plugin's overhead-budget step (wire_format.md: heartbeat budget_level).
         {"budget_level", p->has_heartbeat ? p->heartbeat.budget_level : 0},
         {"straggler", primary != nullptr && primary->straggler_firing}});
  }
  return {{"host", state.host}, {"ranks", ranks}};
}

nlohmann::json TelemetryJson(const State& state, int64_t window_ns, int64_t now_mono_ns) {
  std::vector<int64_t> latency;
  std::vector<int64_t> duration;
  std::vector<int64_t> skew;
  std::vector<int64_t> busbw_mbps;
  std::map<uint64_t, std::vector<int64_t>> skew_by_comm;
  const int64_t since = now_mono_ns - window_ns;
  for (size_t i = 0; i < state.collectives.size(); ++i) {
    const CollSummary& s = state.collectives[i];
    if (s.end_mono_ns < since) continue;
    skew.push_back(s.skew_ns);
    skew_by_comm[s.comm_hash].push_back(s.skew_ns);
    if (s.latency_ns >= 0) latency.push_back(s.latency_ns);
    if (s.duration_ns >= 0) duration.push_back(s.duration_ns);
    if (s.busbw_gbps >= 0) busbw_mbps.push_back(static_cast<int64_t>(s.busbw_gbps * 1000));
  }
  const size_t n = skew.size();
  uint64_t dropped = 0;
  int64_t overlap = 0;
  int64_t nccl = 0;
  std::vector<const GpuActivity*> gpus;
  for (const auto& [client, p] : state.processes) {
    gpus.push_back(&p->gpu);
    if (p->has_heartbeat) dropped += Drops(p->heartbeat);
    if (p->has_gpu_window && p->gpu_window.end_ns >= since) {
      overlap += p->gpu_window.overlap_ns;
      nccl += p->gpu_window.nccl_ns;
    }
  }
  nlohmann::json suspects = nlohmann::json::array();
  for (const HangSuspect& h : state.hang_suspects) {
    suspects.push_back({{"comm", CommLabel(h.comm_hash)},
                        {"func", FuncName(h.func)},
                        {"seq", h.seq},
                        {"arrived_ranks", h.arrived},
                        {"missing_ranks", h.missing},
                        {"waiting_s", static_cast<double>(h.waiting_ns) / 1e9}});
  }
  nlohmann::json by_comm = nlohmann::json::array();
  for (auto& [hash, v] : skew_by_comm) {
    const size_t count = v.size();
    by_comm.push_back({{"comm", CommLabel(hash)},
                       {"collectives", count},
                       {"skew_p99_ms", Ms(Percentile(&v, 99))}});
  }
  const Counters& c = state.counters;
  const NicWindow nic = ComputeNicWindow(state.nic, window_ns, now_mono_ns);
  auto pct = [](std::vector<int64_t>* v, double p) {
    return v->empty() ? nlohmann::json() : nlohmann::json(Ms(Percentile(v, p)));
  };
  // p50 bus bandwidth (GB/s: gigabytes, as nccl-tests prints it) over the fastest ACTIVE port's
  // rate (sysfs, Gb/s: gigabits), so the ratio converts bytes to bits; null when unknown.
  const double busbw_p50 =
      busbw_mbps.empty() ? -1 : static_cast<double>(Percentile(&busbw_mbps, 50)) / 1000;
  const bool has_ratio = busbw_p50 >= 0 && nic.fastest_active_gbps > 0;
  return {{"host", state.host},
          {"window_s", static_cast<double>(window_ns) / 1e9},
          {"collectives", n},
          {"latency_p50_ms", pct(&latency, 50)},
          {"latency_p99_ms", pct(&latency, 99)},
          {"duration_p50_ms", pct(&duration, 50)},
          {"duration_p99_ms", pct(&duration, 99)},
          {"skew_p50_ms", pct(&skew, 50)},
          {"skew_p99_ms", pct(&skew, 99)},
          {"busbw_gbps_p50", NumOrNull(busbw_p50 >= 0, busbw_p50)},
          {"busbw_link_ratio",
           NumOrNull(has_ratio, has_ratio ? busbw_p50 * 8 / nic.fastest_active_gbps : 0)},
          {"overlap_ratio",
           nccl > 0 ? nlohmann::json(static_cast<double>(overlap) / static_cast<double>(nccl))
                    : nlohmann::json()},
          // NIC counters from sysfs over the window: null (not zero) when not available.
          {"retransmits", nic.has_retransmits ? nlohmann::json(nic.retransmits) : nlohmann::json()},
          {"cnp_rate", NumOrNull(nic.has_cnp, nic.cnp_per_s)},
          {"ecn_rate", NumOrNull(nic.has_ecn, nic.ecn_per_s)},
          {"gpu", GpuTelemetryJson(gpus, since)},
          {"collective_hang_suspects", suspects},
          {"by_comm", by_comm},
          // The job's bus bandwidth per size and the fabric baseline (baseline_export.h).
          {"busbw_by_size", JobBusbwBySizeJson(state, since)},
          {"baseline", BaselineJson(state, since)},
          {"records", c.records},
          {"net", state.net.ToJson()},  // net plugin devices and links (net_links.h)
          {"plugin_dropped", dropped},
          {"evicted",
           {{"pending_join", c.evicted_pending},
            {"too_old", c.evicted_too_old},
            {"rank_sample", c.evicted_samples},
            {"collective_summary", c.evicted_collectives},
            {"rank", c.evicted_ranks},
            {"comm", c.evicted_comms},
            {"process", c.evicted_processes},
            {"alert", c.evicted_alerts}}}};
}

nlohmann::json AlertJson(const Alert& a) {
  return {{"id", a.id},
          {"kind", AlertKindName(a.kind)},
          {"severity", AlertSeverityName(a.severity)},
          {"state", AlertStateName(a.state)},
          {"resolve_reason", a.resolve_reason == ResolveReason::kNone
                                 ? nlohmann::json()
                                 : nlohmann::json(ResolveReasonName(a.resolve_reason))},
          {"comm", a.comm.empty() ? nlohmann::json() : nlohmann::json(a.comm)},  // node-level
          {"ranks", a.ranks},
          {"host", a.host},
          {"summary", a.summary},
          {"evidence", a.evidence},
          {"runbook", a.runbook},
          {"started_at", FormatRealTime(a.started_real_ns)},
          {"resolved_at", a.resolved_real_ns == 0
                              ? nlohmann::json()
                              : nlohmann::json(FormatRealTime(a.resolved_real_ns))}};
}

nlohmann::json AlertsJson(const State& state) {
  std::vector<const Alert*> alerts;
  for (const auto& [id, a] : state.alerts.all()) alerts.push_back(&a);
  std::sort(alerts.begin(), alerts.end(), [](const Alert* a, const Alert* b) {
    if (a->state != b->state) return a->firing();
    return a->started_real_ns != b->started_real_ns ? a->started_real_ns > b->started_real_ns
                                                    : a->id < b->id;
  });
  nlohmann::json out = nlohmann::json::array();
  for (const Alert* a : alerts) out.push_back(AlertJson(*a));
  return {{"alerts", out}};
}

namespace {

// "4MiB", "64KiB", "512B": the size as a person reads it in a slice name.
std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return absl::StrCat(bytes, units[u]);
}

}  // namespace

nlohmann::json TraceJson(const State& state, int64_t window_ns, int64_t now_mono_ns) {
  nlohmann::json events = nlohmann::json::array();
  const int64_t since = now_mono_ns - window_ns;
  // Track per (process, comm rank): pid = OS pid of the rank's process (or the rank when unknown),
  // tid = the rank within the communicator's position among comms (one thread per comm).
  absl::flat_hash_map<uint64_t, int> comm_tid;
  for (const RankState* r : SortedRanks(state)) {
    if (!comm_tid.contains(r->comm_hash))
      comm_tid[r->comm_hash] = static_cast<int>(comm_tid.size()) + 1;
  }
  // Per (comm, seq): every rank's arrival on its track, for the flow that links them.
  struct Arrival {
    int64_t ts_ns;
    int64_t pid;
    int tid;
  };
  std::map<std::pair<uint64_t, uint64_t>, std::vector<Arrival>> by_collective;
  std::map<std::pair<std::string, int>, std::pair<int64_t, int>> track_of;  // (comm, rank)
  absl::flat_hash_map<uint32_t, bool> named;
  for (const RankState* r : SortedRanks(state)) {
    const int64_t pid = r->pid != 0 ? r->pid : r->rank;
    const int tid = comm_tid[r->comm_hash];
    bool any = false;
    for (size_t i = 0; i < r->history.size(); ++i) {
      const RankSample& s = r->history[i];
      if (s.arrival_ns < since) continue;
      any = true;
      nlohmann::json args = {{"comm", CommLabel(r->comm_hash)},
                             {"rank", r->rank},
                             {"seq", s.seq},
                             {"bytes", s.bytes},
                             {"size_bucket", SizeBucketLabel(SizeBucket(s.bytes))},
                             {"algo", AlgoName(s.algo)},
                             {"proto", ProtoName(s.proto)},
                             {"nchannels", s.nchannels}};
      if (s.lateness_ns >= 0) args["lateness_us"] = static_cast<double>(s.lateness_ns) / 1e3;
      if (s.clock_free_ns >= 0)
        args["clock_free_lateness_us"] = static_cast<double>(s.clock_free_ns) / 1e3;
      events.push_back(
          {{"name", absl::StrCat(FuncName(s.func), " ", HumanBytes(s.bytes), " #", s.seq)},
           {"cat", "nccl"},
           {"ph", "X"},
           {"ts", static_cast<double>(s.arrival_ns) / 1e3},
           {"dur", s.duration_ns >= 0 ? static_cast<double>(s.duration_ns) / 1e3 : 0.0},
           {"pid", pid},
           {"tid", tid},
           {"args", args}});
      by_collective[{r->comm_hash, s.seq}].push_back({s.arrival_ns, pid, tid});
    }
    track_of[{CommLabel(r->comm_hash), r->rank}] = {pid, tid};
    if (!any) continue;
    if (!named[static_cast<uint32_t>(pid)]) {
      named[static_cast<uint32_t>(pid)] = true;
      events.push_back(
          {{"name", "process_name"},
           {"ph", "M"},
           {"pid", pid},
           {"tid", 0},
           {"args", {{"name", absl::StrFormat("rank %d (pid %d)", r->rank, r->pid)}}}});
      events.push_back({{"name", "process_sort_index"},
                        {"ph", "M"},
                        {"pid", pid},
                        {"tid", 0},
                        {"args", {{"sort_index", r->rank}}}});
    }
    events.push_back(
        {{"name", "thread_name"},
         {"ph", "M"},
         {"pid", pid},
         {"tid", tid},
         {"args",
          {{"name", absl::StrFormat("comm %s rank %d", CommLabel(r->comm_hash), r->rank)}}}});
  }
  // One flow per collective, through its ranks in arrival order: the arrow ends at the rank
  // that arrived last, the one the others waited for. Each step binds to the slice it starts.
  uint64_t flow_id = 0;
  for (auto& [key, arrivals] : by_collective) {
    if (arrivals.size() < 2) continue;
    std::sort(arrivals.begin(), arrivals.end(),
              [](const Arrival& a, const Arrival& b) { return a.ts_ns < b.ts_ns; });
    ++flow_id;
    for (size_t i = 0; i < arrivals.size(); ++i) {
      const char* ph = i == 0 ? "s" : i + 1 == arrivals.size() ? "f" : "t";
      nlohmann::json e = {{"name", "arrival order"},
                          {"cat", "nccl.flow"},
                          {"ph", ph},
                          {"id", flow_id},
                          {"ts", static_cast<double>(arrivals[i].ts_ns) / 1e3},
                          {"pid", arrivals[i].pid},
                          {"tid", arrivals[i].tid}};
      if (i + 1 == arrivals.size()) e["bp"] = "e";
      events.push_back(std::move(e));
    }
  }
  // Markers: straggler and hang alerts at their start, hang suspects now, as instant events on
  // the tracks of the ranks they name (global when the rank is on another node).
  auto marker = [&](const std::string& name, const std::string& comm, int rank, int64_t ts_ns,
                    nlohmann::json args) {
    auto it = track_of.find({comm, rank});
    nlohmann::json e = {{"name", name},
                        {"cat", "sentinel.alert"},
                        {"ph", "i"},
                        {"ts", static_cast<double>(ts_ns) / 1e3},
                        {"args", std::move(args)}};
    if (it != track_of.end()) {
      e["pid"] = it->second.first;
      e["tid"] = it->second.second;
      e["s"] = "t";
    } else {
      e["pid"] = 0;
      e["tid"] = 0;
      e["s"] = "g";
    }
    events.push_back(std::move(e));
  };
  const int64_t real_to_mono = state.start_mono_ns - state.start_real_ns;
  for (const auto& [id, a] : state.alerts.all()) {
    if (a.kind != AlertKind::kStraggler && a.kind != AlertKind::kHang) continue;
    const int64_t ts = a.started_real_ns + real_to_mono;
    if (ts < since) continue;
    for (const int rank : a.ranks) {
      marker(absl::StrCat(AlertKindName(a.kind), " alert: rank ", rank), a.comm, rank, ts,
             {{"alert", a.id}, {"state", AlertStateName(a.state)}, {"summary", a.summary}});
    }
  }
  for (const HangSuspect& h : state.hang_suspects) {
    for (const int rank : h.missing) {
      marker(absl::StrCat("hang: ", FuncName(h.func), " #", h.seq, " waits for rank ", rank),
             CommLabel(h.comm_hash), rank, now_mono_ns,
             {{"comm", CommLabel(h.comm_hash)},
              {"seq", h.seq},
              {"waiting_ms", static_cast<double>(h.waiting_ns) / 1e6}});
    }
  }
  for (const ProcessState* p : SortedProcesses(state)) {  // CUPTI compute / NCCL tracks
    const RankState* r = PrimaryRank(state, *p);
    AppendGpuTraceEvents(p->gpu, p->pid != 0 ? p->pid : (r ? r->rank : 0), r ? r->rank : -1, since,
                         &events);
  }
  return {{"traceEvents", events},
          {"displayTimeUnit", "ms"},
          {"metadata",
           {{"host", state.host},
            {"clock", "CLOCK_MONOTONIC"},
            {"window_s", static_cast<double>(window_ns) / 1e9}}}};
}

nlohmann::json ErrorJson(int code, const std::string& message) {
  return {{"error", {{"code", code}, {"message", message}}}};
}

}  // namespace sentinel::collector
