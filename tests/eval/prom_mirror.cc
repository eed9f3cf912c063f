// The job-wide rules' mirror: see prom_mirror.h.
#include "tests/eval/prom_mirror.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <unordered_map>
#include <utility>

namespace sentinel::collector::eval::prom {
namespace {

constexpr int64_t kSec = 1000000000;

const std::vector<std::string> kJobComm = {"job", "comm", "uid"};
const std::vector<std::string> kJobInstance = {"job", "instance"};
const std::vector<std::string> kJobCommInstance = {"job", "comm", "uid", "instance"};
const std::vector<std::string> kJobCommInstanceRank = {"job", "comm", "uid", "instance", "rank"};

std::string FullKey(const Labels& l) {
  std::string k;
  for (const auto& [n, v] : l) {
    k += n;
    k += '\x01';
    k += v;
    k += '\x02';
  }
  return k;
}

Labels Project(const Labels& l, const std::vector<std::string>& by) {
  Labels out;
  for (const std::string& n : by) {
    const auto it = l.find(n);
    if (it != l.end() && !it->second.empty()) out[n] = it->second;
  }
  return out;
}

const Vector& Get(const Store& s, const std::string& name) {
  static const Vector kEmpty;
  const auto it = s.find(name);
  return it == s.end() ? kEmpty : it->second;
}

}  // namespace

std::string Key(const Labels& l, const std::vector<std::string>& on) {
  std::string k;
  for (const std::string& n : on) {
    const auto it = l.find(n);
    if (it != l.end()) k += it->second;
    k += '\x01';
  }
  return k;
}

bool Compare(double a, Cmp op, double b) {
  switch (op) {
    case Cmp::kGt:
      return a > b;
    case Cmp::kGe:
      return a >= b;
    case Cmp::kEq:
      return a == b;
    case Cmp::kLt:
      return a < b;
    case Cmp::kLe:
      return a <= b;
    case Cmp::kNe:
      return a != b;
  }
  return false;
}

namespace {

template <typename F>
Vector AggregateBy(const Vector& v, const std::vector<std::string>& by, F reduce) {
  std::map<std::string, std::pair<Labels, std::vector<double>>> groups;
  for (const Sample& s : v) {
    auto& g = groups[Key(s.labels, by)];
    if (g.second.empty()) g.first = Project(s.labels, by);
    g.second.push_back(s.value);
  }
  Vector out;
  out.reserve(groups.size());
  for (auto& [k, g] : groups) out.push_back({std::move(g.first), reduce(&g.second)});
  return out;
}

}  // namespace

Vector MaxBy(const Vector& v, const std::vector<std::string>& by) {
  return AggregateBy(v, by, [](std::vector<double>* x) {
    double m = (*x)[0];
    for (double d : *x) {
      if (d > m || std::isnan(m)) m = d;
    }
    return m;
  });
}

Vector MinBy(const Vector& v, const std::vector<std::string>& by) {
  return AggregateBy(v, by, [](std::vector<double>* x) {
    double m = (*x)[0];
    for (double d : *x) {
      if (d < m || std::isnan(m)) m = d;
    }
    return m;
  });
}

Vector CountBy(const Vector& v, const std::vector<std::string>& by) {
  return AggregateBy(v, by, [](std::vector<double>* x) { return static_cast<double>(x->size()); });
}

Vector SumBy(const Vector& v, const std::vector<std::string>& by) {
  return AggregateBy(v, by, [](std::vector<double>* x) {
    double sum = 0;
    for (double d : *x) sum += d;
    return sum;
  });
}

Vector QuantileBy(const Vector& v, const std::vector<std::string>& by, double q) {
  return AggregateBy(v, by, [q](std::vector<double>* x) {
    std::sort(x->begin(), x->end());
    const double n = static_cast<double>(x->size());
    const double rank = q * (n - 1);
    const double lo = std::max(0.0, std::floor(rank));
    const double hi = std::max(0.0, std::min(n - 1, lo + 1));
    const double w = rank - std::floor(rank);
    return (*x)[static_cast<size_t>(lo)] * (1 - w) + (*x)[static_cast<size_t>(hi)] * w;
  });
}

Vector Filter(const Vector& v, Cmp op, double scalar) {
  Vector out;
  for (const Sample& s : v) {
    if (Compare(s.value, op, scalar)) out.push_back(s);
  }
  return out;
}

Vector Scale(double k, const Vector& v) {
  Vector out = v;
  for (Sample& s : out) s.value = k * s.value;
  return out;
}

Vector GroupArith(const Vector& one, Arith op, const Vector& many,
                  const std::vector<std::string>& on, bool many_is_right) {
  std::unordered_map<std::string, double> by_key;
  for (const Sample& s : one) by_key[Key(s.labels, on)] = s.value;
  Vector out;
  for (const Sample& s : many) {
    const auto it = by_key.find(Key(s.labels, on));
    if (it == by_key.end()) continue;
    const double a = many_is_right ? it->second : s.value;
    const double b = many_is_right ? s.value : it->second;
    out.push_back({s.labels, op == Arith::kSub ? a - b : op == Arith::kDiv ? a / b : a * b});
  }
  return out;
}

Vector CompareOn(const Vector& lhs, Cmp op, const Vector& rhs, const std::vector<std::string>& on) {
  std::unordered_map<std::string, double> by_key;
  for (const Sample& s : rhs) by_key[Key(s.labels, on)] = s.value;
  Vector out;
  for (const Sample& s : lhs) {
    const auto it = by_key.find(Key(s.labels, on));
    if (it != by_key.end() && Compare(s.value, op, it->second)) out.push_back(s);
  }
  return out;
}

Vector AndOn(const Vector& lhs, const Vector& rhs, const std::vector<std::string>& on) {
  std::unordered_map<std::string, bool> keys;
  for (const Sample& s : rhs) keys[Key(s.labels, on)] = true;
  Vector out;
  for (const Sample& s : lhs) {
    if (keys.count(Key(s.labels, on)) != 0) out.push_back(s);
  }
  return out;
}

Vector UnlessOn(const Vector& lhs, const Vector& rhs, const std::vector<std::string>& on) {
  std::unordered_map<std::string, bool> keys;
  for (const Sample& s : rhs) keys[Key(s.labels, on)] = true;
  Vector out;
  for (const Sample& s : lhs) {
    if (keys.count(Key(s.labels, on)) == 0) out.push_back(s);
  }
  return out;
}

Vector And(const Vector& lhs, const Vector& rhs) {
  std::unordered_map<std::string, bool> keys;
  for (const Sample& s : rhs) keys[FullKey(s.labels)] = true;
  Vector out;
  for (const Sample& s : lhs) {
    if (keys.count(FullKey(s.labels)) != 0) out.push_back(s);
  }
  return out;
}

Vector Or(const Vector& lhs, const Vector& rhs) {
  std::unordered_map<std::string, bool> keys;
  for (const Sample& s : lhs) keys[FullKey(s.labels)] = true;
  Vector out = lhs;
  for (const Sample& s : rhs) {
    if (keys.count(FullKey(s.labels)) == 0) out.push_back(s);
  }
  return out;
}

void History::Add(int64_t ts_ns, const Vector& v) {
  for (const Sample& s : v) {
    auto& e = series_[FullKey(s.labels)];
    if (e.second.empty()) e.first = s.labels;
    e.second.emplace_back(ts_ns, s.value);
  }
}

void History::Trim(int64_t before_ns) {
  for (auto it = series_.begin(); it != series_.end();) {
    auto& pts = it->second.second;
    pts.erase(std::remove_if(pts.begin(), pts.end(),
                             [before_ns](const auto& p) { return p.first < before_ns; }),
              pts.end());
    it = pts.empty() ? series_.erase(it) : std::next(it);
  }
}

Vector History::Changes(int64_t ts_ns, int64_t range_ns) const {
  Vector out;
  for (const auto& [k, e] : series_) {
    int n = 0;
    bool any = false;
    double last = 0;
    for (const auto& [t, v] : e.second) {
      if (t <= ts_ns - range_ns || t > ts_ns) continue;
      if (any && v != last) ++n;
      last = v;
      any = true;
    }
    if (any) out.push_back({e.first, static_cast<double>(n)});
  }
  return out;
}

Vector History::CountOverTime(int64_t ts_ns, int64_t range_ns) const {
  Vector out;
  for (const auto& [k, e] : series_) {
    int n = 0;
    for (const auto& [t, v] : e.second) {
      if (t > ts_ns - range_ns && t <= ts_ns) ++n;
    }
    if (n > 0) out.push_back({e.first, static_cast<double>(n)});
  }
  return out;
}

Vector History::MaxOverTime(int64_t ts_ns, int64_t range_ns) const {
  Vector out;
  for (const auto& [k, e] : series_) {
    bool any = false;
    double most = 0;
    for (const auto& [t, v] : e.second) {
      if (t <= ts_ns - range_ns || t > ts_ns) continue;
      most = any ? std::max(most, v) : v;
      any = true;
    }
    if (any) out.push_back({e.first, most});
  }
  return out;
}

std::vector<AlertEvent> AlertRule::Evaluate(int64_t ts_ns, const Vector& result) {
  std::vector<AlertEvent> fired;
  std::map<std::string, Active> next;
  for (const Sample& s : result) {
    const std::string k = FullKey(s.labels);
    const auto it = active_.find(k);
    Active a = it == active_.end() ? Active{ts_ns, false} : it->second;
    if (!a.firing && ts_ns - a.active_at_ns >= for_ns_) {
      a.firing = true;
      fired.push_back({name_, s.labels, s.value, a.active_at_ns, ts_ns});
    }
    next[k] = a;
  }
  active_ = std::move(next);
  return fired;
}

const std::vector<std::string>& InputMetrics() {
  static const std::vector<std::string> kNames = {
      "sentinel_rank_duration_p50_seconds",  "sentinel_rank_segment_p50_seconds",
      "sentinel_inflight_gpu_started",       "sentinel_inflight_oldest_age_seconds",
      "sentinel_inflight_connected",         "sentinel_rank_last_seq",
      "sentinel_inflight_waiting_elsewhere", "sentinel_inflight_paused_outside_nccl",
      "sentinel_inflight_stuck_ordinal",     "sentinel_inflight_stuck_signature",
      "sentinel_inflight_waiting_in"};
  return kNames;
}

JobwideRules::JobwideRules()
    : slow_node_("SentinelJobSlowNode", 0),
      straggler_("SentinelJobStraggler", 0),
      inflight_culprit_("SentinelJobInFlightHangCulprit", 0),
      inflight_gone_("SentinelJobInFlightHangGone", 0),
      mismatch_("SentinelJobCollectiveMismatch", 0),
      cycle_("SentinelJobDeadlockCycle", 0),
      hang_culprit_("SentinelJobHangCulprit", 120 * kSec) {}

std::vector<AlertEvent> JobwideRules::Evaluate(int64_t ts_ns, const Store& in) {
  Store rec;  // recording rules' results, visible to the later rules of the same evaluation
  std::vector<AlertEvent> fired;
  auto add = [&fired](std::vector<AlertEvent> f) { fired.insert(fired.end(), f.begin(), f.end()); };
  const Vector& duration_p50 = Get(in, "sentinel_rank_duration_p50_seconds");

  // ---- group sentinel-jobwide (interval: 15s) ----
  const Vector& segment_p50 = Get(in, "sentinel_rank_segment_p50_seconds");
  // record: sentinel:comm_node_ranks:count
  //   count by (job, comm, uid, instance) (sentinel_rank_duration_p50_seconds)
  rec["sentinel:comm_node_ranks:count"] = CountBy(duration_p50, kJobCommInstance);
  // record: sentinel:comm_nodes:count
  //   count by (job, comm, uid) (sentinel:comm_node_ranks:count)
  rec["sentinel:comm_nodes:count"] = CountBy(rec["sentinel:comm_node_ranks:count"], kJobComm);
  // record: sentinel:comm_duration_p50_seconds:max
  //   max by (job, comm, uid) (sentinel_rank_duration_p50_seconds)
  rec["sentinel:comm_duration_p50_seconds:max"] = MaxBy(duration_p50, kJobComm);
  // record: sentinel:comm_node_segment_p50_seconds:median
  //   quantile by (job, comm, uid, instance) (0.5, sentinel_rank_segment_p50_seconds)
  rec["sentinel:comm_node_segment_p50_seconds:median"] =
      QuantileBy(segment_p50, kJobCommInstance, 0.5);
  // record: sentinel:comm_segment_p50_seconds:fastest_node
  //   min by (job, comm, uid) (sentinel:comm_node_segment_p50_seconds:median)
  rec["sentinel:comm_segment_p50_seconds:fastest_node"] =
      MinBy(rec["sentinel:comm_node_segment_p50_seconds:median"], kJobComm);
  const Vector& fastest = rec["sentinel:comm_segment_p50_seconds:fastest_node"];
  // record: sentinel:comm_duration_p50_seconds:median
  //   quantile by (job, comm, uid) (0.5, sentinel_rank_duration_p50_seconds)
  rec["sentinel:comm_duration_p50_seconds:median"] = QuantileBy(duration_p50, kJobComm, 0.5);
  // record: sentinel:comm_duration_p50_seconds:iqr
  //   quantile by (job, comm, uid) (0.75, sentinel_rank_duration_p50_seconds)
  //     - quantile by (job, comm, uid) (0.25, sentinel_rank_duration_p50_seconds)
  rec["sentinel:comm_duration_p50_seconds:iqr"] =
      GroupArith(QuantileBy(duration_p50, kJobComm, 0.25), Arith::kSub,
                 QuantileBy(duration_p50, kJobComm, 0.75), kJobComm, false);
  // record: sentinel:comm_duration_p50_seconds:late_below
  //   min by (job, comm, uid) (
  //       sentinel:comm_duration_p50_seconds:max - 0.05 * fastest_node
  //     or label_replace((median - 5 * iqr) and on (job, comm, uid) comm_nodes:count > 4,
  //                      "bar", "spread", "", ""))
  //   and on (job, comm, uid) fastest_node > 0 and on (job, comm, uid) comm_nodes:count > 1
  {
    const Vector share_bar =
        GroupArith(Scale(JobwideRules::kShareBar, fastest), Arith::kSub,
                   rec["sentinel:comm_duration_p50_seconds:max"], kJobComm, false);
    Vector spread_bar = AndOn(
        GroupArith(Scale(JobwideRules::kSpreadBar, rec["sentinel:comm_duration_p50_seconds:iqr"]),
                   Arith::kSub, rec["sentinel:comm_duration_p50_seconds:median"], kJobComm, false),
        Filter(rec["sentinel:comm_nodes:count"], Cmp::kGt, 4), kJobComm);
    for (Sample& b : spread_bar) b.labels["bar"] = "spread";
    rec["sentinel:comm_duration_p50_seconds:late_below"] = AndOn(
        AndOn(MinBy(Or(share_bar, spread_bar), kJobComm), Filter(fastest, Cmp::kGt, 0), kJobComm),
        Filter(rec["sentinel:comm_nodes:count"], Cmp::kGt, 1), kJobComm);
  }
  // record: sentinel:rank_late
  //   (sentinel:comm_duration_p50_seconds:max - on (job, comm, uid) group_right ()
  //    (sentinel_rank_duration_p50_seconds < on (job, comm, uid) group_left ()
  //     sentinel:comm_duration_p50_seconds:late_below))
  //   / on (job, comm, uid) group_left () sentinel:comm_segment_p50_seconds:fastest_node
  //   and on (job, comm, uid, instance, rank)
  //   (sentinel_rank_segment_p50_seconds >= on (job, comm, uid) group_left ()
  //    1.05 * sentinel:comm_segment_p50_seconds:fastest_node)
  {
    const Vector below = CompareOn(duration_p50, Cmp::kLt,
                                   rec["sentinel:comm_duration_p50_seconds:late_below"], kJobComm);
    const Vector share = GroupArith(fastest, Arith::kDiv,
                                    GroupArith(rec["sentinel:comm_duration_p50_seconds:max"],
                                               Arith::kSub, below, kJobComm, true),
                                    kJobComm, false);
    const Vector grown =
        CompareOn(segment_p50, Cmp::kGe, Scale(1 + JobwideRules::kGrowthBar, fastest), kJobComm);
    rec["sentinel:rank_late"] = AndOn(share, grown, kJobCommInstanceRank);
  }
  // record: sentinel:rank_late:recent
  //   max_over_time(sentinel:rank_late[50s]) and count_over_time(sentinel:rank_late[50s]) >= 2
  rank_late_history_.Add(ts_ns, rec["sentinel:rank_late"]);
  rank_late_history_.Trim(ts_ns - JobwideRules::kRecentNs);
  const Vector late_counts = rank_late_history_.CountOverTime(ts_ns, JobwideRules::kRecentNs);
  rec["sentinel:rank_late:recent"] =
      And(rank_late_history_.MaxOverTime(ts_ns, JobwideRules::kRecentNs),
          Filter(late_counts, Cmp::kGe, JobwideRules::kRecentLate));
  // record: sentinel:node_ranks:count
  //   sum by (job, instance) (sentinel:comm_node_ranks:count and on (job, comm, uid)
  //   sentinel:comm_nodes:count > 1)
  rec["sentinel:node_ranks:count"] =
      SumBy(AndOn(rec["sentinel:comm_node_ranks:count"],
                  Filter(rec["sentinel:comm_nodes:count"], Cmp::kGt, 1), kJobComm),
            kJobInstance);
  // record: sentinel:node_late_ranks:count
  //   count by (job, instance) (sentinel:rank_late:recent)
  rec["sentinel:node_late_ranks:count"] = CountBy(rec["sentinel:rank_late:recent"], kJobInstance);
  // record: sentinel:node_lately_late_ranks:count
  //   count by (job, instance) (count_over_time(sentinel:rank_late[50s]))
  rec["sentinel:node_lately_late_ranks:count"] = CountBy(late_counts, kJobInstance);
  // record: sentinel:node_ranks:recent
  //   max_over_time(sentinel:node_ranks:count[50s])
  node_ranks_history_.Add(ts_ns, rec["sentinel:node_ranks:count"]);
  node_ranks_history_.Trim(ts_ns - JobwideRules::kRecentNs);
  rec["sentinel:node_ranks:recent"] =
      node_ranks_history_.MaxOverTime(ts_ns, JobwideRules::kRecentNs);
  Vector half_ranks = rec["sentinel:node_ranks:recent"];  // sentinel:node_ranks:recent / 2
  for (Sample& h : half_ranks) h.value /= 2;
  // alert: SentinelJobSlowNode (no for)
  //   sentinel:node_lately_late_ranks:count == on (job, instance) sentinel:node_ranks:recent
  //     and on (job, instance)
  //   sentinel:node_late_ranks:count > on (job, instance) sentinel:node_ranks:recent / 2
  add(slow_node_.Evaluate(
      ts_ns,
      AndOn(CompareOn(rec["sentinel:node_lately_late_ranks:count"], Cmp::kEq,
                      rec["sentinel:node_ranks:recent"], kJobInstance),
            CompareOn(rec["sentinel:node_late_ranks:count"], Cmp::kGt, half_ranks, kJobInstance),
            kJobInstance)));
  // alert: SentinelJobStraggler (no for)
  //   sentinel:rank_late:recent unless on (job, instance)
  //   (sentinel:node_lately_late_ranks:count > on (job, instance) sentinel:node_ranks:recent / 2)
  add(straggler_.Evaluate(ts_ns, UnlessOn(rec["sentinel:rank_late:recent"],
                                          CompareOn(rec["sentinel:node_lately_late_ranks:count"],
                                                    Cmp::kGt, half_ranks, kJobInstance),
                                          kJobInstance)));
  // record: sentinel:comm_inflight_gpu_started:max
  //   max by (job, comm, uid) (sentinel_inflight_gpu_started)
  const Vector& gpu_started = Get(in, "sentinel_inflight_gpu_started");
  rec["sentinel:comm_inflight_gpu_started:max"] = MaxBy(gpu_started, kJobComm);
  // record: sentinel:comm_inflight_oldest_age_seconds:max
  //   max by (job, comm, uid) (sentinel_inflight_oldest_age_seconds)
  rec["sentinel:comm_inflight_oldest_age_seconds:max"] =
      MaxBy(Get(in, "sentinel_inflight_oldest_age_seconds"), kJobComm);
  const Vector stuck_30s =
      Filter(rec["sentinel:comm_inflight_oldest_age_seconds:max"], Cmp::kGt, 30);
  // record: sentinel:rank_inflight_behind
  //   (sentinel:comm_inflight_gpu_started:max - on (job, comm, uid) group_right
  //    sentinel_inflight_gpu_started) > 0
  //   and on (job, comm, uid) sentinel:comm_inflight_oldest_age_seconds:max >= 5
  rec["sentinel:rank_inflight_behind"] =
      AndOn(Filter(GroupArith(rec["sentinel:comm_inflight_gpu_started:max"], Arith::kSub,
                              gpu_started, kJobComm, true),
                   Cmp::kGt, 0),
            Filter(rec["sentinel:comm_inflight_oldest_age_seconds:max"], Cmp::kGe, 5), kJobComm);
  const Vector& behind = rec["sentinel:rank_inflight_behind"];
  // alert: SentinelJobInFlightHangCulprit (no for)
  //   sentinel:rank_inflight_behind
  //   unless on (job, instance, comm, rank) sentinel_inflight_waiting_elsewhere == 1
  //   unless on (job, instance, comm, rank) (sentinel_inflight_paused_outside_nccl == 1
  //     and on (job, comm, uid) sentinel:comm_inflight_oldest_age_seconds:max < 300)
  //   and on (job, comm, uid) sentinel:comm_inflight_oldest_age_seconds:max > 30
  // (`unless` and `and` bind alike, left to right.)
  const Vector elsewhere = Filter(Get(in, "sentinel_inflight_waiting_elsewhere"), Cmp::kEq, 1);
  const Vector paused =
      AndOn(Filter(Get(in, "sentinel_inflight_paused_outside_nccl"), Cmp::kEq, 1),
            Filter(rec["sentinel:comm_inflight_oldest_age_seconds:max"], Cmp::kLt, 300), kJobComm);
  add(inflight_culprit_.Evaluate(
      ts_ns, AndOn(UnlessOn(UnlessOn(behind, elsewhere, kJobCommInstanceRank), paused,
                            kJobCommInstanceRank),
                   stuck_30s, kJobComm)));
  // alert: SentinelJobInFlightHangGone (no for)
  //   sentinel_inflight_connected == 0 and on (job, comm, uid)
  //   sentinel:comm_inflight_oldest_age_seconds:max > 30
  add(inflight_gone_.Evaluate(
      ts_ns,
      AndOn(Filter(Get(in, "sentinel_inflight_connected"), Cmp::kEq, 0), stuck_30s, kJobComm)));
  // record: sentinel:inflight_stuck_signature:first
  //   sentinel_inflight_stuck_signature and on (job, instance, comm, uid, rank)
  //   (sentinel_inflight_stuck_ordinal == on (job, comm, uid) group_left ()
  //    min by (job, comm, uid) (sentinel_inflight_stuck_ordinal))
  // (CompareOn keeps each lhs sample whose key the rhs has: many-to-one as group_left.)
  const Vector& stuck_ordinal = Get(in, "sentinel_inflight_stuck_ordinal");
  rec["sentinel:inflight_stuck_signature:first"] =
      AndOn(Get(in, "sentinel_inflight_stuck_signature"),
            CompareOn(stuck_ordinal, Cmp::kEq, MinBy(stuck_ordinal, kJobComm), kJobComm),
            kJobCommInstanceRank);
  const Vector& first_sig = rec["sentinel:inflight_stuck_signature:first"];
  // record: sentinel:comm_stuck_signature:median
  //   quantile by (job, comm, uid) (0.5, sentinel:inflight_stuck_signature:first)
  rec["sentinel:comm_stuck_signature:median"] = QuantileBy(first_sig, kJobComm, 0.5);
  // record: sentinel:inflight_stuck_agrees
  //   sentinel:inflight_stuck_signature:first == on (job, comm, uid) group_left ()
  //   sentinel:comm_stuck_signature:median
  rec["sentinel:inflight_stuck_agrees"] =
      CompareOn(first_sig, Cmp::kEq, rec["sentinel:comm_stuck_signature:median"], kJobComm);
  // alert: SentinelJobCollectiveMismatch (no for)
  //   (sentinel:inflight_stuck_signature:first != on (job, comm, uid) group_left ()
  //    sentinel:comm_stuck_signature:median)
  //   and on (job, comm, uid) (max by (job, comm, uid) (sentinel:inflight_stuck_signature:first)
  //     != on (job, comm, uid) min by (job, comm, uid) (sentinel:inflight_stuck_signature:first))
  //   and on (job, comm, uid) sentinel:comm_inflight_oldest_age_seconds:max > 30
  add(mismatch_.Evaluate(
      ts_ns, AndOn(AndOn(CompareOn(first_sig, Cmp::kNe, rec["sentinel:comm_stuck_signature:median"],
                                   kJobComm),
                         CompareOn(MaxBy(first_sig, kJobComm), Cmp::kNe, MinBy(first_sig, kJobComm),
                                   kJobComm),
                         kJobComm),
                   stuck_30s, kJobComm)));
  // record: sentinel:rank_waiting_in
  //   sentinel_inflight_waiting_in and on (job, instance, comm, uid, rank)
  //   sentinel:rank_inflight_behind
  rec["sentinel:rank_waiting_in"] =
      AndOn(Get(in, "sentinel_inflight_waiting_in"), behind, kJobCommInstanceRank);
  // alert: SentinelJobDeadlockCycle (no for)
  //   sentinel:rank_waiting_in and on (job, uid, comm, in_comm)
  //   (sentinel:rank_waiting_in with its comm and in_comm labels swapped, by label_replace)
  //   and on (job, comm, uid) sentinel:comm_inflight_oldest_age_seconds:max > 30
  {
    Vector swapped = rec["sentinel:rank_waiting_in"];
    for (Sample& w : swapped) std::swap(w.labels["comm"], w.labels["in_comm"]);
    add(cycle_.Evaluate(ts_ns, AndOn(AndOn(rec["sentinel:rank_waiting_in"], swapped,
                                           {"job", "uid", "comm", "in_comm"}),
                                     stuck_30s, kJobComm)));
  }

  // ---- group sentinel-recording (the global evaluation interval, taken as 15 s) ----
  const Vector& last_seq = Get(in, "sentinel_rank_last_seq");
  last_seq_history_.Add(ts_ns, last_seq);
  last_seq_history_.Trim(ts_ns - 5 * 60 * kSec);
  // record: sentinel:comm_last_seq:max
  //   max by (job, comm, uid) (sentinel_rank_last_seq)
  rec["sentinel:comm_last_seq:max"] = MaxBy(last_seq, kJobComm);
  // record: sentinel:rank_seq_behind
  //   sentinel:comm_last_seq:max - on (job, comm, uid) group_right sentinel_rank_last_seq
  rec["sentinel:rank_seq_behind"] =
      GroupArith(rec["sentinel:comm_last_seq:max"], Arith::kSub, last_seq, kJobComm, true);

  // ---- group sentinel-alerts (the global evaluation interval, taken as 15 s) ----
  // alert: SentinelJobHangCulprit (for: 2m)
  //   sentinel:rank_seq_behind > 0 unless on (job, comm, uid)
  //   (max by (job, comm, uid) (changes(sentinel_rank_last_seq[2m])) > 0)
  //   unless on (job, instance, comm, rank) (the paused ranks, as above)
  // The history holds the scrapes as seen at each evaluation (one sample per evaluation); at a
  // 15 s scrape and a 15 s evaluation that is the same sample set.
  add(hang_culprit_.Evaluate(
      ts_ns, UnlessOn(UnlessOn(Filter(rec["sentinel:rank_seq_behind"], Cmp::kGt, 0),
                               Filter(MaxBy(last_seq_history_.Changes(ts_ns, 120 * kSec), kJobComm),
                                      Cmp::kGt, 0),
                               kJobComm),
                      paused, kJobCommInstanceRank)));
  recorded_ = std::move(rec);
  return fired;
}

}  // namespace sentinel::collector::eval::prom
