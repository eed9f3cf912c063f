// Compares an Expectation with the evidence (NCCL's log lines, the host probe, the environment,
// the communicator's shape) and explains every mismatch: what was expected, what was found, the
// evidence lines, the likely causes and what to do. Pure functions: no I/O, no global state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/choice_words.h"
#include "plugin/guard/expectation.h"
#include "plugin/guard/host_probe.h"
#include "plugin/guard/nccl_env.h"
#include "plugin/guard/nccl_log_parser.h"
#include "plugin/guard/net_evidence.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::guard {

// When the check runs. Channel paths (gdr, intra) exist at init only without runtime connect.
enum class Stage { kInit, kFirstCollective, kProfilerInit };

// SENTINEL_ON_MISMATCH: fail, warn or abort (the words and their parser: common/choice_words.h).
using Mode = rules::OnMismatch;

struct Evidence {
  const LogEvidence* log = nullptr;  // null when NCCL's log could not be captured
  std::string log_unavailable_reason;
  const HostFacts* host = nullptr;  // null when not probed
  NcclEnv env;
  // The communicator (profiler init args, or the log's `comm ... nNodes` line).
  uint64_t comm_hash = 0;
  int rank = -1;
  int nranks = 0;
  int nnodes = 0;       // 0 unknown
  int local_ranks = 0;  // 0 unknown
  // The rank's GPU (busId from NCCL's Init line, looked up in sysfs); bdf empty when unknown.
  PciLocation gpu;
  // What our wrapping net plugin saw (absent unless libnccl-net-sentinel.so is loaded).
  NetPluginEvidence net_plugin;
};

struct Finding {
  uint16_t kind = kSentinelVerdictTransport;  // kSentinelVerdict*
  std::string term;                           // the expectation term: "net=ib"
  std::string found;                          // one line
  std::vector<std::string> causes;            // most likely first
  std::vector<std::string> advice;
};

struct Verdict {
  std::vector<Finding> mismatches;
  std::vector<std::string> deferred;    // terms that need channel lines not printed yet
  std::vector<std::string> unverified;  // terms no evidence could decide
  std::vector<std::string> evidence;    // lines that support the findings

  bool Passed() const { return mismatches.empty(); }
};

Verdict Evaluate(const Expectation& expect, const Evidence& evidence, Stage stage);

// The one clear message. `where` is e.g. "ncclCommInitRank" or "first collective".
std::string FormatVerdict(const Verdict& verdict, const Expectation& expect,
                          const Evidence& evidence, Mode mode, const std::string& where);

// One wire record per mismatch kind (transport / placement / link degraded); `outcome` is a
// kSentinelOutcome*. Strings are truncated to the record's fields and always NUL-terminated.
std::vector<SentinelWireVerdict> ToWireVerdicts(const Verdict& verdict, const Expectation& expect,
                                                const Evidence& evidence, uint16_t outcome,
                                                int64_t now_ns);

const char* ModeName(Mode mode);

}  // namespace sentinel::guard
