// One scenario of the cluster-scale evaluation (cluster_eval.cc) run once, keeping what a real
// Prometheus would be fed and what the rules' mirror (prom_mirror.h) concluded: every node's
// /metrics text at each of its scrapes, and at each rule evaluation the alerts that went firing
// and every recording rule's result. prom_equiv.cc serves the texts to a real Prometheus
// running the shipped rules and compares its alerts with these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collector/config/config.h"
#include "tests/eval/cluster_model.h"
#include "tests/eval/eval_frames.h"
#include "tests/eval/prom_mirror.h"

namespace sentinel::collector::eval {

struct ClusterDumpSpec {
  int nodes = 0;
  int pp_stages = 0;  // ClusterLayout's; 0: the default depth
  uint64_t seed = 1;
  double step_ms = 200;
  ClusterFaults faults;  // from_ns and hang_ns counted from the run's start
  HangKind hang = HangKind::kNone;
  int64_t run_ns = 0;  // simulated length
  // Scrapes before this long after the start are not kept (their texts are the bulk of the dump
  // at 1,024 nodes); the evaluations are all kept.
  int64_t keep_scrapes_from_ns = 0;
  bool keep_recorded = true;   // every evaluation's recording-rule results (large at scale)
  bool evaluate_rules = true;  // false: no mirror at all (only the texts are wanted)
};

struct ClusterDump {
  struct Scrape {
    int node = 0;
    int64_t t_ns = 0;  // true (virtual) time of the scrape
    std::string text;  // the node's /metrics body, as sentineld renders it
  };
  struct Eval {
    int64_t t_ns = 0;
    std::vector<prom::AlertEvent> fired;  // alerts that went firing at this evaluation
    prom::Store recorded;                 // every recording rule's result, by record name
  };
  std::vector<std::string> instances;  // per node: the `instance` label the mirror gave it
  std::vector<Scrape> scrapes;         // in time order
  std::vector<Eval> evals;             // in time order, every 15 s
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  // Per node: the job rank of comm label + comm rank, to name what an alert names.
  std::vector<std::string> comm_labels;      // per communicator of the layout
  std::vector<std::vector<int>> comm_ranks;  // ... its job ranks in comm-rank order
};

// Runs the scenario (deterministic for its seed) and returns the dump.
ClusterDump RunClusterDump(const ClusterDumpSpec& spec, const Config& config);

}  // namespace sentinel::collector::eval
