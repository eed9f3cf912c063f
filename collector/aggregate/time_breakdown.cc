// Where a rank's time went (see time_breakdown.h).
#include "collector/aggregate/time_breakdown.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <map>

#include "absl/strings/str_format.h"

#include "collector/aggregate/aggregator.h"

namespace sentinel::collector {
namespace {

// Collectives kept per collective the plugin sends at budget levels 2 and 3 (plugin/README.md
// "Overhead budget": bursts of 8 out of every 64).
constexpr int64_t kBudgetWeight = 8;

int64_t PendingBucketOf(int64_t at_ns) {
  const int64_t b = ProcessTime::kPendingBucketNs;
  return at_ns >= 0 ? at_ns / b * b : -((-at_ns + b - 1) / b) * b;
}

void TakeCheckpoint(ProcessTime* t, int64_t now_ns) {
  t->last_at_ns = std::max(t->last_at_ns, now_ns);
  if (t->first_at_ns == 0) {
    t->first_at_ns = now_ns;
    t->checkpoints.Push({now_ns, TimeTotals{}});
    return;
  }
  if (t->checkpoints.size() == 0 ||
      now_ns - t->checkpoints.Newest().at_ns >= ProcessTime::kCheckpointEveryNs) {
    t->checkpoints.Push({now_ns, t->totals});
  }
}

TimeTotals TotalsMinus(const TimeTotals& a, const TimeTotals& b) {
  TimeTotals d;
  d.compute_ns = a.compute_ns - b.compute_ns;
  d.communication_ns = a.communication_ns - b.communication_ns;
  d.wait_ns = a.wait_ns - b.wait_ns;
  d.host_ns = a.host_ns - b.host_ns;
  d.measured_ns = a.measured_ns - b.measured_ns;
  d.steps = a.steps - b.steps;
  return d;
}

int64_t TimePartsSum(const TimeTotals& t) {
  return t.compute_ns + t.communication_ns + t.wait_ns + t.host_ns;
}

// Prometheus' quantile aggregation: linear interpolation between the closest ranks.
double PromQuantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

nlohmann::json TimeNum(bool ok, double v) { return ok ? nlohmann::json(v) : nlohmann::json(); }

}  // namespace

const char* TimePartName(TimePart part) {
  switch (part) {
    case TimePart::kCompute:
      return "compute";
    case TimePart::kCommunication:
      return "communication";
    case TimePart::kWait:
      return "wait";
    case TimePart::kHost:
      return "host";
  }
  return "?";
}

int64_t TimeTotals::Part(TimePart part) const {
  switch (part) {
    case TimePart::kCompute:
      return compute_ns;
    case TimePart::kCommunication:
      return communication_ns;
    case TimePart::kWait:
      return wait_ns;
    case TimePart::kHost:
      return host_ns;
  }
  return 0;
}

void TimeOnGpuWindow(ProcessTime* t, const SentinelWireGpuWindow& w, int64_t now_ns) {
  // Counted once: a window that starts before the end of one already counted is a replay or out
  // of order, and counting it would inflate every part.
  if (w.start_ns < t->counted_end_ns) {
    ++t->windows_overlapping;
    return;
  }
  t->counted_end_ns = w.end_ns;
  // Pending wait of collectives that arrived before this window belongs to a window that is gone
  // (not measured, or already counted when it arrived): it stays in the wait, placed nowhere.
  int64_t inside = 0;
  while (!t->pending.empty() && t->pending.front().bucket_start_ns < w.end_ns) {
    const ProcessTime::Pending& p = t->pending.front();
    if (p.bucket_start_ns >= PendingBucketOf(w.start_ns)) {
      inside += p.wait_ns;
    } else {
      t->wait_unplaced_ns += p.wait_ns;
    }
    t->pending.pop_front();
  }
  if (w.status != 0) {
    t->gpu_measured = false;
    t->wait_unplaced_ns += inside;
    TakeCheckpoint(t, now_ns);
    return;
  }
  const int64_t exposed = w.nccl_ns - w.overlap_ns;  // >= 0: ValidGpuWindow
  const int64_t placed = std::min(exposed, inside);
  t->wait_unplaced_ns += inside - placed;
  t->totals.compute_ns += w.compute_ns;
  t->totals.communication_ns += exposed - placed;
  t->totals.host_ns += w.idle_ns;
  t->totals.measured_ns += w.end_ns - w.start_ns;
  t->totals.steps += w.steps;
  t->gpu_ever = true;
  t->gpu_measured = true;
  TakeCheckpoint(t, now_ns);
}

void TimeOnWait(ProcessTime* t, int64_t arrival_ns, int64_t wait_ns, int64_t now_ns) {
  if (wait_ns < 0) return;
  t->wait_known = true;
  t->totals.wait_ns += wait_ns;
  const int64_t bucket = PendingBucketOf(arrival_ns);
  // Buckets are kept in order; a collective older than the newest bucket (joins of different
  // functions complete out of order) adds to the bucket it belongs to.
  auto pos = t->pending.end();
  while (pos != t->pending.begin() && std::prev(pos)->bucket_start_ns > bucket) --pos;
  if (pos != t->pending.begin() && std::prev(pos)->bucket_start_ns == bucket) {
    std::prev(pos)->wait_ns += wait_ns;
  } else if (pos == t->pending.begin() && t->pending.size() >= ProcessTime::kPendingBuckets) {
    t->wait_unplaced_ns += wait_ns;  // older than every bucket kept
  } else {
    t->pending.insert(pos, {bucket, wait_ns});
  }
  while (t->pending.size() > ProcessTime::kPendingBuckets) {
    t->wait_unplaced_ns += t->pending.front().wait_ns;
    t->pending.pop_front();
  }
  TakeCheckpoint(t, now_ns);
}

void JoinWaits(const std::vector<WaitObservation>& obs, bool spans_nodes, int64_t floor_ns,
               std::vector<int64_t>* waits) {
  std::vector<int64_t>& out = *waits;
  out.assign(obs.size(), -1);
  int64_t last = INT64_MIN;
  for (const WaitObservation& o : obs) {
    if (o.arrival_ns < 0 || o.duration_ns < 0) return;
    last = std::max(last, o.arrival_ns);
  }
  for (size_t i = 0; i < obs.size(); ++i) {
    const WaitObservation& o = obs[i];
    int64_t wait = last - o.arrival_ns;
    if (spans_nodes && floor_ns >= 0) {
      wait += std::max<int64_t>(0, o.arrival_ns + o.duration_ns - last - floor_ns);
    }
    out[i] = std::min(wait, o.duration_ns);
  }
}

void TimeObserveJoin(CommState* comm_state, const std::vector<WaitObservation>& obs, int bucket,
                     int64_t now_ns) {
  if (obs.empty() || bucket < 0) return;
  const CommState& comm = *comm_state;
  std::vector<int64_t>& least = comm_state->time.least_floor_ns;
  if (least.size() <= static_cast<size_t>(bucket))
    least.resize(static_cast<size_t>(bucket) + 1, -1);
  int64_t& floor = least[static_cast<size_t>(bucket)];
  const int64_t now_floor = comm.wait ? comm.wait->floor_ns(bucket) : -1;
  if (now_floor >= 0 && (floor < 0 || now_floor < floor)) floor = now_floor;
  std::vector<int64_t>& waits = comm_state->time.join_waits;
  JoinWaits(obs, comm.nnodes > 1, floor, &waits);
  int64_t weight = 1;
  for (const RankState* m : comm.members) {
    if (m->budget_sampled) weight = kBudgetWeight;
  }
  for (size_t i = 0; i < obs.size(); ++i) {
    if (waits[i] < 0 || obs[i].member < 0 ||
        static_cast<size_t>(obs[i].member) >= comm.members.size()) {
      continue;
    }
    const RankState* m = comm.members[static_cast<size_t>(obs[i].member)];
    // Null once its process is gone; not connected while that disconnect deactivates the
    // process's ranks one by one, when a join the first one held completes with the others.
    ProcessState* p = m->process;
    if (p == nullptr || !p->connected) continue;
    TimeOnWait(&p->time, obs[i].arrival_ns, waits[i] * weight, now_ns);
  }
}

TimeBreakdownInput TimeBreakdownInputOf(const ProcessTime& t, int64_t now_ns) {
  TimeBreakdownInput in;
  in.gpu_known = t.gpu_ever && t.gpu_measured;
  in.wait_known = t.wait_known;
  in.totals = t.totals;
  if (t.checkpoints.size() == 0) return in;
  // The oldest checkpoint still kept: 60-70 s back once the process has run that long.
  const ProcessTime::Checkpoint& oldest = t.checkpoints[0];
  in.recent = TotalsMinus(t.totals, oldest.totals);
  in.recent_span_ns = std::max<int64_t>(0, std::max(now_ns, t.last_at_ns) - oldest.at_ns);
  return in;
}

bool RecentWaitShare(const TimeBreakdownInput& in, double* share) {
  if (!in.wait_known) return false;
  const double wait = static_cast<double>(in.recent.wait_ns);
  if (in.gpu_known) {
    const int64_t sum = TimePartsSum(in.recent);
    if (sum <= 0) return false;
    *share = wait / static_cast<double>(sum);
    return true;
  }
  if (in.recent_span_ns <= 0) return false;
  *share = std::min(1.0, wait / static_cast<double>(in.recent_span_ns));
  return true;
}

const char* WaitVerdictName(WaitVerdictKind kind) {
  switch (kind) {
    case WaitVerdictKind::kNotEnoughData:
      return "not_enough_data";
    case WaitVerdictKind::kLittleWaiting:
      return "little_waiting";
    case WaitVerdictKind::kOneRank:
      return "one_rank";
    case WaitVerdictKind::kFewRanks:
      return "few_ranks";
    case WaitVerdictKind::kWidened:
      return "widened";
  }
  return "?";
}

WaitVerdict JudgeWaiting(const std::vector<double>& shares) {
  WaitVerdict v;
  std::vector<double> known;
  for (double s : shares) {
    if (s >= 0) known.push_back(s);
  }
  if (known.size() < 2) return v;
  v.reference_share = PromQuantile(known, kWaitReferenceQuantile);
  if (v.reference_share < kWaitMatters) {
    v.kind = WaitVerdictKind::kLittleWaiting;
    return v;
  }
  for (size_t i = 0; i < shares.size(); ++i) {
    if (shares[i] >= 0 && shares[i] < kCulpritShareOfReference * v.reference_share) {
      v.culprits.push_back(i);
    }
  }
  const double few = std::max(1.0, kFewRanksShare * static_cast<double>(known.size()));
  if (v.culprits.size() == 1) {
    v.kind = WaitVerdictKind::kOneRank;
  } else if (!v.culprits.empty() && static_cast<double>(v.culprits.size()) <= few) {
    v.kind = WaitVerdictKind::kFewRanks;
  } else {
    v.kind = WaitVerdictKind::kWidened;
    v.culprits.clear();
  }
  return v;
}

nlohmann::json TimeRankJson(const TimeBreakdownInput& in) {
  const TimeTotals& r = in.recent;
  const bool per_step = in.gpu_known && r.steps > 0;
  nlohmann::json parts = nlohmann::json::object();
  nlohmann::json steps = nlohmann::json::object();
  for (int i = 0; i < kTimeParts; ++i) {
    const auto part = static_cast<TimePart>(i);
    const bool known = part == TimePart::kWait ? in.wait_known : in.gpu_known;
    const double ns = static_cast<double>(r.Part(part));
    parts[TimePartName(part)] = TimeNum(known, ns / 1e9);
    steps[TimePartName(part)] =
        TimeNum(known && per_step, per_step ? ns / 1e6 / static_cast<double>(r.steps) : 0);
  }
  double share = 0;
  const bool has_share = RecentWaitShare(in, &share);
  return {{"cupti", in.gpu_known}, {"window_s", static_cast<double>(in.recent_span_ns) / 1e9},
          {"seconds", parts},      {"steps", per_step ? nlohmann::json(r.steps) : nlohmann::json()},
          {"per_step_ms", steps},  {"wait_share", TimeNum(has_share, share)}};
}

nlohmann::json TimeBreakdownJson(const std::vector<TimeBreakdownRow>& rows) {
  std::map<uint32_t, std::vector<const TimeBreakdownRow*>> by_uid;
  for (const TimeBreakdownRow& row : rows) by_uid[row.uid].push_back(&row);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [uid, procs] : by_uid) {
    std::vector<double> shares;
    std::array<double, kTimeParts> sums{};
    double wait = 0, total = 0, wall = 0;
    int cupti = 0;
    for (const TimeBreakdownRow* row : procs) {
      double s = -1;
      if (!RecentWaitShare(row->in, &s)) s = -1;
      shares.push_back(s);
      if (!row->in.gpu_known || !row->in.wait_known) continue;
      ++cupti;
      for (int i = 0; i < kTimeParts; ++i) {
        sums[static_cast<size_t>(i)] +=
            static_cast<double>(row->in.recent.Part(static_cast<TimePart>(i)));
      }
    }
    for (size_t i = 0; i < procs.size(); ++i) {
      if (shares[i] < 0) continue;
      wait += shares[i];
      total += 1;
    }
    for (double s : sums) wall += s;
    nlohmann::json job_shares = nlohmann::json();
    if (cupti > 0 && wall > 0) {
      job_shares = nlohmann::json::object();
      for (int i = 0; i < kTimeParts; ++i) {
        job_shares[TimePartName(static_cast<TimePart>(i))] = sums[static_cast<size_t>(i)] / wall;
      }
    }
    const WaitVerdict v = JudgeWaiting(shares);
    nlohmann::json culprits = nlohmann::json::array();
    for (size_t i : v.culprits) culprits.push_back(procs[i]->who);
    std::string why;
    switch (v.kind) {
      case WaitVerdictKind::kNotEnoughData:
        why = "fewer than 2 ranks have a measured wait (no joined collective with GPU times)";
        break;
      case WaitVerdictKind::kLittleWaiting:
        why = absl::StrFormat(
            "the waiting ranks lose %.1f%% of their time waiting, under %.0f%%: too little to "
            "judge (if this node's ranks are the ones others wait for, the job-wide rules say)",
            v.reference_share * 100, kWaitMatters * 100);
        break;
      case WaitVerdictKind::kOneRank:
      case WaitVerdictKind::kFewRanks:
        why = absl::StrFormat(
            "%d rank(s) wait less than half of what the others lose (%.1f%% of their time): the "
            "others wait for them",
            v.culprits.size(), v.reference_share * 100);
        break;
      case WaitVerdictKind::kWidened:
        why = absl::StrFormat(
            "the ranks lose %.1f%% of their time waiting and no few ranks stand apart: every "
            "rank is late now and then (the tail grew, no culprit)",
            v.reference_share * 100);
        break;
    }
    out.push_back({{"uid", uid},
                   {"ranks", procs.size()},
                   {"ranks_cupti", cupti},
                   {"wait_share", TimeNum(total > 0, total > 0 ? wait / total : 0)},
                   {"shares", job_shares},
                   {"verdict", WaitVerdictName(v.kind)},
                   {"reference_share", TimeNum(v.reference_share >= 0, v.reference_share)},
                   {"culprits", culprits},
                   {"why", why}});
  }
  return out;
}

}  // namespace sentinel::collector
