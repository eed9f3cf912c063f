// JSON payloads of the HTTP API (schemas/api/): see api_json.h.
#include "collector/export/api_json.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "collector/base/real_time.h"
#include "collector/export/baseline_export.h"
#include "collector/export/slow_cause_export.h"
#include "collector/export/version.h"
#include "common/collective_bandwidth.h"

namespace sentinel::collector {
namespace {

nlohmann::json NumOrNull(bool valid, double v) {
  return valid ? nlohmann::json(v) : nlohmann::json();
}

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// The p-th percentile in ms of `values` (reordered); null when empty.
nlohmann::json PercentileMsOrNull(std::vector<int64_t>* values, double p) {
  return values->empty() ? nlohmann::json() : nlohmann::json(Ms(Percentile(values, p)));
}

// The rank's wait evidence on the communicator (wait_evidence.h); null while its recent window
// holds too few collectives.
nlohmann::json WaitJson(const RanksSnapshot::Comm& r) {
  if (!r.has_wait) return nullptr;
  return {{"duration_p50_ms", r.duration_p50_ns / 1e6},
          {"segment_p50_ms", r.segment_p50_ns / 1e6},
          {"usual_segment_ms", NumOrNull(r.usual_segment_ns > 0, r.usual_segment_ns / 1e6)},
          {"remote_wait_p75_ms", r.remote_wait_p75_ns / 1e6},
          {"usual_remote_wait_ms", NumOrNull(r.usual_segment_ns > 0, r.usual_remote_wait_ns / 1e6)},
          {"waited_for", r.waited_for},
          {"since_seq", r.waited_for ? nlohmann::json(r.since_seq) : nlohmann::json()}};
}

// "yes", or "not_judged_sampled" (see RanksJson's "judged").
const char* Judged(const RanksSnapshot::Process& p) {
  if (!p.has_heartbeat || p.heartbeat.budget_level < 2) return "yes";
  for (const RanksSnapshot::Comm& r : p.comms) {
    if (r.has_wait) return "yes";
  }
  return "not_judged_sampled";
}

// Where its time went (aggregate/time_breakdown.h), under its primary rank's communicator.
nlohmann::json TimeJson(const RanksSnapshot::Process& p) {
  nlohmann::json out = TimeRankJson(p.time);
  out["comm"] = p.has_rank ? nlohmann::json(CommLabel(p.primary_comm)) : nlohmann::json();
  return out;
}

}  // namespace

nlohmann::json HealthzJson(const HealthSnapshot& snap, int64_t now_real_ns, int64_t now_mono_ns) {
  return {{"status", "ok"},
          {"version", kSentinelVersion},
          {"host", snap.host},
          {"started_at", FormatRealTime(snap.start_real_ns)},
          {"now", FormatRealTime(now_real_ns)},
          {"uptime_s", static_cast<double>(now_mono_ns - snap.start_mono_ns) / 1e9},
          {"clients", snap.clients_connected},
          {"records", snap.records}};
}

nlohmann::json InFlightJson(int64_t now_mono_ns, const InFlightView& v) {
  if (!v.has_state) return nullptr;
  const bool waiting = v.oldest_since_ns > 0 && v.enqueued > v.completed;
  return {{"enqueued", v.enqueued},
          {"gpu_started", v.gpu_started},
          {"completed", v.completed},
          {"oldest_age_s", InFlightAgeSeconds(now_mono_ns, v)},
          {"oldest_func", waiting ? nlohmann::json(FuncName(v.oldest_func)) : nlohmann::json()},
          {"oldest_seq", waiting ? nlohmann::json(v.oldest_seq) : nlohmann::json()}};
}

nlohmann::json RanksJson(const RanksSnapshot& snap) {
  std::vector<const RanksSnapshot::Process*> processes;
  processes.reserve(snap.processes.size());
  for (const RanksSnapshot::Process& p : snap.processes) processes.push_back(&p);
  std::sort(processes.begin(), processes.end(),
            [](const RanksSnapshot::Process* a, const RanksSnapshot::Process* b) {
              return ProcessListedBefore(*a, *b);
            });
  std::vector<int64_t> late;
  std::vector<int64_t> clock_free;
  std::vector<int64_t> dur;
  nlohmann::json ranks = nlohmann::json::array();
  for (const RanksSnapshot::Process* p : processes) {
    nlohmann::json comms = nlohmann::json::array();
    for (const RanksSnapshot::Comm& r : p->comms) {
      comms.push_back({{"comm", CommLabel(r.comm_hash)},
                       {"uid", r.uid},
                       {"rank", r.rank},
                       {"nranks", r.nranks},
                       {"last_seq", r.has_seq ? nlohmann::json(r.last_seq) : nlohmann::json()},
                       {"collectives", r.collectives},
                       {"p2p", r.p2p},
                       {"active", r.active},
                       {"inflight", InFlightJson(snap.now_mono_ns, r.inflight)},
                       {"wait", WaitJson(r)}});
    }
    late.clear();
    clock_free.clear();
    dur.clear();
    for (const RanksSnapshot::SampleTimes& s : p->samples) {  // the known values only
      if (s.lateness_ns >= 0) late.push_back(s.lateness_ns);
      if (s.clock_free_ns >= 0) clock_free.push_back(s.clock_free_ns);
      if (s.duration_ns >= 0) dur.push_back(s.duration_ns);
    }
    const bool primary = p->has_rank;
    const bool overlap_valid = p->has_gpu_window && p->gpu_window_nccl_ns > 0;
    ranks.push_back(
        {{"pid", p->pid},
         {"uid", p->uid},
         {"claimed_pid", p->claimed_pid},
         {"host", p->host},
         {"job_id", p->job_id},
         {"rank", primary ? nlohmann::json(p->rank) : nlohmann::json()},
         {"nranks", primary ? nlohmann::json(p->nranks) : nlohmann::json()},
         {"connected", p->connected},
         {"comms", comms},
         {"last_seq", primary && p->has_seq ? nlohmann::json(p->last_seq) : nlohmann::json()},
         {"collectives", primary ? p->collectives : 0},
         {"lateness_p50_ms", PercentileMsOrNull(&late, 50)},
         {"lateness_p99_ms", PercentileMsOrNull(&late, 99)},
         {"clock_free_lateness_p50_ms", PercentileMsOrNull(&clock_free, 50)},
         {"duration_p50_ms", PercentileMsOrNull(&dur, 50)},
         {"overlap",
          NumOrNull(overlap_valid, overlap_valid ? static_cast<double>(p->gpu_window_overlap_ns) /
                                                       static_cast<double>(p->gpu_window_nccl_ns)
                                                 : 0)},
         {"gpu", GpuRankJson(p->gpu)},
         {"time", TimeJson(*p)},
         {"drops", p->has_heartbeat ? HeartbeatDrops(p->heartbeat) : 0},
         {"overhead_ratio", NumOrNull(p->overhead_ratio >= 0, p->overhead_ratio)},
         // The plugin's overhead-budget step (wire_format.md: heartbeat budget_level).
         {"budget_level", p->has_heartbeat ? p->heartbeat.budget_level : 0},
         // Whether its compute segments are judged (wait evidence, straggler drift): a plugin
         // sampling at level 2 or 3 whose bursts have not yet given any communicator a recent
         // window of consecutive collectives is "not_judged_sampled", said rather than guessed.
         {"judged", Judged(*p)},
         {"straggler", primary && p->straggler}});
  }
  // Where the time went per uid (a job), over its connected processes with a primary rank, and
  // whether the waiting points at a few of them (aggregate/time_breakdown.h).
  std::vector<TimeBreakdownRow> rows;
  for (const RanksSnapshot::Process* p : processes) {
    if (!p->connected || !p->has_rank) continue;
    rows.push_back({p->uid,
                    {{"rank", p->rank}, {"comm", CommLabel(p->primary_comm)}, {"pid", p->pid}},
                    p->time});
  }
  return {{"host", snap.host}, {"ranks", ranks}, {"breakdown", TimeBreakdownJson(rows)}};
}

nlohmann::json TelemetryJson(const TelemetrySnapshot& snap) {
  std::vector<int64_t> latency;
  std::vector<int64_t> duration;
  std::vector<int64_t> skew;
  std::vector<int64_t> busbw_mbps;
  std::map<uint64_t, std::vector<int64_t>> skew_by_comm;
  for (const TelemetrySnapshot::Coll& s : snap.collectives) {
    skew.push_back(s.skew_ns);
    skew_by_comm[s.comm_hash].push_back(s.skew_ns);
    if (s.latency_ns >= 0) latency.push_back(s.latency_ns);
    if (s.duration_ns >= 0) duration.push_back(s.duration_ns);
    if (s.busbw_gbps >= 0) busbw_mbps.push_back(static_cast<int64_t>(s.busbw_gbps * 1000));
  }
  const size_t n = skew.size();
  nlohmann::json suspects = nlohmann::json::array();
  for (const HangSuspect& h : snap.hang_suspects) {
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
  const Counters& c = snap.counters;
  const NicWindow& nic = snap.nic;
  // p50 bus bandwidth (GB/s: gigabytes, as nccl-tests prints it) over the fastest ACTIVE port's
  // rate (sysfs, Gb/s: gigabits), so the ratio converts bytes to bits; null when unknown.
  const double busbw_p50 =
      busbw_mbps.empty() ? -1 : static_cast<double>(Percentile(&busbw_mbps, 50)) / 1000;
  const double link_ratio =
      rules::BandwidthRatio(busbw_p50, rules::LinkGBs(nic.fastest_active_gbps));
  const int64_t overlap = snap.gpu_window_overlap;
  const int64_t nccl = snap.gpu_window_nccl;
  return {{"host", snap.host},
          {"window_s", static_cast<double>(snap.window_ns) / 1e9},
          {"collectives", n},
          {"latency_p50_ms", PercentileMsOrNull(&latency, 50)},
          {"latency_p99_ms", PercentileMsOrNull(&latency, 99)},
          {"duration_p50_ms", PercentileMsOrNull(&duration, 50)},
          {"duration_p99_ms", PercentileMsOrNull(&duration, 99)},
          {"skew_p50_ms", PercentileMsOrNull(&skew, 50)},
          {"skew_p99_ms", PercentileMsOrNull(&skew, 99)},
          {"busbw_gbps_p50", NumOrNull(busbw_p50 >= 0, busbw_p50)},
          {"busbw_link_ratio", NumOrNull(link_ratio >= 0, link_ratio)},
          {"overlap_ratio",
           nccl > 0 ? nlohmann::json(static_cast<double>(overlap) / static_cast<double>(nccl))
                    : nlohmann::json()},
          // NIC counters from sysfs over the window: null (not zero) when not available.
          {"retransmits", nic.has_retransmits ? nlohmann::json(nic.retransmits) : nlohmann::json()},
          {"cnp_rate", NumOrNull(nic.has_cnp, nic.cnp_per_s)},
          {"ecn_rate", NumOrNull(nic.has_ecn, nic.ecn_per_s)},
          {"gpu", GpuTelemetryJson(snap.gpu)},
          {"collective_hang_suspects", suspects},
          {"by_comm", by_comm},
          // The job's bus bandwidth per size and the fabric baseline (baseline_export.h).
          {"busbw_by_size", JobBusbwBySizeJson(snap.baseline)},
          {"baseline", BaselineJson(snap.baseline)},
          {"records", c.records},
          {"net", snap.net.ToJson()},  // net plugin devices and links (net_links.h)
          // Slow collectives split into late rank / network / transfer (slow_cause.h).
          {"slow_windows", SlowWindowsJson(snap.slow, snap.since_mono_ns)},
          {"plugin_dropped", snap.plugin_dropped},
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
          // Its communicator's owner: (uid, id) names the alert; null for a node-level one.
          {"uid", a.owner_uid == kNoUid ? nlohmann::json() : nlohmann::json(a.owner_uid)},
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

nlohmann::json AlertsJson(const std::vector<Alert>& book) {
  std::vector<const Alert*> alerts;
  alerts.reserve(book.size());
  for (const Alert& a : book) alerts.push_back(&a);
  std::sort(alerts.begin(), alerts.end(), [](const Alert* a, const Alert* b) {
    if (a->state != b->state) return a->firing();
    return a->started_real_ns != b->started_real_ns ? a->started_real_ns > b->started_real_ns
                                                    : RefOf(*a) < RefOf(*b);
  });
  nlohmann::json out = nlohmann::json::array();
  for (const Alert* a : alerts) out.push_back(AlertJson(*a));
  return {{"alerts", out}};
}

nlohmann::json ErrorJson(int code, const std::string& message) {
  return {{"error", {{"code", code}, {"message", message}}}};
}

}  // namespace sentinel::collector
