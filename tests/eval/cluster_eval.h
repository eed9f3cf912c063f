// detection_eval --nodes N: the detection evaluation at cluster scale. N virtual nodes of 8 ranks,
// each with its own Aggregator fed only its local ranks through the real ingest path (Session
// frame parsing -> Aggregator), in virtual time, with its own clock offset; the job-wide tier is
// the shipped Prometheus rules (prom_mirror.h) evaluated over the nodes' real /metrics text at a
// 15 s scrape and evaluation interval. Prints, per scenario family and per tier (node, job),
// precision, recall, who was named (node or rank), time to name and false alerts per simulated
// hour, and which targets are missed.
//
// At 2 and 4 nodes every family runs on each layout (pure data parallel across nodes, and the
// pipelines: "pp1 dp2 slow node +10%"); elsewhere on the default one.
// The full runs (minutes of one core each at 64 nodes; the simulated time is never slept; each
// noise family 1 simulated hour per layout):
//   detection_eval --nodes 2 --seeds 4 --noise-minutes 15
//   detection_eval --nodes 4 --seeds 4 --noise-minutes 15
//   detection_eval --nodes 8 --seeds 4 --noise-minutes 15
//   detection_eval --nodes 64 --seeds 1 --noise-minutes 60
// Families: "slow rank +P%" (one rank computes P % longer), "slow node +P%" (every rank of a
// node), "slow link +P%" (one NIC's cross-node transfers), "noise heavy-tail+pauses", "noise
// hiccups" (20-100 ms at 0.1 per rank per second), "hang <role>" (a rank stops at a cross-node
// collective). The node tier is what each sentineld alerts on; the job tier is the rules' alerts.
// Every node's 8 NIC ports are polled at sentineld's --nic-poll (port_xmit_wait climbing on the
// slow link's port while it is slowed); "NIC named" is the node's link_degraded alert naming it
// (node tier) and its /metrics sentinel_comm_slow_last_info{cause="network"} (job tier).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collector/config/config.h"

namespace sentinel::collector::eval {

struct ClusterOptions {
  int nodes = 0;
  int seeds = 2;
  uint64_t seed = 1;
  double step_ms = 200;       // compute per training step (all phases)
  double noise_minutes = 10;  // simulated minutes per noise-only job
  double nic_noise = 0;       // ClusterFaults::nic_usual_held in every family
  int dp_buckets = 1;         // ClusterLayout::dp_buckets
  // Pipeline depths to run (one layout each, ClusterLayout's `pp_stages`); empty: pure data
  // parallel and the pipelines at 2 and 4 nodes, the default depth elsewhere.
  std::vector<int> pp_stages;
  std::vector<std::string> only;  // families whose name contains one of these
  bool check = false;
};

// Returns the process exit code (1 with `check` when a target is missed).
int RunClusterEval(const ClusterOptions& options, const Config& config);

}  // namespace sentinel::collector::eval
