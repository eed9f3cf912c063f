// The per-communicator and per-rank /metrics families: see prometheus_families.h.
#include <array>

#include "absl/strings/str_cat.h"

#include "collector/aggregate/snapshot.h"
#include "collector/export/prometheus_families.h"
#include "collector/export/prometheus_family.h"
#include "common/wire_names.h"

namespace sentinel::collector {
namespace {

std::string RankLabels(const MetricsSnapshot::Rank& r) {
  return PromLabels({{"comm", CommLabel(r.comm_hash)},
                     {"uid", absl::StrCat(r.uid)},
                     {"rank", absl::StrCat(r.rank)}});
}

void MergeHistogram(const Histogram& from, Histogram* into) {
  for (size_t i = 0; i < from.counts.size(); ++i) into->counts[i] += from.counts[i];
  into->sum += from.sum;
  into->count += from.count;
}

void AppendJoined(const MetricsRows& rows, std::string* out) {
  PromFamily f(
      out, "sentinel_collectives_joined_total", PromType::kCounter,
      "Collectives joined across the node's ranks (by size bucket with --metrics-detail size).");
  for (const MetricsSnapshot::Comm* comm : rows.comms) {
    for (int func = 0; func < kFuncSlots; ++func) {
      const auto& by_bucket = comm->joined_by_func_bucket[static_cast<size_t>(func)];
      uint64_t total = 0;
      for (int b = 0; b < kSizeBuckets; ++b) {
        const uint64_t n = by_bucket[static_cast<size_t>(b)];
        total += n;
        if (n == 0 || !rows.by_size) continue;
        f.Add(PromLabels({{"comm", CommLabel(comm->hash)},
                          {"uid", absl::StrCat(comm->uid)},
                          {"func", FuncName(static_cast<uint8_t>(func))},
                          {"size_bucket", SizeBucketLabel(b)}}),
              static_cast<double>(n));
      }
      if (total == 0 || rows.by_size) continue;
      f.Add(PromLabels({{"comm", CommLabel(comm->hash)},
                        {"uid", absl::StrCat(comm->uid)},
                        {"func", FuncName(static_cast<uint8_t>(func))}}),
            static_cast<double>(total));
    }
  }
}

// One histogram per communicator, or per (communicator, size bucket) with --metrics-detail size.
void AppendSkew(const MetricsRows& rows, std::string* out) {
  PromFamily f(out, "sentinel_skew_seconds", PromType::kHistogram,
               "Arrival skew across the node's ranks per joined collective (one clock, exact).");
  for (const MetricsSnapshot::Comm* comm : rows.comms) {
    Histogram merged;
    for (int b = 0; b < kSizeBuckets; ++b) {
      const auto& h = comm->skew[static_cast<size_t>(b)];
      if (h.count == 0) continue;
      if (!rows.by_size) {
        MergeHistogram(h, &merged);
        continue;
      }
      f.AddHistogram(PromLabels({{"comm", CommLabel(comm->hash)},
                                 {"uid", absl::StrCat(comm->uid)},
                                 {"size_bucket", SizeBucketLabel(b)}}),
                     h);
    }
    if (merged.count > 0)
      f.AddHistogram(
          PromLabels({{"comm", CommLabel(comm->hash)}, {"uid", absl::StrCat(comm->uid)}}), merged);
  }
}

// Only its mean is read (sum / count): a summary without quantiles, 2 series per rank.
void AppendClockFreeLateness(const MetricsRows& rows, std::string* out) {
  PromFamily f(out, "sentinel_rank_clock_free_lateness_seconds", PromType::kSummary,
               "Longest local duration minus own duration (clock-free lateness estimate).");
  for (const MetricsSnapshot::Rank* r : rows.ranks) {
    if (r->clock_free.count == 0) continue;
    const std::string labels = RankLabels(*r);
    f.AddSuffixed("_sum", labels, r->clock_free.sum);
    f.AddSuffixed("_count", labels, static_cast<double>(r->clock_free.count));
  }
}

// A p50 over the rank's recent window, in ns (-1: too few collectives), as seconds.
void AppendRecentP50(const MetricsRows& rows, const char* name, const char* help,
                     double MetricsSnapshot::Rank::*p50_ns, std::string* out) {
  PromFamily f(out, name, PromType::kGauge, help);
  for (const MetricsSnapshot::Rank* r : rows.ranks) {
    if (r->*p50_ns < 0) continue;
    f.Add(RankLabels(*r), r->*p50_ns / 1e9);
  }
}

void AppendDuration(const MetricsRows& rows, std::string* out) {
  PromFamily f(out, "sentinel_rank_duration_seconds", PromType::kHistogram,
               "GPU duration of the rank's operations (by message-size bucket with "
               "--metrics-detail size; job-wide straggler view).");
  for (const MetricsSnapshot::Rank* r : rows.ranks) {
    const std::string labels = RankLabels(*r);
    Histogram merged;
    for (int b = 0; b < kSizeBuckets; ++b) {
      const auto& h = r->duration[static_cast<size_t>(b)];
      if (!h) continue;
      if (!rows.by_size) {
        MergeHistogram(*h, &merged);
        continue;
      }
      f.AddHistogram(absl::StrCat(labels, ",", PromLabels({{"size_bucket", SizeBucketLabel(b)}})),
                     *h);
    }
    if (merged.count > 0) f.AddHistogram(labels, merged);
  }
}

// The in-flight families: name, help and the value of one rank.
struct InFlightFamily {
  const char* name;
  const char* help;
  double (*value)(int64_t now_mono_ns, const MetricsSnapshot::Rank& r);
};

constexpr std::array<InFlightFamily, 7> kInFlightFamilies = {{
    {"sentinel_inflight_enqueued", "Ordinal of the rank's last collective enqueued on the comm.",
     [](int64_t, const MetricsSnapshot::Rank& r) {
       return static_cast<double>(r.inflight.enqueued);
     }},
    {"sentinel_inflight_gpu_started", "Ordinal of the rank's last collective whose kernel started.",
     [](int64_t, const MetricsSnapshot::Rank& r) {
       return static_cast<double>(r.inflight.gpu_started);
     }},
    {"sentinel_inflight_completed", "Ordinal of the rank's last collective completed.",
     [](int64_t, const MetricsSnapshot::Rank& r) {
       return static_cast<double>(r.inflight.completed);
     }},
    {"sentinel_inflight_oldest_age_seconds",
     "How long the rank's oldest incomplete collective has been in flight (0 when none).",
     [](int64_t now, const MetricsSnapshot::Rank& r) {
       return InFlightAgeSeconds(now, r.inflight);
     }},
    {"sentinel_inflight_connected", "1 while the rank's process is connected, 0 once gone.",
     [](int64_t, const MetricsSnapshot::Rank& r) { return r.inflight.connected ? 1.0 : 0.0; }},
    {"sentinel_inflight_waiting_elsewhere",
     "1 while the rank's process has been inside another communicator's collective (kernel "
     "started) for 5 s or more: a hang here is not its doing.",
     [](int64_t now, const MetricsSnapshot::Rank& r) {
       return InFlightWaitingElsewhere(now, r) ? 1.0 : 0.0;
     }},
    {"sentinel_inflight_paused_outside_nccl",
     "1 while the rank's process has had nothing in flight in any communicator on its node for 2 s "
     "or more and its /proc shows it working (disk wait, CPU, bytes moving: a checkpoint, an "
     "evaluation): a rank behind in a stuck collective with 1 here is paused, not stuck, until "
     "--hang-timeout-paused.",
     [](int64_t, const MetricsSnapshot::Rank& r) {
       return r.inflight.connected && r.inflight.outside_nccl && WorksOutsideNccl(r.inflight) ? 1.0
                                                                                              : 0.0;
     }},
}};

// What a stuck rank is stuck on, for the job-wide rules that tell a mismatch and a wait cycle
// across nodes: series only for a rank whose oldest collective has been in flight 5 s or more
// (InFlightStuck), or whose process has sat that long inside another communicator's collective,
// so a running job exports none. The operation's figures are values; its function, datatype and
// root are labels of one series per stuck rank (their values are bounded, and the series lives
// only while the rank is stuck).
void AppendStuckFamilies(const MetricsRows& rows, std::string* out) {
  const int64_t now = rows.snap->now_mono_ns;
  auto stuck = [now](const MetricsSnapshot::Rank& r) {
    return InFlightStuck(now, r.inflight) && r.inflight.has_signature;
  };
  PromFamily ordinal(out, "sentinel_inflight_stuck_ordinal", PromType::kGauge,
                     "Ordinal of the collective the rank has had in flight for 5 s or more (the "
                     "position the job-wide mismatch rule compares at).");
  for (const MetricsSnapshot::Rank* r : rows.ranks) {
    if (stuck(*r)) ordinal.Add(RankLabels(*r), static_cast<double>(r->inflight.oldest_seq));
  }
  PromFamily digest(out, "sentinel_inflight_stuck_signature", PromType::kGauge,
                    "48-bit digest of that collective's function, size, datatype and root, the "
                    "same number on every node for the same operation: ranks stuck at one "
                    "position with different digests issued different collectives.");
  for (const MetricsSnapshot::Rank* r : rows.ranks) {
    if (!stuck(*r)) continue;
    digest.Add(RankLabels(*r), static_cast<double>(StuckOpOf(r->inflight).digest));
  }
  PromFamily op(out, "sentinel_inflight_stuck_op_bytes", PromType::kGauge,
                "Size in bytes of that collective, labelled with its function, datatype and root "
                "(root only for a rooted one): what the alerts quote for each side.");
  for (const MetricsSnapshot::Rank* r : rows.ranks) {
    if (!stuck(*r)) continue;
    const StuckOpExport sig = StuckOpOf(r->inflight);
    std::string labels =
        absl::StrCat(RankLabels(*r), ",", PromLabels({{"func", FuncName(sig.func)}}));
    if (!sig.datatype.empty()) {
      absl::StrAppend(&labels, ",", PromLabels({{"datatype", sig.datatype}}));
    }
    if (sig.root.has_value() && *sig.root >= 0) {
      absl::StrAppend(&labels, ",", PromLabels({{"root", absl::StrCat(*sig.root)}}));
    }
    op.Add(labels, static_cast<double>(sig.bytes));
  }
  PromFamily waiting(out, "sentinel_inflight_waiting_in", PromType::kGauge,
                     "Ordinal of the collective of communicator in_comm (kernel started, not "
                     "completed) the rank's process has been inside for 5 s or more; with the "
                     "rank behind here, the job-wide wait-cycle rule pairs it with a rank behind "
                     "in in_comm that waits here.");
  for (const MetricsSnapshot::Rank* r : rows.ranks) {
    if (!InFlightWaitingIn(now, *r)) continue;
    waiting.Add(
        absl::StrCat(RankLabels(*r), ",", PromLabels({{"in_comm", CommLabel(r->waiting_in_comm)}})),
        static_cast<double>(r->waiting_in_ordinal));
  }
}

}  // namespace

void AppendCommFamilies(const MetricsRows& rows, std::string* out) {
  PromFamily nranks(out, "sentinel_comm_nranks", PromType::kGauge,
                    "Ranks of the communicator (job-wide) and local ranks seen.");
  for (const MetricsSnapshot::Comm* comm : rows.comms) {
    nranks.Add(
        PromLabels(
            {{"comm", CommLabel(comm->hash)}, {"uid", absl::StrCat(comm->uid)}, {"scope", "job"}}),
        comm->nranks);
    nranks.Add(PromLabels({{"comm", CommLabel(comm->hash)},
                           {"uid", absl::StrCat(comm->uid)},
                           {"scope", "local"}}),
               static_cast<double>(comm->local_ranks));
  }
  AppendJoined(rows, out);
  AppendSkew(rows, out);
}

void AppendRankProgressFamilies(const MetricsRows& rows, std::string* out) {
  PromFamily up(out, "sentinel_rank_up", PromType::kGauge,
                "1 while the rank's process is connected and the communicator alive.");
  for (const MetricsSnapshot::Rank* r : rows.ranks) up.Add(RankLabels(*r), r->active ? 1 : 0);
  // One series per late rank at most: `cause` takes only LateCauseName's fixed values.
  PromFamily cause(out, "sentinel_rank_late_cause", PromType::kGauge,
                   "1 for a rank a straggler alert names late, labelled with the cause judged "
                   "from the node's evidence: gpu_slower, host_cpu, cpu_quota, host_wait, "
                   "memory_pressure, network or unknown.");
  for (const MetricsSnapshot::Rank* r : rows.ranks) {
    if (!r->late_cause.empty()) {
      cause.Add(absl::StrCat(RankLabels(*r), ",cause=\"", r->late_cause, "\""), 1);
    }
  }
  PromFamily last_seq(
      out, "sentinel_rank_last_seq", PromType::kGauge,
      "Highest collective sequence number the rank completed (hang culprits job-wide).");
  for (const MetricsSnapshot::Rank* r : rows.ranks) {
    if (r->has_seq) last_seq.Add(RankLabels(*r), static_cast<double>(r->last_seq));
  }
  PromFamily by_func(out, "sentinel_rank_collectives_total", PromType::kCounter,
                     "Operations completed by the rank, by function.");
  for (const MetricsSnapshot::Rank* r : rows.ranks) {
    for (int func = 0; func < kFuncSlots; ++func) {
      const uint64_t n = r->count_by_func[static_cast<size_t>(func)];
      if (n == 0) continue;
      by_func.Add(PromLabels({{"comm", CommLabel(r->comm_hash)},
                              {"uid", absl::StrCat(r->uid)},
                              {"rank", absl::StrCat(r->rank)},
                              {"func", FuncName(static_cast<uint8_t>(func))}}),
                  static_cast<double>(n));
    }
  }
}

// In-flight state (hang detection), one series per exported (comm, rank) that sends it. The
// job-wide hang-culprit rule compares these across nodes, skipping ranks waiting elsewhere.
void AppendInFlightFamilies(const MetricsRows& rows, std::string* out) {
  for (const InFlightFamily& family : kInFlightFamilies) {
    PromFamily f(out, family.name, PromType::kGauge, family.help);
    for (const MetricsSnapshot::Rank* r : rows.ranks) {
      if (!r->inflight.has_state || r->inflight.ended) continue;
      f.Add(RankLabels(*r), family.value(rows.snap->now_mono_ns, *r));
    }
  }
  AppendStuckFamilies(rows, out);
}

void AppendRankTimingFamilies(const MetricsRows& rows, std::string* out) {
  PromFamily lateness(out, "sentinel_rank_lateness_seconds", PromType::kHistogram,
                      "Arrival minus the earliest local arrival, per joined collective.");
  for (const MetricsSnapshot::Rank* r : rows.ranks) {
    if (r->lateness.count > 0) lateness.AddHistogram(RankLabels(*r), r->lateness);
  }
  AppendClockFreeLateness(rows, out);
  // The job-wide straggler rules compare these across nodes (examples/prometheus): over the
  // rank's recent window (its last 64 collectives, at most 10 s), so a hiccup does not move them.
  AppendRecentP50(rows, "sentinel_rank_duration_p50_seconds",
                  "p50 of the rank's collective durations over its recent window (the rank the "
                  "others wait for has the shortest).",
                  &MetricsSnapshot::Rank::recent_duration_p50_ns, out);
  AppendRecentP50(rows, "sentinel_rank_segment_p50_seconds",
                  "p50 of the rank's compute segment (end of its previous collective to its "
                  "arrival at the next, less its time inside its process's other communicators' "
                  "collectives) over its recent window.",
                  &MetricsSnapshot::Rank::recent_segment_p50_ns, out);
  AppendDuration(rows, out);
}

}  // namespace sentinel::collector
