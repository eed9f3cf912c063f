// The verdict's wire form: the SentinelWireVerdict records the plugin sends sentineld.
#pragma once

#include <cstdint>
#include <vector>

#include "plugin/guard/verdict.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::guard {

// One wire record per mismatch kind (transport / placement / link degraded); `outcome` is a
// kSentinelOutcome*. Strings are truncated to the record's fields and always NUL-terminated.
std::vector<SentinelWireVerdict> ToWireVerdicts(const Verdict& verdict, const Expectation& expect,
                                                const Evidence& evidence, uint16_t outcome,
                                                int64_t now_ns);

}  // namespace sentinel::guard
