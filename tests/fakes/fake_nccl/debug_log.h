// NCCL-format log lines for the fake NCCL (docs/nccl-facts.md "8.1 Line prefix",
// "8.5 `NCCL_DEBUG`"): NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE are read lazily at the
// first log call and cached. Thread-safe; every line is written under one mutex, like NCCL's
// ncclDebugLog.
#pragma once

namespace sentinel::testing {

enum LogLevel {
  kLogNone = 0,
  kLogVersion = 1,
  kLogWarn = 2,
  kLogInfo = 3,
  kLogAbort = 4,
  kLogTrace = 5
};

// Subsystem bits (docs/nccl-facts.md "2.3 Subsystem flags").
constexpr unsigned long kSubInit = 0x1;
constexpr unsigned long kSubColl = 0x2;
constexpr unsigned long kSubP2p = 0x4;
constexpr unsigned long kSubShm = 0x8;
constexpr unsigned long kSubNet = 0x10;
constexpr unsigned long kSubGraph = 0x20;
constexpr unsigned long kSubEnv = 0x80;
constexpr unsigned long kSubProxy = 0x400;
constexpr unsigned long kSubBootstrap = 0x1000;
constexpr unsigned long kSubProfile = 0x4000;
constexpr unsigned long kSubAll = ~0UL;

// Same signature as NCCL's logger (handed to the profiler plugin as logfn).
void DebugLog(int level, unsigned long flags, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
// Prints "NCCL version 2.28.9+cuda13.0" once per process, by the
// docs/nccl-facts.md "8.2 Initialisation sequence" rules.
void ShowVersionOnce();
// Re-reads the environment at the next log call (ncclResetDebugInit).
void ResetDebugInit();
// The [dev] field of the prefix: the simulated cudaGetDevice() of the calling thread.
void SetThreadDevice(int dev);
// Short hostname (truncated at the first '.').
const char* ShortHostname();

}  // namespace sentinel::testing

#define FAKE_INFO(flags, ...)                                                               \
  ::sentinel::testing::DebugLog(::sentinel::testing::kLogInfo, (flags), __FILE__, __LINE__, \
                                __VA_ARGS__)
#define FAKE_WARN(...)                                                                       \
  ::sentinel::testing::DebugLog(::sentinel::testing::kLogWarn, ::sentinel::testing::kSubAll, \
                                __FILE__, __LINE__, __VA_ARGS__)
