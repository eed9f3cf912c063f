// EnvConfig: every SENTINEL_* variable the plugin core reads, parsed once at the first init.
// A bad value is reported once and the default is used. See plugin/README.md for the table.
#pragma once

#include <cstdint>
#include <string>

#include "common/sentinel_env.h"
#include "plugin/base/log.h"
#include "plugin/base/status.h"

namespace sentinel::plugin {

struct EnvConfig {
  bool disable = false;                  // SENTINEL_DISABLE
  std::string events = "default";        // SENTINEL_EVENTS (parsed by base/event_mask.h)
  std::string dump_path;                 // SENTINEL_DUMP, %p/%h expanded; empty = no dump
  LogLevel log_level = LogLevel::kWarn;  // SENTINEL_LOG_LEVEL
  uint32_t pool_size = 1024;             // SENTINEL_POOL_SIZE: slots per collective-level pool
  uint32_t rings = 256;                  // SENTINEL_RINGS: per-thread record rings
  uint32_t ring_records = 8192;          // SENTINEL_RING_RECORDS (rounded up to a power of 2)
  uint32_t drain_interval_ms = 100;      // SENTINEL_DRAIN_INTERVAL_MS
  uint32_t proxy_grace_ms = 200;         // SENTINEL_PROXY_GRACE_MS
  uint32_t max_comms = 1024;             // SENTINEL_MAX_COMMS
  uint32_t inflight_stuck_ms = 0;        // SENTINEL_INFLIGHT_STUCK_MS: 0 = adaptive threshold
  double budget_percent = 0.5;           // SENTINEL_BUDGET: % of the job's time; 0 = no budget
};

// The config from one reading of the environment (common/sentinel_env.h; tests pass their own).
// Every field of *out is set: a bad value holds its default. Ok, or kInvalidArgument whose message
// is the problem lines (one per bad setting; cut at Status::kDetailCap), each also told on stderr
// (ReportEnvProblems): a bad setting must not depend on NCCL_DEBUG to be seen.
[[nodiscard]] Status ParseEnvConfig(const rules::SentinelEnv& env, EnvConfig* out);
// The same from the process's one reading (ProcessSentinelEnv).
[[nodiscard]] Status ParseEnvConfig(EnvConfig* out);

// Writes each problem line to stderr as "[sentinel <pid>] ..." unless this process already told it
// (rules::TellEnvProblemsOnce): once per process, whatever NCCL's log level.
void ReportEnvProblems(const std::string& errors);

// Expands %p (pid) and %h (short hostname) in a SENTINEL_DUMP path.
std::string ExpandDumpPath(const std::string& pattern, int pid, const char* short_host);

}  // namespace sentinel::plugin
