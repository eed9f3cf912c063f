// The fake NCCL's scenario: what the simulated node looks like (network hardware, intra-node path,
// placement, link speed) and test switches. Read once per process from FAKE_NCCL_SCENARIO=<file>
// (key = value lines) and then FAKE_NCCL_<KEY> variables; the format is in tests/fakes/README.md.
#pragma once

#include <string>
#include <vector>

namespace sentinel::testing {

struct Scenario {
  std::string net = "ib";  // ib | roce | socket | <external net plugin name>
  std::vector<std::string> nics = {"mlx5_0"};
  bool gdr = true;
  std::string intra = "p2p";  // p2p | shm | nvls
  int nodes = 0;              // 0: derived from ranks_per_node (default: one node)
  int ranks_per_node = 0;     // 0: derived from nodes (default: every rank on one node)
  std::vector<std::string> socket_ifs = {"eth0"};
  std::string ip = "10.0.0.1";
  bool ext_plugin_fails = false;  // the external net plugin's init fails
  bool relaxed_ordering = false;
  double link_gbps = 400.0;    // inter-node bandwidth per rank
  double latency_us = 5.0;     // inter-node latency per collective
  double intra_gbps = 2400.0;  // intra-node bandwidth
  int channels = 2;            // channels for messages >= 64 KiB (1 below)
  int max_steps = 8;           // cap on ProxySteps per ProxyOp
  bool pxn = false;            // also deliver ProxyOps from a foreign pid with foreign pointers
  // Rendezvous timeout, opt-in: 0 = wait forever, as NCCL does (a rank that never arrives leaves
  // its peers inside the collective). > 0 ends the wait with ncclSystemError (tests that must end).
  double barrier_timeout_s = 0.0;
  long long gpu_clock_offset_ns = 1000000000000LL;  // %globaltimer = CLOCK_MONOTONIC + this
  int cuda_driver_version = 13000;
  // Bandwidth model (bandwidth_model.h): one degraded rank's NIC, or one degraded ring link
  // between ranks degraded_link_a and degraded_link_b, runs at degraded_gbps (0: nothing degraded).
  int degraded_rank = -1;
  int degraded_link_a = -1;
  int degraded_link_b = -1;
  double degraded_gbps = 0.0;
};

// Parses `text` (file contents) into `out`, applying to its current values. Returns "" or an error.
std::string ParseScenarioText(const std::string& text, Scenario* out);
// The process's scenario (file, then FAKE_NCCL_* variables), parsed once. Errors go to stderr.
const Scenario& GetScenario();
// Reads a file into a string; false if it cannot be read.
bool ReadFileToString(const std::string& path, std::string* out);

}  // namespace sentinel::testing
