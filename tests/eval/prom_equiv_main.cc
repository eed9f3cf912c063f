// prom_equiv: the job-wide rules on a real Prometheus, fed the cluster evaluation's exposition.
//
// Equivalence (the default): one scenario of the cluster model (cluster_dump.h) at --nodes N x 8
// ranks: a slow node, a slow rank on another node, noise on every rank (jitter, heavy-tailed
// segments, 20-100 ms hiccups) and later a hang whose culprit is on a third node. Every node's
// /metrics text at each of its scrapes is served by our exporter (prom_feed.h) as its own target,
// with the scrape's time as an explicit timestamp, to the Debian Prometheus running the shipped
// rules (examples/prometheus/sentinel_rules.yml) in a clock running --speed times faster (every
// duration of the rules divided by it: the 15 s interval is 1 s at 15), its evaluations aligned
// on the mirror's (prom_mirror.h). Compared at every evaluation: the alerts that went firing
// (SentinelJobHangCulprit, in a group Prometheus evaluates at another offset, within one
// evaluation), and every recording rule of the sentinel-jobwide group that the mirror computes
// (series and values). Exit 1 on any difference, and with --check also when the scenario's
// culprits are not all named (the comparison is never over an empty set); a run in which a text
// reached Prometheus after an evaluation that should have read it is invalid and run again
// (--tries).
//   prom_equiv --nodes 8 --check                 (the ctest: eval_prom_equiv_test)
//   prom_equiv --nodes 128 --speed 5 --check     (scripts/prom_scale.sh)
//
// Scale (--scale): the model at N x 8 with a slow node and noise, its last --seconds of scrapes
// served live in real time (no timestamps: Prometheus's own) to Prometheus running the shipped
// rules unchanged at a 15 s scrape and evaluation; prints the series count, each rule group's
// evaluation time (largest and mean over the run), Prometheus's memory and CPU, scrape durations
// and the time of the Grafana dashboard's queries.
//   prom_equiv --scale --nodes 1024 --seconds 90  (scripts/prom_scale.sh)
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

#include "tests/eval/cluster_dump.h"
#include "tests/eval/prom_feed.h"
#include "tests/eval/scrape_file.h"

namespace sentinel::collector::eval {
namespace {

using promfeed::PromProcess;
using promfeed::RecordedExporter;
using promfeed::Text;
using promfeed::WallMs;

constexpr int64_t kMs = 1000000;
constexpr int64_t kSec = 1000000000;
constexpr int64_t kIntervalNs = prom::JobwideRules::kIntervalNs;
constexpr int kSkipped = 77;  // ctest's SKIP_RETURN_CODE
constexpr int kInvalid = 3;

struct Options {
  int nodes = 8;
  uint64_t seed = 1;
  double speed = 15;
  bool scale = false;
  double seconds = 240;
  bool check = false;
  bool inputs_only_too = true;  // --scale: again with only the rules' inputs kept
  bool all_series_too = true;   // --scale: first with every series kept
  int tries = 2;
  bool model_only = false;  // the mirror's alerts only, no Prometheus
  std::string scrapes;      // --scale: the model's texts saved here / read from here
  // Once the model has run (pure arithmetic, fine at idle priority), serve and run Prometheus at
  // normal priority: a starved exporter or Prometheus misses the evaluations it is judged at.
  bool serve_at_normal_priority = false;
  std::string rules = SENTINEL_RULES_PATH;
  std::string dashboard = SENTINEL_DASHBOARD_PATH;
};

// This thread (and the threads and processes it starts from now on) at normal priority.
void ServeAtNormalPriority(const Options& o) {
  if (!o.serve_at_normal_priority) return;
  const sched_param param{};
  if (sched_setscheduler(0, SCHED_OTHER, &param) != 0 || setpriority(PRIO_PROCESS, 0, 0) != 0) {
    std::fprintf(stderr, "prom_equiv: could not return to normal priority\n");
  }
}

void Sleep(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

double LoadAverage() {
  double l = -1;
  std::ifstream("/proc/loadavg") >> l;
  return l;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The scenario: a slow node from 30 s, a slow rank on another node from 45 s (each 20 % slower),
// noise on every rank, and, with `hang`, the first cross-node collective of a rank on a third
// node never launched from 150 s.
ClusterDumpSpec Scenario(const Options& o, bool hang) {
  ClusterDumpSpec s;
  s.nodes = o.nodes;
  s.seed = o.seed;
  const int per = ClusterLayout::kPerNode;
  s.faults.jitter = 0.03;
  s.faults.heavy_tail = 0.002;
  // 20-100 ms hiccups, 0.1 per rank per second in 8 nodes: as many per second in the whole job
  // at any size (at 0.1 per rank, 1,024 ranks keep some rank of every communicator in one).
  s.faults.hiccup_per_rank_s = 0.1 * 8 / o.nodes;
  s.faults.slow_pct = 0.2;
  s.faults.from_ns = 30 * kSec;
  s.faults.slow_node = o.nodes / 2 + 1;
  s.faults.slow_rank = (o.nodes / 4) * per + 3;
  s.run_ns = 240 * kSec;
  if (hang) {
    s.faults.hang_rank = (o.nodes - 1) * per + 5;
    s.faults.hang_ns = 150 * kSec;
    s.hang = HangKind::kNeverLaunched;
    s.run_ns = 400 * kSec;
  }
  return s;
}

// Equal, within 1e-9 relative (the same arithmetic, perhaps in another order); NaN (0/0, e.g. a
// lateness of 0 over a spread of 0) equals NaN whatever its sign.
bool SameValue(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b || std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b));
}

std::string LabelKey(const prom::Labels& l) {
  std::string k;
  for (const auto& [name, value] : l) {
    if (name == "__name__" || name == "alertstate" || name == "severity") continue;
    k += name + "=\"" + value + "\",";
  }
  return k;
}

prom::Labels JsonLabels(const nlohmann::json& metric) {
  prom::Labels l;
  for (const auto& [k, v] : metric.items()) l[k] = v.get<std::string>();
  return l;
}

int64_t JsonMs(const nlohmann::json& pair) { return std::llround(pair[0].get<double>() * 1000.0); }

// The scraped metrics a rules file reads (every sentinel_* name in it), as one regex.
std::string RuleInputsRegex(const std::string& rules_path) {
  const std::string text = ReadFile(rules_path);
  static const std::regex kName(R"(\bsentinel_[a-z0-9_]+)");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kName);
       it != std::sregex_iterator(); ++it) {
    names.insert(it->str());
  }
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : "|") + n;
  return out;
}

// The scrape config's targets: node i at the exporter's /node/<i>/metrics, its `instance` label
// the mirror's name for it.
std::string StaticTargets(int port, const std::vector<std::string>& instances) {
  std::string out;
  for (size_t n = 0; n < instances.size(); ++n) {
    out += absl::StrFormat(
        "      - targets: ['127.0.0.1:%d']\n        labels: {__metrics_path__: '/node/%d/metrics', "
        "instance: '%s'}\n",
        port, n, instances[n]);
  }
  return out;
}

// The names of group `group`'s rules of one kind (`kind`: "- record: " or "- alert: ").
std::vector<std::string> GroupRules(const std::string& rules, const std::string& group,
                                    const std::string& kind) {
  std::vector<std::string> out;
  std::istringstream in(rules);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    const size_t name = line.find("- name: ");
    if (name != std::string::npos) inside = line.substr(name + 8) == group;
    const size_t rec = line.find(kind);
    if (inside && rec != std::string::npos) {
      const std::string r = line.substr(rec + kind.size());
      if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
    }
  }
  return out;
}

// ---- Equivalence --------------------------------------------------------------------------------

// A went-firing event: the alert, its labels (without alertname/alertstate/severity) and the
// evaluation index.
using Event = std::tuple<std::string, std::string, int>;

// Serves the dump's texts to a real Prometheus and compares: 0 identical, 1 different (or an
// error), kInvalid when Prometheus did not see every text before the evaluations that read it.
int ServeAndCompare(const Options& o, const ClusterDumpSpec& spec, const ClusterDump& dump) {
  const double load_before = LoadAverage();
  // Virtual time -> wall ms: the mirror's evaluation k at wall0 + k * period_ms (Prometheus's
  // evaluations of the group, once aligned), a scrape between two evaluations strictly between
  // their wall times, one at an evaluation's instant at it (Prometheus reads a sample stamped at
  // the evaluation's time in it, as the mirror does).
  const int64_t period_ms = std::llround(15000.0 / o.speed);
  if (period_ms < 200 || std::fabs(static_cast<double>(period_ms) * o.speed - 15000.0) > 1e-6) {
    std::fprintf(stderr, "prom_equiv: --speed must divide 15 s into whole ms of 200 or more\n");
    return 2;
  }
  const int64_t v0 = dump.evals.front().t_ns;
  auto to_wall = [&](int64_t wall0, int64_t t_ns) {
    const int64_t rel = t_ns - v0;
    int64_t k = rel / kIntervalNs;
    int64_t within = rel % kIntervalNs;
    if (within < 0) {
      within += kIntervalNs;
      --k;
    }
    int64_t ms = 0;
    if (within > 0) {
      ms = std::clamp<int64_t>(
          std::llround(static_cast<double>(within) / static_cast<double>(kIntervalNs) *
                       static_cast<double>(period_ms)),
          1, period_ms - 1);
    }
    return wall0 + k * period_ms + ms;
  };

  RecordedExporter exporter;
  if (!exporter.Start(o.nodes)) {
    std::fprintf(stderr, "prom_equiv: the exporter did not start\n");
    return 1;
  }
  // Scrapes 8 times per recorded period, each text served 3/4 of a period before its time: every
  // text is fetched (and stored) well before an evaluation that must see it, and each is served
  // for a whole period.
  const int64_t scrape_ms = period_ms / 8;
  const int64_t lead_ms = period_ms * 3 / 4;
  std::string cfg = absl::StrFormat(
      "global:\n  scrape_interval: %dms\n  scrape_timeout: %dms\n  evaluation_interval: %dms\n"
      "rule_files:\n  - RULES_FILE\n"
      "scrape_configs:\n  - job_name: eval\n    honor_timestamps: true\n    static_configs:\n",
      scrape_ms, scrape_ms, period_ms);
  cfg += StaticTargets(exporter.port(), dump.instances);
  // The latest scrape of every target is the instant vector, as in the mirror: a series a node
  // stopped exporting is gone at the next scrape (explicit timestamps get no staleness markers).
  PromProcess prom;
  const std::string rules = promfeed::ScaleRuleDurations(ReadFile(o.rules), o.speed);
  if (!prom.Start(cfg, rules, {absl::StrFormat("--query.lookback-delta=%dms", period_ms - 1)})) {
    std::fprintf(stderr, "prom_equiv: prometheus did not start (%s)\n", prom.dir().c_str());
    return 1;
  }
  // Every target scraped once (Prometheus starts its scrape loops a few seconds after it starts).
  for (int i = 0; i < 600 && exporter.NodesRequested() < o.nodes; ++i) Sleep(50);
  if (exporter.NodesRequested() < o.nodes) {
    std::fprintf(stderr, "prom_equiv: prometheus scraped %d of the %d targets in 30 s\n",
                 exporter.NodesRequested(), o.nodes);
    return 1;
  }
  // The group's evaluation instants (Prometheus's own offset, from the group's name and file): a
  // probe series served without a timestamp until a recording rule of the group has recorded it,
  // at the instants' phase. It is gone (a staleness marker at the next scrape) long before the
  // scenario's first evaluation.
  {
    std::vector<std::vector<Text>> probe(static_cast<size_t>(o.nodes));
    for (auto& p : probe) {
      p.push_back(
          {0, "sentinel_rank_duration_p50_seconds{comm=\"probe\",uid=\"0\",rank=\"0\"} 1\n"});
    }
    exporter.SetTexts(std::move(probe), 0);
  }
  int64_t phase_ms = -1;
  for (int i = 0; i < 600 && phase_ms < 0; ++i) {
    const nlohmann::json d =
        prom.Query(absl::StrFormat("sentinel:comm_duration_p50_seconds:max{comm=\"probe\"}[%dms]",
                                   4 * period_ms),
                   WallMs());
    if (!d.is_null() && !d["result"].empty() && !d["result"][0]["values"].empty()) {
      phase_ms = JsonMs(d["result"][0]["values"][0]) % period_ms;
    } else {
      Sleep(50);
    }
  }
  if (phase_ms < 0) {
    std::fprintf(stderr, "prom_equiv: the sentinel-jobwide group recorded nothing in 30 s\n");
    return 1;
  }
  // The first evaluation at least 3 periods from now (the earliest scrapes precede it by up to
  // one period, and are served half a period early).
  int64_t wall0 = WallMs() + 3 * period_ms;
  wall0 += ((phase_ms - wall0 % period_ms) % period_ms + period_ms) % period_ms;
  std::vector<std::vector<Text>> texts(static_cast<size_t>(o.nodes));
  std::vector<std::vector<int64_t>> due(static_cast<size_t>(o.nodes));
  for (const ClusterDump::Scrape& s : dump.scrapes) {
    const int64_t ts = std::max(to_wall(wall0, s.t_ns), wall0 - period_ms + 1);
    texts[static_cast<size_t>(s.node)].push_back({ts, promfeed::WithTimestamps(s.text, ts)});
    due[static_cast<size_t>(s.node)].push_back(ts);
  }
  exporter.SetTexts(std::move(texts), lead_ms);
  const int evals = static_cast<int>(dump.evals.size());
  const int64_t wall_end = wall0 + static_cast<int64_t>(evals - 1) * period_ms;
  std::printf(
      "prom_equiv: %d nodes x %d ranks, %d scrapes, %d evaluations (%.0f s simulated) at %gx: "
      "%.0f s of wall time\n",
      o.nodes, ClusterLayout::kPerNode, static_cast<int>(dump.scrapes.size()), evals,
      static_cast<double>(dump.end_ns - dump.start_ns) / kSec, o.speed,
      static_cast<double>(wall_end + period_ms - WallMs()) / 1000.0);
  std::fflush(stdout);
  while (WallMs() < wall_end + 2 * period_ms) Sleep(100);

  // Every text fetched before its time: otherwise an evaluation may have run without it, and
  // the run says nothing about the rules.
  int late = 0;
  const auto fetched = exporter.FirstFetches();
  for (size_t n = 0; n < fetched.size(); ++n) {
    for (size_t k = 0; k < fetched[n].size(); ++k) {
      if (fetched[n][k] < 0 || fetched[n][k] > due[n][k]) {
        if (late++ < 5) {
          std::fprintf(
              stderr, "prom_equiv: node %zu's scrape %zu (due %" PRId64 ") fetched %s\n", n, k,
              due[n][k],
              fetched[n][k] < 0
                  ? "never"
                  : absl::StrFormat("%" PRId64 " ms late", fetched[n][k] - due[n][k]).c_str());
        }
      }
    }
  }
  const auto missed = prom.SelfMetric("prometheus_rule_group_iterations_missed_total");
  double missed_total = 0;
  for (const auto& [l, v] : missed) missed_total += v;

  // Prometheus's verdicts: every ALERTS sample and sentinel:rank_late sample of the run.
  const std::string range = absl::StrFormat("[%dms]", (evals + 4) * period_ms);
  const nlohmann::json alerts = prom.Query("ALERTS{alertstate=\"firing\"}" + range, wall_end);
  if (alerts.is_null()) {
    std::fprintf(stderr, "prom_equiv: prometheus did not answer the queries\n");
    return 1;
  }
  auto eval_index = [&](int64_t ms, bool* on_grid) {
    const int64_t rel = ms - wall0;
    *on_grid = rel % period_ms == 0;
    return static_cast<int>(std::floor(static_cast<double>(rel) / static_cast<double>(period_ms)));
  };
  // Every alert of the sentinel-jobwide group (an alert the mirror leaves out shows as a
  // difference).
  std::set<std::string> mirrored;
  for (const std::string& a : GroupRules(rules, "sentinel-jobwide", "- alert: "))
    mirrored.insert(a);
  // SentinelJobHangCulprit is in another group (sentinel-alerts), which Prometheus evaluates at
  // its own offset: compared within one evaluation (prom_mirror.h: not mirrored).
  const std::string other_group = "SentinelJobHangCulprit";
  std::set<Event> prom_events;
  std::set<std::pair<std::string, std::string>> prom_other;  // (labels, first index)
  std::map<std::string, int> prom_other_at;
  int off_grid = 0;
  for (const auto& series : alerts["result"]) {
    const prom::Labels l = JsonLabels(series["metric"]);
    const std::string name = l.at("alertname");
    prom::Labels rest = l;
    rest.erase("alertname");
    const std::string key = LabelKey(rest);
    int prev = -10;
    for (const auto& pair : series["values"]) {
      bool grid = false;
      const int k = eval_index(JsonMs(pair), &grid);
      if (k < 0 || k >= evals) continue;
      if (mirrored.count(name) != 0) {
        if (!grid) ++off_grid;
        if (k != prev + 1) prom_events.insert({name, key, k});
      } else if (name == other_group && prom_other_at.count(key) == 0) {
        prom_other_at[key] = k;
      }
      prev = k;
    }
  }
  std::set<Event> mirror_events;
  std::map<std::string, int> mirror_other_at;
  std::map<int64_t, int> index_of;
  for (int k = 0; k < evals; ++k) index_of[dump.evals[static_cast<size_t>(k)].t_ns] = k;
  for (int k = 0; k < evals; ++k) {
    for (const prom::AlertEvent& e : dump.evals[static_cast<size_t>(k)].fired) {
      prom::Labels l = e.labels;
      const std::string key = LabelKey(l);
      const int at = index_of.count(e.fired_at_ns) ? index_of[e.fired_at_ns] : k;
      if (e.alert == other_group) {
        if (mirror_other_at.count(key) == 0) mirror_other_at[key] = at;
      } else {
        mirror_events.insert({e.alert, key, at});
      }
    }
  }
  // Every recording rule of the group at every evaluation: the same series, the same values
  // (to 1e-9 relative: the arithmetic is the same, its order may not be).
  int rec_diff = 0;
  int64_t rec_samples = 0;
  // (Those the mirror computes: it leaves out what only the alerts' texts read.)
  std::vector<std::string> records;
  std::vector<std::string> unmirrored;
  for (const std::string& name : GroupRules(rules, "sentinel-jobwide", "- record: ")) {
    (dump.evals.back().recorded.count(name) != 0 ? records : unmirrored).push_back(name);
  }
  for (const std::string& name : records) {
    const nlohmann::json q = prom.Query(name + range, wall_end);
    if (q.is_null()) {
      std::fprintf(stderr, "prom_equiv: prometheus did not answer for %s\n", name.c_str());
      return 1;
    }
    std::vector<std::map<std::string, double>> theirs(static_cast<size_t>(evals));
    for (const auto& series : q["result"]) {
      const std::string key = LabelKey(JsonLabels(series["metric"]));
      for (const auto& pair : series["values"]) {
        bool grid = false;
        const int k = eval_index(JsonMs(pair), &grid);
        if (k < 0 || k >= evals) continue;
        if (!grid) ++off_grid;
        theirs[static_cast<size_t>(k)][key] =
            std::strtod(pair[1].get<std::string>().c_str(), nullptr);
      }
    }
    for (int k = 0; k < evals; ++k) {
      std::map<std::string, double> mine;
      const prom::Store& rec = dump.evals[static_cast<size_t>(k)].recorded;
      if (const auto it = rec.find(name); it != rec.end()) {
        for (const prom::Sample& smp : it->second) mine[LabelKey(smp.labels)] = smp.value;
      }
      rec_samples += static_cast<int64_t>(mine.size());
      const auto& t = theirs[static_cast<size_t>(k)];
      bool same = mine.size() == t.size();
      std::string first_diff;
      for (const auto& [key, v] : mine) {
        const auto it = t.find(key);
        const bool ok = it != t.end() && SameValue(it->second, v);
        if (!ok && first_diff.empty()) {
          first_diff =
              absl::StrFormat("%s mirror %.17g prometheus %s", key, v,
                              it == t.end() ? "absent" : absl::StrFormat("%.17g", it->second));
        }
        same = same && ok;
      }
      if (!same && rec_diff++ < 10) {
        std::fprintf(stderr,
                     "prom_equiv: %s differs at evaluation %d: mirror %zu series, "
                     "prometheus %zu; %s\n",
                     name.c_str(), k, mine.size(), t.size(), first_diff.c_str());
      }
    }
  }

  // The table: every went-firing event, by evaluation.
  std::set<Event> all = mirror_events;
  all.insert(prom_events.begin(), prom_events.end());
  std::vector<Event> sorted(all.begin(), all.end());
  std::sort(sorted.begin(), sorted.end(), [](const Event& a, const Event& b) {
    return std::tie(std::get<2>(a), std::get<0>(a), std::get<1>(a)) <
           std::tie(std::get<2>(b), std::get<0>(b), std::get<1>(b));
  });
  std::printf("%5s %8s  %-31s %-6s %-6s %s\n", "eval", "t_s", "alert", "mirror", "prom", "labels");
  int diff = 0;
  for (const Event& e : sorted) {
    const bool m = mirror_events.count(e) != 0;
    const bool p = prom_events.count(e) != 0;
    diff += m != p ? 1 : 0;
    const int k = std::get<2>(e);
    std::printf("%5d %8.1f  %-31s %-6s %-6s %s%s\n", k,
                static_cast<double>(dump.evals[static_cast<size_t>(k)].t_ns - dump.start_ns) / kSec,
                std::get<0>(e).c_str(), m ? "yes" : "-", p ? "yes" : "-", std::get<1>(e).c_str(),
                m != p ? "   <-- DIFFERS" : "");
  }
  int other_diff = 0;
  std::set<std::string> other_keys;
  for (const auto& [k, v] : prom_other_at) other_keys.insert(k);
  for (const auto& [k, v] : mirror_other_at) other_keys.insert(k);
  for (const std::string& key : other_keys) {
    const int m = mirror_other_at.count(key) ? mirror_other_at[key] : -1;
    const int p = prom_other_at.count(key) ? prom_other_at[key] : -1;
    const bool same = m >= 0 && p >= 0 && std::abs(m - p) <= 1;
    other_diff += same ? 0 : 1;
    std::printf("%5d %8s  %-31s %-6s %-6s %s (prometheus: evaluation %d)%s\n", m, "-",
                other_group.c_str(), m >= 0 ? "yes" : "-", p >= 0 ? "yes" : "-", key.c_str(), p,
                same ? "" : "   <-- DIFFERS");
  }

  // What the scenario should have named, so that an empty comparison cannot pass.
  const ClusterFaults& f = spec.faults;
  auto comm_rank = [&](int job_rank, const prom::Labels& l) {
    const auto c = l.find("comm");
    const auto r = l.find("rank");
    if (c == l.end() || r == l.end()) return false;
    for (size_t i = 0; i < dump.comm_labels.size(); ++i) {
      if (dump.comm_labels[i] != c->second) continue;
      const int m = std::atoi(r->second.c_str());
      return m >= 0 && static_cast<size_t>(m) < dump.comm_ranks[i].size() &&
             dump.comm_ranks[i][static_cast<size_t>(m)] == job_rank;
    }
    return false;
  };
  bool node_named = false;
  bool rank_named = false;
  bool hang_named = false;
  for (const ClusterDump::Eval& ev : dump.evals) {
    for (const prom::AlertEvent& e : ev.fired) {
      if (e.alert == "SentinelJobSlowNode" && e.labels.count("instance") != 0 &&
          e.labels.at("instance") == dump.instances[static_cast<size_t>(f.slow_node)]) {
        node_named = true;
      }
      if (e.alert == "SentinelJobStraggler" && comm_rank(f.slow_rank, e.labels)) rank_named = true;
      if (e.alert == "SentinelJobInFlightHangCulprit" && comm_rank(f.hang_rank, e.labels)) {
        hang_named = true;
      }
    }
  }
  const double load_after = LoadAverage();
  std::printf(
      "prom_equiv: %zu alert events (mirror %zu, prometheus %zu), %d differ; %s %d differ; "
      "%zu recording rules at %d evaluations (%" PRId64
      " samples), %d differ; samples off the evaluation "
      "grid %d; texts fetched late %d; missed rule-group iterations %.0f; the mirror named the "
      "slow node %s, the slow rank %s, the hang culprit %s; load %.2f -> %.2f\n",
      all.size(), mirror_events.size(), prom_events.size(), diff, other_group.c_str(), other_diff,
      records.size(), evals, rec_samples, rec_diff, off_grid, late, missed_total,
      node_named ? "yes" : "NO", rank_named ? "yes" : "NO", hang_named ? "yes" : "NO", load_before,
      load_after);
  for (const std::string& name : unmirrored) {
    std::printf("prom_equiv: not compared (the mirror does not compute it): %s\n", name.c_str());
  }
  if (late > 0 || missed_total > 0 || off_grid > 0) {
    std::printf("prom_equiv: INVALID RUN: Prometheus did not see every scrape in time (load?)\n");
    return kInvalid;
  }
  const bool same = diff == 0 && other_diff == 0 && rec_diff == 0;
  std::printf("prom_equiv: %s\n", same ? "IDENTICAL" : "DIFFERENT");
  if (!same) return 1;
  if (o.check && !(node_named && rank_named && hang_named)) {
    std::printf("prom_equiv: the scenario's culprits were not all named\n");
    return 1;
  }
  return 0;
}

int RunEquivalence(const Options& o, const Config& config) {
  if (!PromProcess::Installed()) {
    std::printf("prom_equiv: /usr/bin/prometheus not installed: skipped\n");
    return kSkipped;
  }
  const ClusterDumpSpec spec = Scenario(o, true);
  const ClusterDump dump = RunClusterDump(spec, config);
  if (o.model_only) {
    for (const ClusterDump::Eval& ev : dump.evals) {
      for (const prom::AlertEvent& e : ev.fired) {
        std::printf("%8.1f %s %s\n", static_cast<double>(ev.t_ns - dump.start_ns) / kSec,
                    e.alert.c_str(), LabelKey(e.labels).c_str());
      }
    }
    return 0;
  }
  if (dump.evals.empty()) {
    std::fprintf(stderr, "prom_equiv: the model evaluated nothing\n");
    return 1;
  }
  // A run that Prometheus could not follow in time (a loaded machine) says nothing about the
  // rules: tried again, with the same texts, up to --tries times.
  ServeAtNormalPriority(o);
  int rc = kInvalid;
  for (int i = 0; i < o.tries && rc == kInvalid; ++i) rc = ServeAndCompare(o, spec, dump);
  return rc;
}

// The Grafana dashboard's queries, its variables all selected ($job, $host, ... as `.*`) and
// $__rate_interval as 1m.
std::vector<std::string> DashboardQueries(const std::string& path) {
  std::vector<std::string> out;
  const nlohmann::json d = nlohmann::json::parse(ReadFile(path), nullptr, false);
  if (!d.is_object()) return out;
  std::vector<const nlohmann::json*> todo = {&d};
  while (!todo.empty()) {
    const nlohmann::json* j = todo.back();
    todo.pop_back();
    if (j->is_object() && j->contains("expr") && (*j)["expr"].is_string()) {
      std::string e = (*j)["expr"].get<std::string>();
      e = std::regex_replace(e, std::regex(R"(\$__rate_interval)"), "1m");
      e = std::regex_replace(e, std::regex(R"(\$[a-z_]+)"), ".*");
      out.push_back(e);
    }
    if (j->is_object() || j->is_array()) {
      for (const auto& child : *j) {
        if (child.is_object() || child.is_array()) todo.push_back(&child);
      }
    }
  }
  return out;
}

// ---- Scale -------------------------------------------------------------------------------------

std::string GroupName(const std::string& labels) {
  const size_t semi = labels.rfind(';');
  const size_t end = labels.rfind('"');
  return semi == std::string::npos || end == std::string::npos || end < semi
             ? labels
             : labels.substr(semi + 1, end - semi - 1);
}

double QueryScalar(const PromProcess& prom, const std::string& expr) {
  const nlohmann::json d = prom.Query(expr, WallMs());
  if (d.is_null() || d["result"].empty()) return NAN;
  return std::strtod(d["result"][0]["value"][1].get<std::string>().c_str(), nullptr);
}

// Serves the dump's texts live in real time to a Prometheus with the shipped rules (keeping only
// the metrics matching `keep` when not empty) and prints what it cost.
int MeasureLive(const Options& o, const ClusterDumpSpec& spec, const ClusterDump& dump,
                const std::string& keep) {
  RecordedExporter exporter;
  if (!exporter.Start(o.nodes)) return 1;
  std::string cfg =
      "global:\n  scrape_interval: 15s\n  scrape_timeout: 10s\n  evaluation_interval: 15s\n"
      "rule_files:\n  - RULES_FILE\nscrape_configs:\n  - job_name: eval\n";
  if (!keep.empty()) {
    cfg += "    metric_relabel_configs:\n      - source_labels: [__name__]\n        regex: '" +
           keep + "'\n        action: keep\n";
  }
  cfg += "    static_configs:\n";
  cfg += StaticTargets(exporter.port(), dump.instances);
  PromProcess prom;
  if (!prom.Start(cfg, ReadFile(o.rules), {})) {
    std::fprintf(stderr, "prom_scale: prometheus did not start\n");
    return 1;
  }
  // Real time: each scrape's text from its own time (relative to the first kept) on.
  const int64_t wall0 = WallMs();
  const int64_t first = spec.keep_scrapes_from_ns + dump.start_ns;
  std::vector<std::vector<Text>> per_node(static_cast<size_t>(o.nodes));
  for (const ClusterDump::Scrape& s : dump.scrapes) {
    per_node[static_cast<size_t>(s.node)].push_back({wall0 + (s.t_ns - first) / kMs, s.text});
  }
  exporter.SetTexts(std::move(per_node), 0);
  const double load_before = LoadAverage();
  double rss_max = 0;
  double series_max = 0;
  std::map<std::string, double> group_max;
  std::map<std::string, double> group_sum;
  std::map<std::string, int> group_n;
  std::map<std::string, double> group_last;
  const auto cpu0 = prom.SelfMetric("process_cpu_seconds_total");
  const int64_t end = wall0 + static_cast<int64_t>(o.seconds * 1000.0);
  while (WallMs() < end) {
    Sleep(2000);
    for (const auto& [l, v] : prom.SelfMetric("process_resident_memory_bytes")) {
      rss_max = std::max(rss_max, v);
    }
    for (const auto& [l, v] : prom.SelfMetric("prometheus_tsdb_head_series")) {
      series_max = std::max(series_max, v);
    }
    const auto evals_ts =
        prom.SelfMetric("prometheus_rule_group_last_evaluation_timestamp_seconds");
    for (const auto& [l, v] : prom.SelfMetric("prometheus_rule_group_last_duration_seconds")) {
      const std::string g = GroupName(l);
      const double ts = evals_ts.count(l) ? evals_ts.at(l) : 0;
      if (ts <= 0 || ts == group_last[g]) continue;  // not evaluated since the last look
      group_last[g] = ts;
      group_max[g] = std::max(group_max[g], v);
      group_sum[g] += v;
      ++group_n[g];
    }
  }
  const auto cpu1 = prom.SelfMetric("process_cpu_seconds_total");
  // Each group's rules again, alone: the exporter stopped (nothing more to ingest), every rule's
  // expression as an instant query (wrapped in count(): the same evaluation, a one-number answer)
  // at the group's last evaluation, in order; the median and the least of kAloneRounds rounds per
  // group. What the rules cost without the scrapes competing for Prometheus's cores (on this
  // 2-core VM the rounds spread by +-20 %: the least is the figure least moved by the rest).
  const auto last_ts = prom.SelfMetric("prometheus_rule_group_last_evaluation_timestamp_seconds");
  const nlohmann::json groups_api =
      nlohmann::json::parse(prom.Get("/api/v1/rules"), nullptr, false);
  // What the scrapes brought, read while they still run.
  const double samples_round = QueryScalar(prom, "sum(scrape_samples_scraped{job=\"eval\"})");
  const double recorded_series = QueryScalar(prom, "count({__name__=~\"sentinel:.+\"})");
  const double scrape_avg =
      QueryScalar(prom, "avg(avg_over_time(scrape_duration_seconds{job=\"eval\"}[10m]))");
  const double scrape_max =
      QueryScalar(prom, "max(max_over_time(scrape_duration_seconds{job=\"eval\"}[10m]))");
  exporter.Stop();
  Sleep(3000);
  constexpr int kAloneRounds = 7;
  std::map<std::string, double> alone_s;
  std::map<std::string, double> alone_least_s;
  std::vector<std::tuple<double, std::string, std::string>> alone_rules;
  if (groups_api.is_object() && groups_api.contains("data")) {
    for (const auto& g : groups_api["data"]["groups"]) {
      const std::string name = g.value("name", "");
      int64_t at_ms = 0;
      for (const auto& [l, v] : last_ts) {
        if (GroupName(l) == name) at_ms = std::llround(v * 1000.0);
      }
      std::vector<double> rounds;
      std::map<std::string, std::vector<double>> per_rule;
      for (int round = 0; round < kAloneRounds; ++round) {
        double sum = 0;
        for (const auto& r : g["rules"]) {
          const int64_t t0 = WallMs();
          prom.Query("count((" + r.value("query", "") + "))", at_ms);
          const double took = static_cast<double>(WallMs() - t0) / 1000.0;
          sum += took;
          per_rule[r.value("name", "")].push_back(took);
        }
        rounds.push_back(sum);
      }
      std::sort(rounds.begin(), rounds.end());
      alone_s[name] = rounds[rounds.size() / 2];
      alone_least_s[name] = rounds.front();
      for (auto& [rule, v] : per_rule) {
        std::sort(v.begin(), v.end());
        alone_rules.emplace_back(v[v.size() / 2], name, rule);
      }
    }
  }
  std::sort(alone_rules.rbegin(), alone_rules.rend());
  const double cpu =
      (cpu1.empty() ? 0 : cpu1.begin()->second) - (cpu0.empty() ? 0 : cpu0.begin()->second);
  double missed = 0;
  for (const auto& [l, v] : prom.SelfMetric("prometheus_rule_group_iterations_missed_total")) {
    missed += v;
  }
  const double load_after = LoadAverage();
  std::printf(
      "prom_scale: %d targets, %.0f s served live at a 15 s scrape and evaluation (the shipped "
      "rules unchanged), %s; load %.2f -> %.2f\n",
      o.nodes, o.seconds,
      keep.empty() ? "every series kept"
                   : "only the metrics the rules read kept (metric_relabel_configs)",
      load_before, load_after);
  std::printf("  head series (max)                       %.0f\n", series_max);
  std::printf("  samples per scrape round (sum)          %.0f\n", samples_round);
  std::printf("  recorded sentinel:* series              %.0f\n", recorded_series);
  std::printf("  resident memory (max)                   %.0f MiB\n", rss_max / 1048576.0);
  std::printf("  Prometheus CPU                          %.2f s per 15 s (%.0f s over %.0f s)\n",
              cpu * 15.0 / o.seconds, cpu, o.seconds);
  std::printf("  scrape duration avg / max               %.3f / %.3f s\n", scrape_avg, scrape_max);
  std::printf("  missed rule-group iterations            %.0f\n", missed);
  for (const auto& [g, v] : alone_s) {
    std::printf(
        "  rule group %-22s alone (no ingestion): %.3f s (median of %d rounds; least %.3f s)\n",
        g.c_str(), v, kAloneRounds, alone_least_s[g]);
  }
  std::printf("  the costliest rules alone (medians):\n");
  for (size_t i = 0; i < alone_rules.size() && i < 8; ++i) {
    std::printf("    %6.3f s  %s: %s\n", std::get<0>(alone_rules[i]),
                std::get<1>(alone_rules[i]).c_str(), std::get<2>(alone_rules[i]).c_str());
  }
  // The costliest rules at the last live evaluation of each group (/api/v1/rules:
  // evaluationTime, read before the exporter stopped).
  if (groups_api.is_object() && groups_api.contains("data")) {
    std::vector<std::tuple<double, std::string, std::string>> costly;
    for (const auto& g : groups_api["data"]["groups"]) {
      for (const auto& r : g["rules"]) {
        costly.emplace_back(r.value("evaluationTime", 0.0), g.value("name", ""),
                            r.value("name", ""));
      }
    }
    std::sort(costly.rbegin(), costly.rend());
    std::printf("  the costliest rules at their group's last evaluation:\n");
    for (size_t i = 0; i < costly.size() && i < 6; ++i) {
      std::printf("    %6.3f s  %s: %s\n", std::get<0>(costly[i]), std::get<1>(costly[i]).c_str(),
                  std::get<2>(costly[i]).c_str());
    }
  }
  // The dashboard's panels as Grafana asks for them: each a range query over the last 5 minutes
  // at a 15 s step.
  std::vector<std::pair<double, std::string>> took;
  double total_ms = 0;
  const int64_t now = WallMs();
  for (const std::string& q :
       keep.empty() ? DashboardQueries(o.dashboard) : std::vector<std::string>()) {
    const int64_t t0 = WallMs();
    const bool ok = !prom.QueryRange(q, now - 300000, now, 15000).is_null();
    const double ms = static_cast<double>(WallMs() - t0);
    total_ms += ms;
    took.push_back({ms, (ok ? "" : "(failed) ") + q});
  }
  std::sort(took.rbegin(), took.rend());
  std::printf("  dashboard: %zu panel queries, %.0f ms in all; the slowest:\n", took.size(),
              total_ms);
  for (size_t i = 0; i < took.size() && i < 3; ++i) {
    std::printf("    %6.0f ms  %.110s\n", took[i].first, took[i].second.c_str());
  }
  for (const auto& [g, v] : group_max) {
    std::printf("  rule group %-22s evaluation %.3f s max, %.3f s mean (%d evaluations)\n",
                g.c_str(), v, group_sum[g] / std::max(group_n[g], 1), group_n[g]);
  }
  return 0;
}

int RunScale(const Options& o, const Config& config) {
  if (!PromProcess::Installed()) {
    std::printf("prom_equiv: /usr/bin/prometheus not installed: skipped\n");
    return kSkipped;
  }
  // A minute of warm-up (every rank's windows full), then the scrapes served.
  ClusterDumpSpec spec = Scenario(o, false);
  const int64_t warm_ns = 60 * kSec;
  const int64_t serve_ns = static_cast<int64_t>(o.seconds * kSec);
  spec.run_ns = warm_ns + serve_ns + 15 * kSec;
  spec.faults.from_ns = warm_ns / 2;
  spec.faults.slow_rank = -1;
  spec.keep_scrapes_from_ns = warm_ns - 15 * kSec;
  spec.keep_recorded = false;
  spec.evaluate_rules = false;
  const int64_t model_t0 = WallMs();
  ClusterDump dump;
  const bool loaded = !o.scrapes.empty() && LoadScrapes(o.scrapes, &spec, &dump);
  if (!loaded) {
    dump = RunClusterDump(spec, config);
    if (!o.scrapes.empty() && !SaveScrapes(o.scrapes, spec, dump)) return 1;
  }
  const double model_s = static_cast<double>(WallMs() - model_t0) / 1000.0;
  size_t bytes = 0;
  size_t lines = 0;
  size_t texts = 0;
  for (const ClusterDump::Scrape& s : dump.scrapes) {
    if (s.node != 0 && s.node != o.nodes - 1) continue;
    bytes += s.text.size();
    lines += static_cast<size_t>(std::count(s.text.begin(), s.text.end(), '\n'));
    ++texts;
  }
  std::printf(
      "prom_scale: %d nodes x %d ranks: the model's %.0f s simulated %s in %.0f s; a node's "
      "/metrics: %.0f bytes, %.0f lines\n",
      o.nodes, ClusterLayout::kPerNode, static_cast<double>(spec.run_ns) / kSec,
      loaded ? ("read from " + o.scrapes).c_str() : "ran", model_s,
      static_cast<double>(bytes) / std::max<size_t>(texts, 1),
      static_cast<double>(lines) / std::max<size_t>(texts, 1));
  std::fflush(stdout);

  ServeAtNormalPriority(o);
  int rc = o.all_series_too ? MeasureLive(o, spec, dump, "") : 0;
  if (rc == 0 && o.inputs_only_too) rc = MeasureLive(o, spec, dump, RuleInputsRegex(o.rules));
  return rc;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string* v) {
      if (i + 1 >= argc) return false;
      *v = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--nodes") {
      if (!value(&v) || !absl::SimpleAtoi(v, &o->nodes) || o->nodes < 4 || o->nodes > 4096) {
        return false;
      }
    } else if (a == "--seed") {
      if (!value(&v) || !absl::SimpleAtoi(v, &o->seed)) return false;
    } else if (a == "--speed") {
      if (!value(&v) || !absl::SimpleAtod(v, &o->speed) || !(o->speed >= 1)) return false;
    } else if (a == "--seconds") {
      if (!value(&v) || !absl::SimpleAtod(v, &o->seconds) || !(o->seconds >= 30)) return false;
    } else if (a == "--dashboard") {
      if (!value(&o->dashboard)) return false;
    } else if (a == "--rules") {
      if (!value(&o->rules)) return false;
    } else if (a == "--scale") {
      o->scale = true;
    } else if (a == "--serve-at-normal-priority") {
      o->serve_at_normal_priority = true;
    } else if (a == "--model-only") {
      o->model_only = true;
    } else if (a == "--tries") {
      if (!value(&v) || !absl::SimpleAtoi(v, &o->tries) || o->tries < 1) return false;
    } else if (a == "--all-series-only") {
      o->inputs_only_too = false;
    } else if (a == "--inputs-only") {
      o->all_series_too = false;
    } else if (a == "--scrapes") {
      if (!value(&o->scrapes)) return false;
    } else if (a == "--check") {
      o->check = true;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace sentinel::collector::eval

int main(int argc, char** argv) {
  using sentinel::collector::eval::Options;
  Options o;
  if (!sentinel::collector::eval::ParseArgs(argc, argv, &o)) {
    std::fprintf(
        stderr,
        "usage: prom_equiv [--nodes N] [--seed S] [--speed K] [--rules FILE] [--check]\n"
        "                  [--tries N] [--model-only] [--serve-at-normal-priority]\n"
        "       prom_equiv --scale [--nodes N] [--seconds S] [--rules FILE]\n"
        "                  [--dashboard FILE] [--serve-at-normal-priority]\n"
        "                  [--all-series-only | --inputs-only]\n"
        "                  [--scrapes FILE (read the model's texts from it when it holds\n"
        "                   this --nodes and --seconds, else run the model and write it)]\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::err);
  sentinel::collector::Config config;  // the daemon's defaults
  config.hang_timeout_ns = 30LL * 1000000000;
  return o.scale ? sentinel::collector::eval::RunScale(o, config)
                 : sentinel::collector::eval::RunEquivalence(o, config);
}
