// The one boolean rule for every SENTINEL_* switch, shared by the profiler, the interposer and
// the NCCL log capture (and anything else that reads a yes/no variable): 1/true/yes/on and
// 0/false/no/off, case-insensitive. No allocation: callable from an LD_PRELOAD constructor.
#pragma once

namespace sentinel::rules {

enum class EnvBool { kUnset, kTrue, kFalse, kInvalid };

// nullptr or "" -> kUnset; the eight spellings above -> kTrue/kFalse; anything else kInvalid.
EnvBool ParseEnvBool(const char* text);

// SENTINEL_DISABLE under that rule, from the process's one reading (sentinel_env.h): true only
// for a true spelling (an invalid value keeps sentinel on and is told once on stderr).
bool SentinelDisabled();

}  // namespace sentinel::rules
