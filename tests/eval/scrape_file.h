// The scale run's scrapes on disk (prom_equiv --scale --scrapes FILE): the model at 1,024 nodes
// takes about 14 minutes of one core, the Prometheus measurement 3; saving what the model fed
// Prometheus lets a changed rules file be measured on the very same texts, minutes apart.
#pragma once

#include <cstdint>
#include <string>

#include "tests/eval/cluster_dump.h"

namespace sentinel::collector::eval {

// Writes the dump's instances, start and scrapes (the rest is not needed to serve them again),
// with the spec's node count, simulated length and first kept scrape. False (and the reason on
// stderr) on failure.
bool SaveScrapes(const std::string& path, const ClusterDumpSpec& spec, const ClusterDump& dump);

// Reads a file SaveScrapes wrote for `spec.nodes` nodes over `spec.run_ns` into `dump` and sets
// `spec->keep_scrapes_from_ns`. False when the file is absent, was written for another node
// count or length, or is damaged (the reason on stderr, except for an absent file).
bool LoadScrapes(const std::string& path, ClusterDumpSpec* spec, ClusterDump* dump);

}  // namespace sentinel::collector::eval
