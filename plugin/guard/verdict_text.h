// The verdict as a person reads it: the one clear message on stderr (what was expected, what was
// found, the evidence, the likely causes, what to do, the outcome). The checks are verdict.h's.
#pragma once

#include <string>

#include "plugin/guard/verdict.h"

namespace sentinel::guard {

// The one clear message. `where` is e.g. "ncclCommInitRank" or "first collective".
std::string FormatVerdict(const Verdict& verdict, const Expectation& expect,
                          const Evidence& evidence, Mode mode, const std::string& where);

const char* ModeName(Mode mode);

}  // namespace sentinel::guard
