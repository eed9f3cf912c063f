// Private to the SENTINEL_* registry's three files (not for other code): the problem list a
// parse fills, and the problem texts the parser asks for. The table is sentinel_env.cc, the
// parser sentinel_env_parse.cc, the problem reporting sentinel_env_problems.cc.
#pragma once

#include <cstddef>

#include "common/sentinel_env.h"

namespace sentinel::rules::env_internal {

// Appends printf-style lines to a SentinelEnv's fixed problem buffer (whole lines only).
struct Problems {
  SentinelEnv* env;
  void Add(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
};

// Names the registry ignores: set by the plugin itself, or developers' knobs (SENTINEL_DEV_*).
bool IsInternalName(const char* entry) noexcept;

// "NAME='text' is not ...; using DEFAULT" for a value that did not parse under spec's type.
void ReportBad(const EnvVarSpec& spec, const char* text, Problems* p);
// "NAME is not a variable sentinel knows (did you mean ...?)" for an unknown SENTINEL_* name.
void ReportUnknown(const char* name, size_t len, Problems* p);

}  // namespace sentinel::rules::env_internal
