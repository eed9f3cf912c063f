// The words people type for two choices that several programs read, with their one parser each:
// what a failed transport/placement expectation does (SENTINEL_ON_MISMATCH, on_mismatch= in an
// expectation file, sentineld's --expect-on-mismatch, the verdict's wire outcome) and a log level
// (SENTINEL_LOG_LEVEL, sentineld's --log-level). No allocation, never throws.
#pragma once

#include <cstdint>

#include "common/sentinel_env.h"

namespace sentinel::rules {

// --- What a failed expectation does ---
enum class OnMismatch : uint8_t { kFail, kWarn, kAbort };
// Every word, in the registry's "a|b|c" form (SENTINEL_ON_MISMATCH's choices, help and errors).
inline constexpr char kOnMismatchWords[] = "fail|warn|abort";
const char* OnMismatchWord(OnMismatch mode) noexcept;
// Exact lowercase word; false (and *out unchanged) for anything else or nullptr.
[[nodiscard]] bool ParseOnMismatch(const char* text, OnMismatch* out) noexcept;
// SENTINEL_ON_MISMATCH as the registry read it (case-insensitive, by name); `fallback` when unset
// or bad (the registry told the bad value once).
OnMismatch OnMismatchFromEnv(const SentinelEnv& env, OnMismatch fallback) noexcept;
// The verdict's wire outcome (kSentinelOutcome* of schemas/wire/sentinel_wire.h) for a mode, and
// the word of an outcome: "pass", "warn", "fail", "abort", else "unknown".
uint16_t OutcomeOf(OnMismatch mode) noexcept;
const char* OutcomeWord(uint16_t outcome) noexcept;

// --- Log levels ---
enum class LogLevelWord : uint8_t { kTrace, kDebug, kInfo, kWarn, kError, kCritical, kOff };
// The plugin's words (SENTINEL_LOG_LEVEL's choices: no "critical", the plugin has no such level).
inline constexpr char kPluginLogLevelWords[] = "trace|debug|info|warn|warning|error|off";
// sentineld's words (--log-level; "warning" is also taken, as a spelling of warn).
inline constexpr char kDaemonLogLevelWords[] = "trace|debug|info|warn|error|critical|off";
// Exact lowercase word of either list ("warning" = warn); false (and *out unchanged) otherwise.
[[nodiscard]] bool ParseLogLevel(const char* text, LogLevelWord* out) noexcept;
// SENTINEL_LOG_LEVEL as the registry read it (case-insensitive, by name); `fallback` when unset
// or bad.
LogLevelWord LogLevelFromEnv(const SentinelEnv& env, LogLevelWord fallback) noexcept;

}  // namespace sentinel::rules
