// The verdict's message text (see verdict_text.h).
#include "plugin/guard/verdict_text.h"

#include <cstdio>

#include "common/choice_words.h"

namespace sentinel::guard {
namespace {

const char* KindName(uint16_t kind) {
  switch (kind) {
    case kSentinelVerdictPlacement:
      return "placement";
    case kSentinelVerdictLinkDegraded:
      return "link degraded";
    default:
      return "transport";
  }
}

}  // namespace

const char* ModeName(Mode mode) { return rules::OnMismatchWord(mode); }

std::string FormatVerdict(const Verdict& verdict, const Expectation& expect,
                          const Evidence& evidence, Mode mode, const std::string& where) {
  std::string m = "[sentinel] NCCL transport/placement expectation NOT MET";
  m += " (rank " + std::to_string(evidence.rank) + "/" + std::to_string(evidence.nranks);
  if (evidence.comm_hash != 0) {
    char hash[32];
    std::snprintf(hash, sizeof hash, "0x%llx", static_cast<unsigned long long>(evidence.comm_hash));
    m += ", commId " + std::string(hash);
  }
  m += ", at " + where + ")\n";
  m += "  expected: " + expect.text + "\n";
  if (!expect.source.empty()) m += "  expectation from: " + expect.source + "\n";
  for (const Finding& f : verdict.mismatches) {
    m += "  [" + std::string(KindName(f.kind)) + "] " + f.term + "\n";
    m += "    found: " + f.found + "\n";
    m += "    likely cause" + std::string(f.causes.size() > 1 ? "s" : "") + ":\n";
    for (const std::string& c : f.causes) m += "      - " + c + "\n";
    if (!f.advice.empty()) {
      m += "    what to do:\n";
      for (const std::string& a : f.advice) m += "      - " + a + "\n";
    }
  }
  if (!verdict.evidence.empty()) {
    m += "  evidence (NCCL's log):\n";
    for (const std::string& l : verdict.evidence) m += "    | " + l + "\n";
  } else if (!evidence.log_unavailable_reason.empty()) {
    m += "  NCCL log evidence unavailable: " + evidence.log_unavailable_reason + "\n";
  }
  switch (mode) {
    case Mode::kFail:
      m += "  outcome: the call returns ncclInvalidUsage (SENTINEL_ON_MISMATCH=fail; set "
           "SENTINEL_ON_MISMATCH=warn to continue anyway)\n";
      break;
    case Mode::kWarn:
      m += "  outcome: continuing (SENTINEL_ON_MISMATCH=warn)\n";
      break;
    case Mode::kAbort:
      m += "  outcome: aborting the process (SENTINEL_ON_MISMATCH=abort)\n";
      break;
  }
  return m;
}

}  // namespace sentinel::guard
