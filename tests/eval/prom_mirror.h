// A mirror, in C++, of the job-wide Prometheus rules shipped in
// examples/prometheus/sentinel_rules.yml, for the cluster-scale detection evaluation
// (cluster_eval.cc). It evaluates the same expressions over the per-rank series the virtual nodes'
// sentineld export (their real /metrics text, parsed back), at the same evaluation interval, with
// the same `for:` handling, so the evaluation measures what a real Prometheus with those rules
// would alert on.
//
// The PromQL building blocks (instant vectors, `by`/`on` matching, group_left/group_right, filters,
// `and`/`unless`, `changes` over a range) are generic; each recording rule and alert is one
// function or one block in prom_mirror.cc that names the rule it mirrors and quotes its expression.
// When the rules change, edit those blocks to match (the building blocks stay).
//
// What is not mirrored: Prometheus' 5-minute lookback for series that merely stop being scraped
// (sentineld drops a series and Prometheus writes a staleness marker, so the latest scrape is the
// instant vector here), groups running concurrently at independent offsets (here every group is
// evaluated at the same instants, in file order), and annotations (only labels and values).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sentinel::collector::eval::prom {

using Labels = std::map<std::string, std::string>;  // without __name__

struct Sample {
  Labels labels;
  double value = 0;
};
using Vector = std::vector<Sample>;

// The series of one metric name across all targets, as of one instant.
using Store = std::map<std::string, Vector>;

// --- PromQL building blocks --------------------------------------------------------------------

// The labels of `l` named in `on`, as a matching key.
std::string Key(const Labels& l, const std::vector<std::string>& on);

// `max by (on) (v)`, `min by (on) (v)`, `count by (on) (v)`, `quantile by (on) (q, v)` (linear
// interpolation, as Prometheus' quantile aggregation).
Vector MaxBy(const Vector& v, const std::vector<std::string>& by);
Vector MinBy(const Vector& v, const std::vector<std::string>& by);
Vector CountBy(const Vector& v, const std::vector<std::string>& by);
Vector SumBy(const Vector& v, const std::vector<std::string>& by);
Vector QuantileBy(const Vector& v, const std::vector<std::string>& by, double q);

enum class Cmp { kGt, kGe, kEq, kLt, kLe, kNe };
bool Compare(double a, Cmp op, double b);

// `v <op> scalar` as a filter (keeps the sample and its value when true).
Vector Filter(const Vector& v, Cmp op, double scalar);

// `k * v`: every sample's value times the scalar (labels kept: the mirror keeps no metric name).
Vector Scale(double k, const Vector& v);

// `one <op> on (on) group_right many` and `many <op> on (on) group_left () one`: arithmetic with
// many-to-one matching; the result has the many side's labels. `many_is_right` selects the operand
// order of the arithmetic (one - many for group_right). With one sample per key on both sides it is
// also one-to-one matching on `on`.
enum class Arith { kSub, kDiv, kMul };
Vector GroupArith(const Vector& one, Arith op, const Vector& many,
                  const std::vector<std::string>& on, bool many_is_right);

// `lhs <op> on (on) rhs` as a one-to-one comparison filter (keeps the lhs sample).
Vector CompareOn(const Vector& lhs, Cmp op, const Vector& rhs, const std::vector<std::string>& on);

// `lhs and on (on) rhs`, `lhs unless on (on) rhs`.
Vector AndOn(const Vector& lhs, const Vector& rhs, const std::vector<std::string>& on);
Vector UnlessOn(const Vector& lhs, const Vector& rhs, const std::vector<std::string>& on);

// `lhs and rhs`, `lhs or rhs`: matching on the full label sets (`or` keeps every lhs sample and the
// rhs samples whose label set is not on the lhs).
Vector And(const Vector& lhs, const Vector& rhs);
Vector Or(const Vector& lhs, const Vector& rhs);

// Sample history of the metrics read with a range (`changes(m[2m])`, `count_over_time(m[50s])`),
// per series. A series absent at an evaluation (a recorded one that returned nothing: Prometheus
// writes a staleness marker, which range functions skip) adds no sample.
class History {
 public:
  void Add(int64_t ts_ns, const Vector& v);
  void Trim(int64_t before_ns);
  // `changes(m[range])` at `ts_ns`: per series, the number of value changes among its samples in
  // (ts - range, ts].
  Vector Changes(int64_t ts_ns, int64_t range_ns) const;
  // `count_over_time(m[range])` at `ts_ns`: per series, its samples in (ts - range, ts].
  Vector CountOverTime(int64_t ts_ns, int64_t range_ns) const;
  // `max_over_time(m[range])` at `ts_ns`: per series, the largest of its samples in (ts - range,
  // ts].
  Vector MaxOverTime(int64_t ts_ns, int64_t range_ns) const;

 private:
  std::map<std::string, std::pair<Labels, std::vector<std::pair<int64_t, double>>>> series_;
};

// --- Alert state (`for:`) ----------------------------------------------------------------------

struct AlertEvent {
  std::string alert;  // the rule's name
  Labels labels;      // the result series' labels
  double value = 0;
  int64_t active_at_ns = 0;  // first evaluation that returned it (pending)
  int64_t fired_at_ns = 0;   // the evaluation at which it went firing
};

// One alerting rule's state across evaluations, as Prometheus keeps it: a series returned by the
// expression is pending from the first evaluation that returns it, firing once it has been
// returned at every evaluation for `for`, and forgotten (resolved) at the first evaluation that
// does not return it.
class AlertRule {
 public:
  AlertRule(std::string name, int64_t for_ns) : name_(std::move(name)), for_ns_(for_ns) {}
  // Returns the alerts that went firing at this evaluation.
  std::vector<AlertEvent> Evaluate(int64_t ts_ns, const Vector& result);
  const std::string& name() const { return name_; }

 private:
  struct Active {
    int64_t active_at_ns = 0;
    bool firing = false;
  };
  std::string name_;
  int64_t for_ns_;
  std::map<std::string, Active> active_;  // by the full label set
};

// --- The shipped rules ---------------------------------------------------------------------------

// The metric names the rules read (the scrape parser keeps only these).
const std::vector<std::string>& InputMetrics();

// The rule groups of sentinel_rules.yml that judge stragglers, slow nodes and hangs, with their
// alert state. Evaluate() runs them at one evaluation instant over the latest scrape of every
// target (`scraped`: metric name -> samples, with `job` and `instance` labels added as a scrape
// would), and returns the alerts that went firing.
class JobwideRules {
 public:
  JobwideRules();
  std::vector<AlertEvent> Evaluate(int64_t ts_ns, const Store& scraped);
  // The recording rules' results of the last evaluation, by record name.
  const Store& recorded() const { return recorded_; }
  // sentinel:rank_late's bars: the lateness as a share of the compute segment, and how far below
  // the communicator's median p50 the rank's own is, in interquartile ranges of the communicator's
  // p50s (in communicators spanning more than 4 nodes).
  static constexpr double kShareBar = 0.05;
  static constexpr double kSpreadBar = 5;
  // ... and how much longer than the communicator's fastest node the rank computes between
  // collectives (its own compute: the segment leaves out its time in other communicators'
  // collectives).
  static constexpr double kGrowthBar = 0.05;
  // sentinel:rank_late:recent: late at this many of the evaluations in the last kRecentNs.
  static constexpr int kRecentLate = 2;
  static constexpr int64_t kRecentNs = 50LL * 1000000000;
  // The group interval (every group here: 15 s).
  static constexpr int64_t kIntervalNs = 15LL * 1000000000;

 private:
  Store recorded_;
  History last_seq_history_;
  History rank_late_history_;
  History node_ranks_history_;
  AlertRule slow_node_;
  AlertRule straggler_;
  AlertRule inflight_culprit_;
  AlertRule inflight_gone_;
  AlertRule mismatch_;
  AlertRule cycle_;
  AlertRule hang_culprit_;
};

}  // namespace sentinel::collector::eval::prom
