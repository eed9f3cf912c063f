// The SENTINEL_* registry's table: every variable, its type, default, range and documentation
// (see sentinel_env.h). Parsing is in sentinel_env_parse.cc, problem reporting in
// sentinel_env_problems.cc.
#include "common/sentinel_env.h"

#include <cstring>

#include "common/choice_words.h"
#include "common/sentinel_env_internal.h"

namespace sentinel::rules {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
// Shorthands for the table's columns only.
// NOLINTBEGIN(readability-identifier-naming)
constexpr EnvType B = EnvType::kBool;
constexpr EnvType I = EnvType::kInt;
constexpr EnvType D = EnvType::kDuration;
constexpr EnvType P = EnvType::kPercent;
constexpr EnvType E = EnvType::kEnum;
constexpr EnvType S = EnvType::kString;
constexpr EnvType F = EnvType::kPath;
constexpr EnvDoc R = EnvDoc::kReadme;
constexpr EnvDoc O = EnvDoc::kElsewhere;
// NOLINTEND(readability-identifier-naming)

// id, name, type, default, lo, hi, choices, bool aliases, documented in, doc.
// NOLINTNEXTLINE(cert-err58-cpp): constant initialisation only (no constructor runs).
constexpr EnvVarSpec kRegistry[] = {
    {Var::kDisable, "SENTINEL_DISABLE", B, "0", 0, 0, nullptr, false, R, "turn everything off"},
    {Var::kEvents, "SENTINEL_EVENTS", S, "default", 0, 0, nullptr, false, R,
     "NCCL event mask (checked by plugin/base/event_mask.h)"},
    {Var::kSocket, "SENTINEL_SOCKET", F, "", 0, 0, nullptr, false, R,
     "sentineld's socket; none = no streaming"},
    {Var::kDaemonUser, "SENTINEL_DAEMON_USER", S, "sentinel", 0, 0, nullptr, false, R,
     "the system sentineld's user, trusted beside you and root"},
    {Var::kDump, "SENTINEL_DUMP", F, "", 0, 0, nullptr, false, R, "JSONL dump file (%p, %h)"},
    {Var::kJobId, "SENTINEL_JOB_ID", S, "", 0, 0, nullptr, false, R, "job id sent to sentineld"},
    {Var::kLogLevel, "SENTINEL_LOG_LEVEL", E, "warn", 0, 0, kPluginLogLevelWords, false, R,
     "the plugin's log level"},
    {Var::kExpect, "SENTINEL_EXPECT", S, "", 0, 0, nullptr, false, R,
     "transport/placement expectation"},
    {Var::kExpectFile, "SENTINEL_EXPECT_FILE", F, "", 0, 0, nullptr, false, R,
     "a file holding the expectation"},
    {Var::kOnMismatch, "SENTINEL_ON_MISMATCH", E, "fail", 0, 0, kOnMismatchWords, false, R,
     "what a failed expectation does"},
    {Var::kOnHang, "SENTINEL_ON_HANG", E, "off", 0, 0, "off|report|abort", false, R,
     "what a confirmed hang does"},
    {Var::kSysfsRoot, "SENTINEL_SYSFS_ROOT", F, "/sys", 0, 0, nullptr, false, R,
     "root of the host probe's sysfs"},
    {Var::kDevRoot, "SENTINEL_DEVFS_ROOT", F, "/dev", 0, 0, nullptr, false, R,
     "root of the host probe's /dev"},
    {Var::kVerbs, "SENTINEL_VERBS", B, "1", 0, 0, nullptr, false, R, "dlopen libibverbs"},
    {Var::kPoolSize, "SENTINEL_POOL_SIZE", I, "1024", 16, kMiB / 16, nullptr, false, R,
     "event slots per collective-level pool"},
    {Var::kRings, "SENTINEL_RINGS", I, "256", 8, 4096, nullptr, false, R,
     "per-thread record rings"},
    {Var::kRingRecords, "SENTINEL_RING_RECORDS", I, "8192", 2, kMiB / 16, nullptr, false, R,
     "records per ring (rounded up to a power of 2)"},
    {Var::kDrainIntervalMs, "SENTINEL_DRAIN_INTERVAL_MS", D, "100", 1, 1000, nullptr, false, R,
     "period of the drainer"},
    {Var::kProxyGraceMs, "SENTINEL_PROXY_GRACE_MS", D, "200", 1, 60000, nullptr, false, R,
     "wait for proxy children of a stopped collective"},
    {Var::kMaxComms, "SENTINEL_MAX_COMMS", I, "1024", 1, 65536, nullptr, false, R,
     "communicators profiled at once"},
    {Var::kInflightStuckMs, "SENTINEL_INFLIGHT_STUCK_MS", D, "0", 0, 86400000, nullptr, false, R,
     "in-flight time that counts as stuck; 0 = adaptive"},
    {Var::kCupti, "SENTINEL_CUPTI", E, "auto", 0, 0, "auto|on|off", true, R,
     "GPU kernel activity through CUPTI"},
    {Var::kCuptiPath, "SENTINEL_CUPTI_PATH", F, "", 0, 0, nullptr, false, R,
     "the libcupti to load"},
    {Var::kCuptiWindowMs, "SENTINEL_CUPTI_WINDOW_MS", D, "1000", 10, 600000, nullptr, false, R,
     "GPU window length"},
    {Var::kCuptiFlushMs, "SENTINEL_CUPTI_FLUSH_MS", D, "100", 5, 60000, nullptr, false, R,
     "period of the CUPTI flush thread"},
    {Var::kCuptiStarveMs, "SENTINEL_CUPTI_STARVE_MS", D, "3000", 10, 3600000, nullptr, false, R,
     "no activity this long: another tool owns CUPTI"},
    {Var::kCuptiRearmS, "SENTINEL_CUPTI_REARM_S", D, "30", 0, 86400, nullptr, false, R,
     "re-take CUPTI after stepping aside; 0 = never"},
    {Var::kCuptiBufferKib, "SENTINEL_CUPTI_BUFFER_KIB", I, "1024", 64, 65536, nullptr, false, R,
     "activity buffer size"},
    {Var::kCuptiBuffers, "SENTINEL_CUPTI_BUFFERS", I, "8", 2, 256, nullptr, false, R,
     "activity buffer count"},
    {Var::kCuptiAttributions, "SENTINEL_CUPTI_ATTRIBUTIONS", I, "256", 0, 100000, nullptr, false, R,
     "kernel attribution records per window"},
    {Var::kCuptiCommKernels, "SENTINEL_CUPTI_COMM_KERNELS", S, "", 0, 0, nullptr, false, R,
     "extra communication kernel-name substrings"},
    {Var::kStepNvtx, "SENTINEL_STEP_NVTX", S, "", 0, 0, nullptr, false, R,
     "NVTX range that starts a step"},
    {Var::kBaselineNccl, "SENTINEL_BASELINE_NCCL", F, "", 0, 0, nullptr, false, R,
     "sentinel-baseline's libnccl"},
    {Var::kBaselineCudart, "SENTINEL_BASELINE_CUDART", F, "", 0, 0, nullptr, false, R,
     "sentinel-baseline's libcudart"},
    {Var::kBaselinePort, "SENTINEL_BASELINE_PORT", S, "", 0, 0, nullptr, false, R,
     "sentinel-baseline's rendezvous port (tools/baseline checks it)"},
    {Var::kBaselineToken, "SENTINEL_BASELINE_TOKEN", S, "", 0, 0, nullptr, false, R,
     "sentinel-baseline's rendezvous secret (tools/baseline checks it)"},
    {Var::kChainProfiler, "SENTINEL_CHAIN_PROFILER", S, "", 0, 0, nullptr, false, R,
     "a second profiler plugin to forward to"},
    {Var::kNetWrap, "SENTINEL_NET_WRAP", S, "", 0, 0, nullptr, false, R,
     "the real net plugin the net wrapper wraps"},
    {Var::kNetReportMs, "SENTINEL_NET_REPORT_MS", D, "1000", 10, 600000, nullptr, false, R,
     "period of the net wrapper's records"},
    {Var::kBudget, "SENTINEL_BUDGET", P, "0.5", 0, 100, nullptr, false, R,
     "the plugin's CPU budget, % of wall time; 0 = none"},
    {Var::kAddr, "SENTINEL_ADDR", S, "", 0, 0, nullptr, false, O,
     "sentinelctl's HOST:PORT (collector/README.md)"},
};
static_assert(sizeof(kRegistry) / sizeof(kRegistry[0]) == kVarCount, "one row per Var");

// Not the product's and not user typos: names the plugin sets itself (log_capture's stash of the
// user's NCCL_DEBUG*), and the developers' knobs of tests, benchmarks and scripts
// (SENTINEL_DEV_JOBS, SENTINEL_DEV_BENCH_PLUGIN, ...; CONTRIBUTING.md lists them).
constexpr const char* kInternalPrefixes[] = {"SENTINEL_ORIG_", "SENTINEL_DEV_"};

bool StartsWith(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

}  // namespace

const EnvVarSpec* EnvRegistry() noexcept { return kRegistry; }

const EnvVarSpec& Spec(Var v) noexcept { return kRegistry[static_cast<size_t>(v)]; }

const EnvVarSpec* FindEnvVar(const char* name) noexcept {
  for (const EnvVarSpec& s : kRegistry) {
    if (std::strcmp(s.name, name) == 0) return &s;
  }
  return nullptr;
}

namespace env_internal {
bool IsInternalName(const char* entry) noexcept {
  for (const char* prefix : kInternalPrefixes) {
    if (StartsWith(entry, prefix)) return true;
  }
  return false;
}
}  // namespace env_internal

}  // namespace sentinel::rules
