// The guard's names for the shared expectation grammar (common/expectation.h, library
// sentinel_rules): the grammar has one source, which the guard and sentineld both use.
#pragma once

#include "common/expectation.h"

namespace sentinel::guard {

using rules::Affinity;
using rules::AffinityName;
using rules::Compare;
using rules::Expectation;
using rules::FormatParseError;
using rules::IntraPath;
using rules::IntraPathName;
using rules::NetKind;
using rules::NetKindName;
using rules::ParseExpectation;
using rules::Toggle;

}  // namespace sentinel::guard
