// The fail-fast guard end to end: the real libnccl-profiler-sentinel.so, LD_PRELOADed
// into a multi-process "job" (guard_scenario_driver) over the fake NCCL, with fake sysfs and /dev
// trees. Asserts the verdict and the cause named in the message for every wrong scenario, silence
// for correct ones, the fail / warn / abort outcomes, profiler-only mode, the control record, and
// that the user's NCCL_DEBUG output (unset, WARN, INFO, INFO + NCCL_DEBUG_FILE with %p) is the
// same with and without sentinel.
//
// Byte-identity: every rank's stdout and debug file are compared after masking only what differs
// between any two runs of the same program: the pid and tid fields of the line prefix, the
// `comm 0x...` / `parent 0x...` heap pointers, the WARN timestamp and the Init timings figures.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/guard/fake_sysfs.h"

namespace sentinel::testing {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;
using HostFn = void (*)(FakeSysfs*);

constexpr int kInvalidUsage = 5;

// ---- Hosts (fake sysfs + /dev) ----------------------------------------------------------------

void IbNics(FakeSysfs* fs, int n, const char* rate = "400 Gb/sec (4X NDR)") {
  for (int i = 0; i < n; ++i) fs->AddActiveIb("mlx5_" + std::to_string(i), rate);
  fs->AddUverbs(n);
}
void HostIb1(FakeSysfs* fs) { IbNics(fs, 1); }
void HostIb1Peermem(FakeSysfs* fs) {
  IbNics(fs, 1);
  fs->AddPeermem();
}
void HostIb4(FakeSysfs* fs) { IbNics(fs, 4); }
void HostIb8Peermem(FakeSysfs* fs) {
  IbNics(fs, 8);
  fs->AddPeermem();
}
void HostIbNoDev(FakeSysfs* fs) { fs->AddActiveIb("mlx5_0"); }  // no /dev/infiniband
void HostIbDown(FakeSysfs* fs) {
  fs->AddPort("mlx5_0", 1, "1: DOWN", "3: Disabled", "10 Gb/sec (4X SDR)", "InfiniBand");
  fs->AddPort("mlx5_1", 1, "1: DOWN", "2: Polling", "10 Gb/sec (4X SDR)", "InfiniBand");
  fs->AddUverbs(2);
}
void HostIb1x(FakeSysfs* fs) {
  fs->AddActiveIb("mlx5_0");
  fs->AddActiveIb("mlx5_1", "100 Gb/sec (1X NDR)");
  fs->AddUverbs(2);
}
void HostIbHalfSpeed(FakeSysfs* fs) {
  fs->AddActiveIb("mlx5_0");
  fs->AddActiveIb("mlx5_1", "200 Gb/sec (4X HDR)");
  fs->AddUverbs(2);
}
void HostRoce2(FakeSysfs* fs) {
  fs->AddActiveRoce("mlx5_0", "200 Gb/sec (4X HDR)");
  fs->AddActiveRoce("mlx5_1", "200 Gb/sec (4X HDR)");
  fs->AddUverbs(2);
}
void HostNoRdma(FakeSysfs* fs) { (void)fs; }
// The fake NCCL gives local rank r the GPU busId (0x18 + r) * 0x1000: 0000:18:00.0, 0000:19:00.0.
// Both GPUs sit on NUMA node 0 (root complex pci0000:16, one PCIe switch per GPU).
void TwoGpusOnNuma0(FakeSysfs* fs) {
  fs->AddPciDevice("pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:00.0", 0);
  fs->AddPciDevice("pci0000:16/0000:16:03.0/0000:20:00.0/0000:19:00.0", 0);
}
// Wrong: the only NIC is on the other socket (NUMA node 1).
void HostNicOnOtherSocket(FakeSysfs* fs) {
  TwoGpusOnNuma0(fs);
  fs->LinkNicToPci("mlx5_0", "pci0000:97/0000:97:02.0/0000:98:00.0", 1);
  IbNics(fs, 1);
}
// Right: each GPU shares its PCIe switch with a NIC.
void HostNicPerSwitch(FakeSysfs* fs) {
  TwoGpusOnNuma0(fs);
  fs->LinkNicToPci("mlx5_0", "pci0000:16/0000:16:02.0/0000:17:00.0/0000:1a:00.0", 0);
  fs->LinkNicToPci("mlx5_1", "pci0000:16/0000:16:03.0/0000:20:00.0/0000:21:00.0", 0);
  IbNics(fs, 2);
}

// ---- Scenarios ---------------------------------------------------------------------------------

enum class FailsAt { kNothing, kInit, kFirstCollective };

struct Case {
  const char* name;
  const char* expect;
  HostFn host;
  Env env;  // NCCL_* (the user's) and FAKE_NCCL_* (what the fake node is)
  int nranks = 2;
  int run = -1;  // ranks that run (-1: all); fewer skip the collective
  FailsAt fails_at = FailsAt::kInit;
  std::vector<std::string> message_has;  // the term and the cause, in the interposer's message
  std::vector<std::string>
      profiler_has;  // profiler-only mode: what it can still tell ({}: nothing)
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }
std::string CaseName(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

const std::vector<Case>& WrongCases() {
  static const auto* cases = new std::vector<Case>{
      {"IbExpectedSocketNoDevInfiniband",
       "net=ib",
       HostIbNoDev,
       {{"FAKE_NCCL_NET", "socket"}},
       2,
       -1,
       FailsAt::kInit,
       {"[transport] net=ib", "using network 'Socket'", "the container has no /dev/infiniband"},
       {"the container has no /dev/infiniband"}},
      {"IbDisabledByEnv",
       "net=ib",
       HostIb1,
       {{"NCCL_IB_DISABLE", "1"}},
       2,
       -1,
       FailsAt::kInit,
       {"[transport] net=ib", "using network 'Socket'", "NCCL_IB_DISABLE=1 is set"},
       {"NCCL_IB_DISABLE=1 is set"}},
      {"NcclNetSocket",
       "net=ib",
       HostIb1,
       {{"NCCL_NET", "Socket"}},
       2,
       -1,
       FailsAt::kInit,
       {"[transport] net=ib", "using network 'Socket'", "NCCL_NET=Socket forces"},
       {"NCCL_NET=Socket forces"}},
      {"IbHcaMatchesNoDevice",
       "net=ib",
       HostIb1,
       {{"NCCL_IB_HCA", "mlx4"}},
       2,
       -1,
       FailsAt::kInit,
       {"[transport] net=ib", "NET/IB : No device found.", "NCCL_IB_HCA=mlx4 matches no device"},
       {"NCCL_IB_HCA=mlx4 matches no device"}},
      {"EveryPortDown",
       "net=ib",
       HostIbDown,
       {{"FAKE_NCCL_NET", "socket"}, {"FAKE_NCCL_NICS", "mlx5_0,mlx5_1"}},
       2,
       -1,
       FailsAt::kInit,
       {"[transport] net=ib", "every RDMA port is down", "mlx5_1:1 state '1: DOWN'"},
       {"every RDMA port is down"}},
      {"PortTrainedAt1x",
       "net=ib link_gbps>=400",
       HostIb1x,
       {{"FAKE_NCCL_NICS", "mlx5_0,mlx5_1"}},
       2,
       -1,
       FailsAt::kInit,
       {"[link degraded] link_gbps>=400", "mlx5_1:1 at 100 Gb/s", "mlx5_1:1 trained at 1X width"},
       {"mlx5_1:1 trained at 1X width"}},
      {"PortAtHalfSpeed",
       "net=ib link_gbps>=400",
       HostIbHalfSpeed,
       {{"FAKE_NCCL_NICS", "mlx5_0,mlx5_1"}},
       2,
       -1,
       FailsAt::kInit,
       {"[link degraded] link_gbps>=400", "mlx5_1:1 at 200 Gb/s", "trained at a lower speed (HDR"},
       {"trained at a lower speed (HDR"}},
      {"RoceExpectedIbFound",
       "net=roce",
       HostIb1,
       {},
       2,
       -1,
       FailsAt::kInit,
       {"[transport] net=roce", "native InfiniBand", "mlx5_0:1/IB"},
       {"native InfiniBand"}},
      {"IbExpectedRoceFound",
       "net=ib",
       HostRoce2,
       {{"FAKE_NCCL_NET", "roce"}, {"FAKE_NCCL_NICS", "mlx5_0,mlx5_1"}},
       2,
       -1,
       FailsAt::kInit,
       {"[transport] net=ib", "RoCE (Ethernet link layer)", "configured as Ethernet (RoCE)"},
       {"configured as Ethernet (RoCE)"}},
      {"GdrExpectedNotInUse",
       "net=ib gdr=on",
       HostIb1,
       {{"FAKE_NCCL_GDR", "off"}, {"FAKE_NCCL_NODES", "2"}},
       2,
       -1,
       FailsAt::kFirstCollective,
       {"[transport] gdr=on", "without GPUDirect RDMA",
        "nvidia_peermem kernel module is not loaded",
        "at the first ncclAllReduce (runtime connect)"},
       {}},
      {"P2pExpectedShmFoundP2pDisabled",
       "intra=p2p",
       HostIb1,
       {{"NCCL_P2P_DISABLE", "1"}, {"FAKE_NCCL_INTRA", "shm"}},
       2,
       -1,
       FailsAt::kFirstCollective,
       {"[transport] intra=p2p", "via SHM", "NCCL_P2P_DISABLE=1 turns GPU peer-to-peer off"},
       {}},
      {"P2pExpectedShmFoundNoPeerAccess",
       "intra=p2p",
       HostIb1,
       {{"FAKE_NCCL_INTRA", "shm"}},
       2,
       -1,
       FailsAt::kFirstCollective,
       {"[transport] intra=p2p", "via SHM", "the GPUs cannot reach each other peer-to-peer"},
       {}},
      {"SixteenRanksOnSixteenNodes",
       "ranks_per_node>=8",
       HostIb1,
       {{"FAKE_NCCL_NODES", "16"}},
       16,
       1,
       FailsAt::kInit,
       {"[placement] ranks_per_node>=8", "16 ranks spread over 16 nodes", "at most 2 node(s)",
        "--ntasks-per-node"},
       {"16 ranks spread over 16 nodes"}},
      {"FewerNicsThanExpected",
       "net=ib nics>=8",
       HostIb4,
       {{"FAKE_NCCL_NICS", "mlx5_0,mlx5_1,mlx5_2,mlx5_3"}},
       2,
       -1,
       FailsAt::kInit,
       {"[transport] nics>=8", "4 NIC port(s) in use", "this host has only 4 RDMA port(s)"},
       {"this host has only 4 RDMA port(s)"}},
      {"ExternalPluginNotLoaded",
       "net=IBext_v8",
       HostIb1,
       {},
       2,
       -1,
       FailsAt::kInit,
       {"[transport] net=IBext_v8", "'IBext_v8' is not in use",
        "the external net plugin is not loaded: NCCL_NET_PLUGIN is unset"},
       {}},
      {"ExternalPluginFailedToInitialise",
       "net=IBext_v8",
       HostIb1,
       {{"NCCL_NET_PLUGIN", "IBext_v8"},
        {"FAKE_NCCL_NET", "IBext_v8"},
        {"FAKE_NCCL_EXT_PLUGIN_FAILS", "on"}},
       2,
       -1,
       FailsAt::kInit,
       {"[transport] net=IBext_v8", "using network 'Socket'", "was found but failed to initialise"},
       {}},
      // GPU<->NIC affinity from sysfs: the NIC sits on the other NUMA node (no Init line, hence
      // no busId, in profiler-only mode: unverified there).
      {"NicOnTheOtherNumaNode",
       "net=ib affinity=numa",
       HostNicOnOtherSocket,
       {},
       2,
       -1,
       FailsAt::kInit,
       {"[placement] affinity=numa", "(NUMA node 0, ", "/sys/devices/pci0000:16/0000:16:0",
        "the NIC NCCL uses, mlx5_0 (NUMA node 1, ",
        "/sys/devices/pci0000:97/0000:97:02.0/0000:98:00.0", "different NUMA nodes",
        "no NIC of this host is close to GPU 0000:1", "CUDA_VISIBLE_DEVICES", "NCCL_TOPO_FILE"},
       {}},
  };
  return *cases;
}

const std::vector<Case>& CorrectCases() {
  static const auto* cases = new std::vector<Case>{
      // The documented example, exactly as written: 16 ranks, 8 per node, 8 NDR NICs, GDR, P2P.
      {"FullExpectationAsWritten",
       "net=ib gdr=on intra=p2p ranks_per_node>=8 link_gbps>=400 nics>=8",
       HostIb8Peermem,
       {{"FAKE_NCCL_NODES", "2"},
        {"FAKE_NCCL_NICS", "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7"}},
       16,
       -1,
       FailsAt::kNothing,
       {},
       {}},
      {"SocketOnHostWithoutRdma",
       "net=socket",
       HostNoRdma,
       {{"FAKE_NCCL_NET", "socket"}, {"FAKE_NCCL_NODES", "2"}},
       2,
       -1,
       FailsAt::kNothing,
       {},
       {}},
      {"RoceAt200",
       "net=roce link_gbps>=200 nics=2",
       HostRoce2,
       {{"FAKE_NCCL_NET", "roce"}, {"FAKE_NCCL_NICS", "mlx5_0,mlx5_1"}, {"FAKE_NCCL_NODES", "2"}},
       4,
       -1,
       FailsAt::kNothing,
       {},
       {}},
      {"ExternalPluginWithGdr",
       "net=IBext_v8 gdr=on",
       HostIb1Peermem,
       {{"NCCL_NET_PLUGIN", "IBext_v8"}, {"FAKE_NCCL_NET", "IBext_v8"}, {"FAKE_NCCL_NODES", "2"}},
       2,
       -1,
       FailsAt::kNothing,
       {},
       {}},
      {"ShmExpected",
       "intra=shm",
       HostIb1,
       {{"FAKE_NCCL_INTRA", "shm"}},
       2,
       -1,
       FailsAt::kNothing,
       {},
       {}},
      {"GdrOffExpected",
       "net=ib gdr=off nics=1 ports=active",
       HostIb1,
       {{"FAKE_NCCL_GDR", "off"}, {"FAKE_NCCL_NODES", "2"}},
       2,
       -1,
       FailsAt::kNothing,
       {},
       {}},
      {"SmallCommunicatorAcrossNodes",
       "ranks_per_node>=8",
       HostIb1,
       {{"FAKE_NCCL_NODES", "2"}},
       2,
       -1,
       FailsAt::kNothing,
       {},
       {}},
      {"IbHcaSubset",
       "net=ib nics=2 link_gbps>=400",
       HostIb4,
       {{"NCCL_IB_HCA", "=mlx5_1,mlx5_3"},
        {"FAKE_NCCL_NICS", "mlx5_0,mlx5_1,mlx5_2,mlx5_3"},
        {"FAKE_NCCL_NODES", "2"}},
       4,
       -1,
       FailsAt::kNothing,
       {},
       {}},
      {"GpuAndNicShareAPcieSwitch",
       "net=ib nics=2 affinity=pcie",
       HostNicPerSwitch,
       {{"FAKE_NCCL_NICS", "mlx5_0,mlx5_1"}},
       2,
       -1,
       FailsAt::kNothing,
       {},
       {}},
  };
  return *cases;
}

// ---- Running the driver ------------------------------------------------------------------------

enum class Debug { kUnset, kWarn, kInfo, kInfoFile };
constexpr Debug kAllDebug[] = {Debug::kUnset, Debug::kWarn, Debug::kInfo, Debug::kInfoFile};
const char* DebugName(Debug d) {
  switch (d) {
    case Debug::kUnset:
      return "NCCL_DEBUG unset";
    case Debug::kWarn:
      return "NCCL_DEBUG=WARN";
    case Debug::kInfo:
      return "NCCL_DEBUG=INFO";
    case Debug::kInfoFile:
      return "NCCL_DEBUG=INFO + NCCL_DEBUG_FILE";
  }
  return "?";
}

enum class Load { kNone, kPreload, kProfilerOnly, kBoth };

struct RunOptions {
  Load load = Load::kPreload;
  const char* mode = nullptr;  // SENTINEL_ON_MISMATCH; null: unset (fail)
  Debug debug = Debug::kUnset;
  std::string api = "rank";
  int split_mod = 1;
  bool dump = false;
  bool env_expect = true;  // false: no SENTINEL_EXPECT (the node default from sentineld applies)
  std::string socket;      // SENTINEL_SOCKET; empty: a path where no sentineld listens
  Env extra;
};

struct RankResult {
  int init = -1;
  int coll = -1;
  int destroy = -1;
  int exit_code = -1;
  int signal = 0;
  std::string out;
  std::string err;
  std::string debug_file;  // Debug::kInfoFile only
  std::string dump;        // RunOptions::dump only
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ShortHost() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  if (char* dot = std::strchr(host, '.')) *dot = '\0';
  return host;
}

int FieldAfter(const std::string& text, const std::string& key) {
  size_t p = text.find(key + "=");
  return p == std::string::npos ? -1 : std::atoi(text.c_str() + p + key.size() + 1);
}

class Job {
 public:
  // Every run of a job uses the same unique id (so commIds compare equal); jobs, and test
  // processes running side by side, get distinct ids (the fake's barriers are keyed by it).
  explicit Job(const Case& c)
      : c_(c), seed_(static_cast<unsigned long long>(getpid()) << 20 | ++jobs_) {
    c_.host(&fs_);
  }
  const FakeSysfs& fs() const { return fs_; }
  // A short directory of this job (socket paths must fit 108 bytes).
  std::string Dir() const { return fs_.sys() + "/.."; }

  std::vector<RankResult> Run(const RunOptions& o) {
    std::string out = fs_.sys() + "/../run" + std::to_string(++runs_);
    mkdir(out.c_str(), 0755);
    std::map<std::string, std::string> env;
    env["PATH"] = "/usr/bin:/bin";
    for (const char* pass :
         {"TMPDIR", "LD_LIBRARY_PATH", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"}) {
      if (const char* v = getenv(pass)) env[pass] = v;
    }
    // An instrumented .so preloaded ahead of the instrumented driver is fine: one runtime.
    const char* asan = getenv("ASAN_OPTIONS");
    env["ASAN_OPTIONS"] = std::string(asan != nullptr ? asan : "") +
                          (asan != nullptr && *asan != '\0' ? ":" : "") +
                          "verify_asan_link_order=0";
    env["SENTINEL_VERBS"] = "0";  // this machine's libibverbs must not decide the verdicts
    env["SENTINEL_SYSFS_ROOT"] = fs_.sys();
    env["SENTINEL_DEVFS_ROOT"] = fs_.dev();
    env["SENTINEL_SOCKET"] = o.socket.empty() ? out + "/no-sentineld.sock" : o.socket;
    env["FAKE_NCCL_BARRIER_TIMEOUT_S"] = "20";
    for (const auto& kv : c_.env) env[kv.first] = kv.second;
    for (const auto& kv : o.extra) env[kv.first] = kv.second;
    if (o.load != Load::kNone && o.env_expect) env["SENTINEL_EXPECT"] = c_.expect;
    if (o.mode != nullptr) env["SENTINEL_ON_MISMATCH"] = o.mode;
    if (o.load == Load::kPreload || o.load == Load::kBoth) env["LD_PRELOAD"] = SENTINEL_PLUGIN_SO;
    if (o.load == Load::kProfilerOnly || o.load == Load::kBoth) {
      env["NCCL_PROFILER_PLUGIN"] = SENTINEL_PLUGIN_SO;
    }
    if (o.dump) env["SENTINEL_DUMP"] = out + "/dump.%p.jsonl";
    switch (o.debug) {
      case Debug::kUnset:
        break;
      case Debug::kWarn:
        env["NCCL_DEBUG"] = "WARN";
        break;
      case Debug::kInfo:
        env["NCCL_DEBUG"] = "INFO";
        break;
      case Debug::kInfoFile:
        env["NCCL_DEBUG"] = "INFO";
        env["NCCL_DEBUG_FILE"] = out + "/nccl.%h.%p.log";
        break;
    }
    std::vector<std::string> args = {
        SENTINEL_GUARD_DRIVER, "--out", out,   "--nranks",    std::to_string(c_.nranks),  "--seed",
        std::to_string(seed_), "--api", o.api, "--split-mod", std::to_string(o.split_mod)};
    if (c_.run >= 0) {
      args.push_back("--run");
      args.push_back(std::to_string(c_.run));
    }
    std::vector<std::string> env_strings;
    for (const auto& kv : env) env_strings.push_back(kv.first + "=" + kv.second);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(&a[0]);
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (std::string& e : env_strings) envp.push_back(&e[0]);
    envp.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "driver status " << status;

    std::vector<RankResult> ranks;
    std::istringstream report(ReadAll(out + "/report.txt"));
    std::string line;
    while (std::getline(report, line)) {
      RankResult r;
      int rank = -1;
      int rank_pid = 0;
      char what[16] = {0};
      int value = 0;
      if (std::sscanf(line.c_str(), "rank %d pid %d %15s %d", &rank, &rank_pid, what, &value) !=
          4) {
        continue;
      }
      if (std::strcmp(what, "signal") == 0) {
        r.signal = value;
      } else {
        r.exit_code = value;
      }
      std::string base = out + "/rank" + std::to_string(rank);
      std::string res = ReadAll(base + ".res");
      r.init = FieldAfter(res, "init");
      r.coll = FieldAfter(res, "coll");
      r.destroy = FieldAfter(res, "destroy");
      r.out = ReadAll(base + ".out");
      r.err = ReadAll(base + ".err");
      if (o.debug == Debug::kInfoFile) {
        r.debug_file =
            ReadAll(out + "/nccl." + ShortHost() + "." + std::to_string(rank_pid) + ".log");
      }
      if (o.dump) r.dump = ReadAll(out + "/dump." + std::to_string(rank_pid) + ".jsonl");
      ranks.push_back(r);
    }
    int expected = o.api == "all" ? 1 : (c_.run >= 0 ? c_.run : c_.nranks);
    EXPECT_EQ(static_cast<int>(ranks.size()), expected) << "ranks reported in " << out;
    return ranks;
  }

 private:
  static inline int jobs_ = 0;
  Case c_;
  unsigned long long seed_;
  FakeSysfs fs_;
  int runs_ = 0;
};

// Masks what differs between two runs of the same program (see the file comment). Hand-written
// rather than std::regex, whose libstdc++ 12 headers trip -Wmaybe-uninitialized under ASan.
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f'); }

// "[YYYY-MM-DD HH:MM:SS] " at the start of a WARN line.
void MaskStamp(std::string* line) {
  if (line->size() >= 22 && (*line)[0] == '[' && (*line)[20] == ']' && (*line)[21] == ' ' &&
      IsDigit((*line)[1])) {
    line->replace(0, 22, "[TIME] ");
  }
}

// "host:pid:tid [" -> "host:PID:TID [".
void MaskPidTid(std::string* line) {
  size_t start = line->compare(0, 7, "[TIME] ") == 0 ? 7 : 0;  // after a WARN timestamp
  size_t c1 = line->find(':', start);
  if (c1 == std::string::npos || line->find(' ', start) < c1) return;
  size_t p = c1 + 1;
  size_t b1 = p;
  while (p < line->size() && IsDigit((*line)[p])) ++p;
  if (p == b1 || p >= line->size() || (*line)[p] != ':') return;
  size_t b2 = ++p;
  while (p < line->size() && IsDigit((*line)[p])) ++p;
  if (p == b2 || line->compare(p, 2, " [") != 0) return;
  line->replace(c1 + 1, p - c1 - 1, "PID:TID");
}

void MaskPointers(std::string* line) {
  for (const char* key : {"comm 0x", "parent 0x"}) {
    size_t pos = 0;
    while ((pos = line->find(key, pos)) != std::string::npos) {
      size_t b = pos + std::strlen(key);
      size_t e = b;
      while (e < line->size() && IsHex((*line)[e])) ++e;
      line->replace(b, e - b, "PTR");
      pos = b;
    }
  }
}

// Every "<digits>.<2 digits>" of an Init timings line.
void MaskSeconds(std::string* line) {
  if (line->find("Init timings") == std::string::npos) return;
  std::string out;
  size_t i = 0;
  while (i < line->size()) {
    size_t e = i;
    while (e < line->size() && IsDigit((*line)[e])) ++e;
    if (e > i && e + 2 < line->size() && (*line)[e] == '.' && IsDigit((*line)[e + 1]) &&
        IsDigit((*line)[e + 2])) {
      out += "S.SS";
      i = e + 3;
    } else if (e > i) {
      out.append(*line, i, e - i);
      i = e;
    } else {
      out += (*line)[i++];
    }
  }
  *line = out;
}

// The output without the driver's own "app: ..." lines (what NCCL and sentinel printed).
std::string WithoutAppLines(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::string out;
  while (std::getline(in, line)) {
    if (line.rfind("app: ", 0) == 0) continue;
    out += line + "\n";
  }
  return out;
}

// Where `needle` first appears, as a position to compare with another (npos last).
size_t Pos(const std::string& text, const std::string& needle) { return text.find(needle); }

std::string Normalize(const std::string& text) {
  std::istringstream in(text);
  std::string out;
  std::string line;
  while (std::getline(in, line)) {
    MaskStamp(&line);
    MaskPidTid(&line);
    MaskPointers(&line);
    MaskSeconds(&line);
    out += line + "\n";
  }
  if (!text.empty() && text.back() != '\n') out.pop_back();
  return out;
}

TEST(GuardNormalizeTest, MasksOnlyRunDependentFields) {
  EXPECT_EQ(Normalize("vm:123:456 [0] NCCL INFO comm 0x55ab rank 0 nRanks 2\n"),
            "vm:PID:TID [0] NCCL INFO comm 0xPTR rank 0 nRanks 2\n");
  EXPECT_EQ(Normalize("\n[2025-01-02 03:04:05] vm:1:2 [1] a.cc:9 NCCL WARN x 12\n"),
            "\n[TIME] vm:PID:TID [1] a.cc:9 NCCL WARN x 12\n");
  EXPECT_EQ(Normalize("h:1:2 [0] NCCL INFO Init timings - f: rank 0 total 0.01 (kernels 10.00)"),
            "h:PID:TID [0] NCCL INFO Init timings - f: rank 0 total S.SS (kernels S.SS)");
  // Anything else stays: a different commId or message is a difference.
  EXPECT_EQ(Normalize("NCCL version 2.28.9+cuda13.0\nh:1:2 [0] NCCL INFO commId 0x1234\n"),
            "NCCL version 2.28.9+cuda13.0\nh:PID:TID [0] NCCL INFO commId 0x1234\n");
}

// A line of the guard's: "[sentinel <pid>] " and one of the guard's openings (the transport's
// notices carry the same prefix and say nothing about the expectation).
bool HasSentinelOutput(const std::string& s) {
  static const char* const kGuardOpenings[] = {"NCCL transport/placement expectation",
                                               "invalid expectation", "ignoring ",
                                               "unknown on_mismatch", "cannot read "};
  for (size_t at = s.find("[sentinel "); at != std::string::npos;
       at = s.find("[sentinel ", at + 1)) {
    const size_t text = s.find("] ", at);
    if (text == std::string::npos) break;
    for (const char* opening : kGuardOpenings) {
      if (s.compare(text + 2, std::strlen(opening), opening) == 0) return true;
    }
  }
  return false;
}

// ---- Wrong scenarios ---------------------------------------------------------------------------

class WrongScenarioTest : public ::testing::TestWithParam<Case> {};

// fail (the default outcome): the creation call (or the first collective, for paths NCCL connects
// at runtime) returns ncclInvalidUsage with the message; the user's stdout stays empty.
TEST_P(WrongScenarioTest, FailsWithTheCauseNamed) {
  const Case& c = GetParam();
  Job job(c);
  std::vector<RankResult> ranks = job.Run(RunOptions{});
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankResult& r = ranks[i];
    SCOPED_TRACE("rank " + std::to_string(i) + "\n" + r.err);
    EXPECT_EQ(r.exit_code, 0);
    if (c.fails_at == FailsAt::kInit) {
      EXPECT_EQ(r.init, kInvalidUsage);
    } else {
      EXPECT_EQ(r.init, 0);
      EXPECT_EQ(r.coll, kInvalidUsage);
      EXPECT_EQ(r.destroy, 0);
    }
    EXPECT_NE(r.err.find("] NCCL transport/placement expectation NOT MET"), std::string::npos);
    EXPECT_TRUE(HasSentinelOutput(r.err)) << "the silence checks below would see this report";
    EXPECT_NE(r.err.find("outcome: the call returns ncclInvalidUsage"), std::string::npos);
    for (const std::string& s : c.message_has) {
      EXPECT_NE(r.err.find(s), std::string::npos) << "missing: " << s;
    }
    EXPECT_EQ(WithoutAppLines(r.out), "");
  }
}

// warn: the same message, the job continues, and the user's NCCL output is the one they would have
// had without sentinel, at every NCCL_DEBUG setting.
TEST_P(WrongScenarioTest, WarnContinuesAndKeepsTheUserLog) {
  const Case& c = GetParam();
  Job job(c);
  for (Debug d : kAllDebug) {
    SCOPED_TRACE(DebugName(d));
    RunOptions without;
    without.load = Load::kNone;
    without.debug = d;
    RunOptions with;
    with.mode = "warn";
    with.debug = d;
    std::vector<RankResult> base = job.Run(without);
    std::vector<RankResult> warned = job.Run(with);
    ASSERT_EQ(base.size(), warned.size());
    for (size_t i = 0; i < warned.size(); ++i) {
      SCOPED_TRACE("rank " + std::to_string(i));
      EXPECT_EQ(warned[i].init, 0);
      EXPECT_EQ(warned[i].coll, 0);
      EXPECT_EQ(warned[i].destroy, 0);
      EXPECT_NE(warned[i].err.find("outcome: continuing (SENTINEL_ON_MISMATCH=warn)"),
                std::string::npos);
      for (const std::string& s : c.message_has) {
        EXPECT_NE(warned[i].err.find(s), std::string::npos) << "missing: " << s;
      }
      EXPECT_EQ(base[i].err, "");
      EXPECT_EQ(Normalize(warned[i].out), Normalize(base[i].out));
      EXPECT_EQ(Normalize(warned[i].debug_file), Normalize(base[i].debug_file));
      if (d == Debug::kUnset) {
        EXPECT_EQ(WithoutAppLines(warned[i].out), "");
      }
      if (d == Debug::kInfoFile) {
        EXPECT_NE(base[i].debug_file.find("NCCL INFO"), std::string::npos);
        EXPECT_EQ(WithoutAppLines(warned[i].out), "");
      }
    }
  }
}

// Profiler-only mode (NCCL_PROFILER_PLUGIN, no LD_PRELOAD): never fails init; what the plugin can
// still see (environment, host probe, placement) becomes a warning naming the same cause.
TEST_P(WrongScenarioTest, ProfilerOnlyModeWarnsAndNeverFails) {
  const Case& c = GetParam();
  Job job(c);
  RunOptions o;
  o.load = Load::kProfilerOnly;
  std::vector<RankResult> ranks = job.Run(o);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankResult& r = ranks[i];
    SCOPED_TRACE("rank " + std::to_string(i) + "\n" + r.err);
    EXPECT_EQ(r.init, 0);
    EXPECT_EQ(r.destroy, 0);
    if (c.run < 0) {
      EXPECT_EQ(r.coll, 0);
    }
    EXPECT_EQ(r.err.find("outcome: the call returns"), std::string::npos);
    if (c.profiler_has.empty()) continue;
    EXPECT_NE(r.err.find("at profiler init (profiler-only mode: warning only)"), std::string::npos);
    for (const std::string& s : c.profiler_has) {
      EXPECT_NE(r.err.find(s), std::string::npos) << "missing: " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Matrix, WrongScenarioTest, ::testing::ValuesIn(WrongCases()), CaseName);

TEST(GuardScenarioMatrixTest, AtLeastFourteenWrongAndSixCorrectScenarios) {
  EXPECT_GE(WrongCases().size(), 14u);
  EXPECT_GE(CorrectCases().size(), 6u);
}

// ---- Correct scenarios -------------------------------------------------------------------------

class CorrectScenarioTest : public ::testing::TestWithParam<Case> {};

// Silence: ncclSuccess everywhere and, at every NCCL_DEBUG setting, stdout, stderr and the debug
// file exactly as without sentinel.
TEST_P(CorrectScenarioTest, PassesSilently) {
  const Case& c = GetParam();
  Job job(c);
  for (Debug d : kAllDebug) {
    SCOPED_TRACE(DebugName(d));
    RunOptions without;
    without.load = Load::kNone;
    without.debug = d;
    RunOptions with;
    with.debug = d;
    std::vector<RankResult> base = job.Run(without);
    std::vector<RankResult> guarded = job.Run(with);
    ASSERT_EQ(base.size(), guarded.size());
    for (size_t i = 0; i < guarded.size(); ++i) {
      SCOPED_TRACE("rank " + std::to_string(i) + "\n" + guarded[i].err);
      EXPECT_EQ(guarded[i].init, 0);
      EXPECT_EQ(guarded[i].coll, 0);
      EXPECT_EQ(guarded[i].destroy, 0);
      EXPECT_EQ(guarded[i].err, base[i].err);
      // Line for line, in order: NCCL's lines keep their place among the program's own (stdout to
      // a file is block-buffered, which is where forwarding on our own fd went wrong).
      EXPECT_EQ(Normalize(guarded[i].out), Normalize(base[i].out));
      if (d == Debug::kInfo) {
        // The baseline really interleaves (so the comparison above can fail on order).
        const std::string& out = base[i].out;
        std::string r = "app: rank " + std::to_string(i);
        EXPECT_LT(Pos(out, r + " before init"), Pos(out, "NCCL INFO"));
        EXPECT_LT(Pos(out, "NCCL INFO"), Pos(out, r + " after init"));
        EXPECT_LT(Pos(out, r + " after collective"), Pos(out, "Destroy COMPLETE"));
        EXPECT_LT(Pos(out, "Destroy COMPLETE"), Pos(out, r + " after destroy"));
      }
      EXPECT_EQ(Normalize(guarded[i].debug_file), Normalize(base[i].debug_file));
    }
  }
}

TEST_P(CorrectScenarioTest, ProfilerOnlyModeIsSilentToo) {
  Job job(GetParam());
  RunOptions o;
  o.load = Load::kProfilerOnly;
  for (const RankResult& r : job.Run(o)) {
    EXPECT_EQ(r.init, 0);
    EXPECT_EQ(r.coll, 0);
    EXPECT_FALSE(HasSentinelOutput(r.err)) << r.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Matrix, CorrectScenarioTest, ::testing::ValuesIn(CorrectCases()),
                         CaseName);

// ---- Outcomes, APIs, records -------------------------------------------------------------------

const Case& WrongCase(const char* name) {
  for (const Case& c : WrongCases()) {
    if (std::strcmp(c.name, name) == 0) return c;
  }
  std::abort();
}

// abort: the process dies of SIGABRT, the message on its stderr; at init and at runtime connect.
TEST(GuardOutcomeTest, AbortEndsTheProcessWithTheMessage) {
  for (const char* name : {"IbDisabledByEnv", "GdrExpectedNotInUse"}) {
    SCOPED_TRACE(name);
    const Case& c = WrongCase(name);
    Job job(c);
    RunOptions o;
    o.mode = "abort";
    std::vector<RankResult> ranks = job.Run(o);
    for (const RankResult& r : ranks) {
      EXPECT_EQ(r.signal, SIGABRT) << r.err;
      EXPECT_NE(r.err.find("outcome: aborting the process (SENTINEL_ON_MISMATCH=abort)"),
                std::string::npos);
      EXPECT_NE(r.err.find(c.message_has.back()), std::string::npos) << r.err;
      EXPECT_EQ(r.destroy, -1);  // never got there
    }
  }
}

// Every creation API is interposed, each communicator checked once.
TEST(GuardOutcomeTest, EveryCreationApiIsChecked) {
  const Case& c = WrongCase("IbDisabledByEnv");
  for (const char* api : {"config", "scalable", "all"}) {
    SCOPED_TRACE(api);
    Job job(c);
    RunOptions o;
    o.api = api;
    for (const RankResult& r : job.Run(o)) {
      EXPECT_EQ(r.init, kInvalidUsage);
      std::string at =
          std::string("at ncclCommInit") + (std::strcmp(api, "config") == 0     ? "RankConfig)"
                                            : std::strcmp(api, "scalable") == 0 ? "RankScalable)"
                                                                                : "All)");
      EXPECT_NE(r.err.find(at), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("NCCL_IB_DISABLE=1 is set"), std::string::npos);
    }
  }
}

// ncclCommSplit: the parent (4 ranks on 2 nodes) meets ranks_per_node>=2, the split by rank parity
// (2 ranks on 2 nodes) does not, and only the split fails.
TEST(GuardOutcomeTest, SplitIsCheckedOnItsOwn) {
  Case c{
      "Split", "ranks_per_node>=2", HostIb1, {{"FAKE_NCCL_NODES", "2"}}, 4, -1, FailsAt::kInit, {},
      {}};
  Job job(c);
  RunOptions o;
  o.api = "split";
  o.split_mod = 2;
  for (const RankResult& r : job.Run(o)) {
    EXPECT_EQ(r.init, kInvalidUsage) << r.err;
    EXPECT_NE(r.err.find("at ncclCommSplit)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("2 ranks spread over 2 nodes"), std::string::npos);
    EXPECT_EQ(r.err.find("at ncclCommInitRank)"), std::string::npos);
  }
  o.split_mod = 1;  // one color: the split is the parent again, and passes
  for (const RankResult& r : job.Run(o)) {
    EXPECT_EQ(r.init, 0) << r.err;
    EXPECT_EQ(r.coll, 0);
    EXPECT_FALSE(HasSentinelOutput(r.err)) << r.err;
  }
}

TEST(GuardOutcomeTest, InvalidExpectationFailsWithACaret) {
  Case c{"Invalid", "net=ib gdr=maybe", HostIb1, {}, 2, -1, FailsAt::kInit, {}, {}};
  Job job(c);
  for (const RankResult& r : job.Run(RunOptions{})) {
    EXPECT_EQ(r.init, kInvalidUsage);
    EXPECT_NE(r.err.find("invalid expectation: SENTINEL_EXPECT:1:12: unknown value 'maybe'"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("           ^^^^^"), std::string::npos) << r.err;
  }
}

TEST(GuardOutcomeTest, DisableSwitchOnlyForwards) {
  Job job(WrongCase("IbDisabledByEnv"));
  // Every true spelling of the shared rule (common/env_bool.h), not only "1".
  for (const char* value : {"1", "true", "yes", "on", "TRUE"}) {
    RunOptions o;
    o.extra = {{"SENTINEL_DISABLE", value}};
    for (const RankResult& r : job.Run(o)) {
      EXPECT_EQ(r.init, 0) << "SENTINEL_DISABLE=" << value << ": " << r.err;
      EXPECT_EQ(r.coll, 0) << value;
      EXPECT_EQ(r.err, "") << value;
    }
  }
}

// The node default expectation served by a real sentineld (temp socket dir): the job sets no
// SENTINEL_EXPECT, the preloaded plugin reads the `expect` file sentineld published next to its
// socket, and the creation call fails through the fake NCCL naming the node default as the source.
// sentineld's --expect-on-mismatch applies unless the job sets SENTINEL_ON_MISMATCH.
TEST(GuardNodeDefaultTest, SentineldDefaultFailsTheCreationCall) {
#ifndef SENTINELD_PATH
  GTEST_SKIP() << "sentineld is not built (SENTINEL_BUILD_COLLECTOR=OFF)";
#else
  const Case& c = WrongCase("IbDisabledByEnv");
  Job job(c);
  const std::string dir = job.Dir() + "/sd";
  const std::string socket = dir + "/s.sock";
  const std::string port_file = job.Dir() + "/sd.port";
  auto start = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {SENTINELD_PATH, "--socket",    socket,    "--listen",
                                     "127.0.0.1:0",  "--port-file", port_file, "--log-level",
                                     "warn",         "--expect",    c.expect};
    args.insert(args.end(), extra.begin(), extra.end());
    unlink(port_file.c_str());
    pid_t pid = fork();
    if (pid == 0) {
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(&a[0]);
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 200 && access(port_file.c_str(), F_OK) != 0; ++i) usleep(50000);
    EXPECT_EQ(access((dir + "/expect").c_str(), F_OK), 0) << "sentineld did not publish";
    return pid;
  };
  auto stop = [&](pid_t pid) {
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    EXPECT_NE(access((dir + "/expect").c_str(), F_OK), 0) << "not removed at SIGTERM";
  };
  RunOptions o;
  o.env_expect = false;
  o.socket = socket;

  pid_t pid = start({});
  for (const RankResult& r : job.Run(o)) {
    EXPECT_EQ(r.init, kInvalidUsage) << r.err;
    EXPECT_NE(r.err.find("expectation from: node default from sentineld (" + dir + "/expect)"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("NCCL_IB_DISABLE=1 is set"), std::string::npos);
  }
  stop(pid);
  // Without sentineld there is no default: the same job passes, silently.
  for (const RankResult& r : job.Run(o)) {
    EXPECT_EQ(r.init, 0) << r.err;
    EXPECT_FALSE(HasSentinelOutput(r.err)) << r.err;
  }
  pid = start({"--expect-on-mismatch", "warn"});
  for (const RankResult& r : job.Run(o)) {
    EXPECT_EQ(r.init, 0) << r.err;
    EXPECT_NE(r.err.find("outcome: continuing"), std::string::npos) << r.err;
  }
  o.mode = "fail";  // the job's SENTINEL_ON_MISMATCH wins over sentineld's
  for (const RankResult& r : job.Run(o)) EXPECT_EQ(r.init, kInvalidUsage) << r.err;
  stop(pid);
#endif
}

// The verdict reaches the plugin core as a control record (kSentinelWireVerdict = 6), which the
// SENTINEL_DUMP sink writes; in full mode (preload + profiler) and in profiler-only mode.
TEST(GuardRecordTest, VerdictIsEnqueuedAsAControlRecord) {
  for (Load load : {Load::kBoth, Load::kProfilerOnly}) {
    Job job(WrongCase("IbDisabledByEnv"));
    RunOptions o;
    o.load = load;
    o.dump = true;
    for (const RankResult& r : job.Run(o)) {
      EXPECT_EQ(r.init, load == Load::kBoth ? kInvalidUsage : 0) << r.err;
      EXPECT_NE(r.dump.find("{\"type\":\"control\",\"record_type\":6,\"size\":3104}"),
                std::string::npos)
          << r.dump;
    }
  }
}

#if defined(SENTINEL_NET_SO) && defined(FAKE_NET_V8_SO)
// The guard's net evidence from the wrapping net plugin in the job's own processes: NCCL_NET_PLUGIN
// names libnccl-net-sentinel.so, which wraps the v8 fake net plugin (NCCL's v11 table over the
// plugin's v8 one). The fake's NICs run at 100 Gb/s: link_gbps>=400 is a finding naming the device
// in use, known from sentinelNetSnapshot (the log has no speed for it); net=FakeNet holds.
TEST(GuardNetWrapperTest, EvidenceFromTheWrappedOlderPlugin) {
  Case c{"WrappedNetPluginSlowLink",
         "net=FakeNet link_gbps>=400",
         HostIb1,
         {{"NCCL_NET_PLUGIN", SENTINEL_NET_SO},
          {"SENTINEL_NET_WRAP", FAKE_NET_V8_SO},
          {"FAKE_NCCL_NODES", "2"}},
         2,
         -1,
         FailsAt::kFirstCollective,
         {},
         {}};
  Job job(c);
  RunOptions o;
  o.mode = "warn";
  std::vector<RankResult> ranks = job.Run(o);
  ASSERT_EQ(ranks.size(), 2u);
  for (const RankResult& r : ranks) {
    EXPECT_EQ(r.init, 0) << r.err;
    EXPECT_EQ(r.coll, 0) << r.err;
    EXPECT_NE(r.err.find("NCCL uses our ncclNetPlugin_v11 table over FakeNet's v8 table"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("[link degraded] link_gbps>=400"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("net plugin FakeNet reports link speed below 400 Gb/s: fake0 at 100 Gb/s"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("net plugin FakeNet (v8, seen by libnccl-net-sentinel.so)"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("[transport] net=FakeNet"), std::string::npos) << r.err;
  }
}
#endif

}  // namespace
}  // namespace sentinel::testing
