// The verdict's wire records (see verdict_wire.h).
#include "plugin/guard/verdict_wire.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "plugin/guard/verdict_join.h"

namespace sentinel::guard {
namespace {

void CopyField(char* dst, size_t cap, const std::string& src) {
  size_t n = std::min(cap - 1, src.size());
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

}  // namespace

std::vector<SentinelWireVerdict> ToWireVerdicts(const Verdict& verdict, const Expectation& expect,
                                                const Evidence& evidence, uint16_t outcome,
                                                int64_t now_ns) {
  std::vector<SentinelWireVerdict> out;
  for (uint16_t kind : {static_cast<uint16_t>(kSentinelVerdictTransport),
                        static_cast<uint16_t>(kSentinelVerdictPlacement),
                        static_cast<uint16_t>(kSentinelVerdictLinkDegraded)}) {
    std::vector<std::string> found;
    std::vector<std::string> causes;
    for (const Finding& f : verdict.mismatches) {
      if (f.kind != kind) continue;
      found.push_back(f.term + ": " + f.found);
      for (const std::string& c : f.causes) causes.push_back(c);
      if (!f.advice.empty()) causes.push_back("do: " + f.advice.front());
    }
    if (found.empty()) continue;
    SentinelWireVerdict w;
    std::memset(&w, 0, sizeof w);
    w.comm_hash = evidence.comm_hash;
    w.now_ns = now_ns;
    w.rank = evidence.rank;
    w.nranks = evidence.nranks;
    w.kind = kind;
    w.outcome = outcome;
    CopyField(w.expected, sizeof w.expected, expect.text);
    CopyField(w.found, sizeof w.found, Join(found, " | "));
    CopyField(w.cause, sizeof w.cause, Join(causes, "; "));
    CopyField(w.evidence, sizeof w.evidence, Join(verdict.evidence, "\n"));
    out.push_back(w);
  }
  return out;
}

}  // namespace sentinel::guard
