// sentinel-sim's causes of a late rank (sim_causes.h).
#include "tests/sim/sim_causes.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace sentinel::sim {
namespace {

constexpr long kCgroup2Magic = 0x63677270;  // CGROUP2_SUPER_MAGIC
constexpr int kQuotaPeriodUs = 100000;

// A healthy GPU of the fake NVML script (an H100 at work).
constexpr int kSmClockMax = 1980;
constexpr int kPowerLimitMw = 700000;

const char kGemm[] = "_Z11gemm_kernelPKfS0_Pfiii";
const char kAllReduce[] =
    "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";
const char kAllGather[] = "ncclDevKernel_AllGather_RING_LL";
const char kReduceScatter[] = "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL";
const char kBroadcast[] = "ncclDevKernel_Broadcast_RING_LL";
const char kReduce[] = "ncclDevKernel_Reduce_Sum_f32_RING_LL";
const char kSendRecv[] = "ncclDevKernel_SendRecv";

double ThreadCpuS() {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string ErrnoText(int err) { return std::string(strerror(err)); }

// Writes `text` to an existing file (a cgroup's control file); false and why on failure.
bool WriteControl(const std::string& path, const std::string& text, std::string* err) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = "cannot open " + path + ": " + ErrnoText(errno);
    return false;
  }
  const ssize_t n = write(fd, text.data(), text.size());
  const int saved = errno;
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    *err = "cannot write '" + text + "' to " + path + ": " + ErrnoText(saved);
    return false;
  }
  return true;
}

// At most 64 KiB of a small kernel file.
std::string ReadSmall(const std::string& path) {
  std::ifstream in(path);
  std::string out;
  char buf[4096];
  while (out.size() < 65536 && in.read(buf, sizeof(buf)).gcount() > 0) {
    out.append(buf, static_cast<size_t>(in.gcount()));
  }
  return out;
}

bool HasWord(const std::string& list, const std::string& word, char sep) {
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, sep)) {
    while (!item.empty() && (item.back() == '\n' || item.back() == ' ')) item.pop_back();
    if (item == word) return true;
  }
  return false;
}

// This process's cgroup: the v2 path ("0::/path"), or the v1 path of the hierarchy that holds
// `controller`.
std::string OwnCgroupPath(bool v2, const std::string& controller) {
  std::stringstream ss(ReadSmall("/proc/self/cgroup"));
  std::string line;
  while (std::getline(ss, line)) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    if (v2 ? line.compare(0, 3, "0::") == 0 : HasWord(controllers, controller, ',')) {
      return line.substr(b + 1);
    }
  }
  return "";
}

// The mount point and root of the cgroup v1 hierarchy holding `controller`, from mountinfo.
bool FindV1Mount(const std::string& controller, std::string* mount, std::string* root) {
  std::stringstream ss(ReadSmall("/proc/self/mountinfo"));
  std::string line;
  while (std::getline(ss, line)) {
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::stringstream pre(line.substr(0, dash));
    std::stringstream post(line.substr(dash + 3));
    std::string id, parent, dev, mroot, mpoint, fstype, source, super;
    pre >> id >> parent >> dev >> mroot >> mpoint;
    post >> fstype >> source >> super;
    if (fstype == "cgroup" && HasWord(super, controller, ',')) {
      *mount = mpoint;
      *root = mroot;
      return true;
    }
  }
  return false;
}

// Removes the cgroups a launcher killed before its clean-up left behind (its pid is gone).
void SweepStale(const std::string& parent) {
  DIR* d = opendir(parent.c_str());
  if (d == nullptr) return;
  while (const dirent* e = readdir(d)) {
    int pid = 0;
    int rank = 0;
    if (sscanf(e->d_name, "sentinel-sim-%d-r%d", &pid, &rank) != 2 || pid <= 0) continue;
    if (kill(pid, 0) != 0 && errno == ESRCH) {
      if (rmdir((parent + "/" + e->d_name).c_str()) != 0) {
        // Still holds processes: not ours to empty.
      }
    }
  }
  closedir(d);
}

int LastAllowedCpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
  for (int cpu = CPU_SETSIZE - 1; cpu >= 0; --cpu) {
    if (CPU_ISSET(cpu, &set)) return cpu;
  }
  return -1;
}

bool PinSelf(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

// A busy process pinned to `cpu`, dying with the launcher.
pid_t StartHog(int cpu) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(0);
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  if (!PinSelf(cpu)) _exit(1);
  volatile uint64_t spins = 0;
  for (;;) spins = spins + 1;
}

const char* KernelName(const std::string& collective) {
  if (collective == "allgather") return kAllGather;
  if (collective == "reducescatter") return kReduceScatter;
  if (collective == "broadcast") return kBroadcast;
  if (collective == "reduce") return kReduce;
  if (collective == "alltoall" || collective == "sendrecv") return kSendRecv;
  return kAllReduce;
}

}  // namespace

void SpinCpuMs(double ms) {
  if (ms <= 0) return;
  const double end = ThreadCpuS() + ms / 1e3;
  while (ThreadCpuS() < end) {
  }
}

bool GpuTrace::Open(const std::string& path, std::string* err) {
  // The plugin loads the same path (SENTINEL_CUPTI_PATH): the loader hands both the one object.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    *err = std::string("cannot load ") + path + ": " + (e != nullptr ? e : "?");
    return false;
  }
  push_ = reinterpret_cast<PushFn>(dlsym(h, "fake_cupti_push_kernel"));
  now_ = reinterpret_cast<NowFn>(dlsym(h, "cuptiGetTimestamp"));
  if (push_ == nullptr || now_ == nullptr) {
    push_ = nullptr;
    *err = path + " is not the fake libcupti (no fake_cupti_push_kernel)";
    return false;
  }
  return true;
}

uint64_t GpuTrace::Now() const {
  uint64_t t = 0;
  if (now_ == nullptr || now_(&t) != 0) return 0;
  return t;
}

void GpuTrace::Compute(uint64_t start, uint64_t end) {
  if (push_ != nullptr && end > start) push_(start, end, 7, kGemm, 0, ++correlation_);
}

void GpuTrace::Collective(const std::string& name, int comm, uint64_t start, uint64_t end) {
  if (push_ != nullptr && end > start) {
    push_(start, end, 13 + static_cast<uint32_t>(comm), KernelName(name), 0, ++correlation_);
  }
}

std::string NvmlScriptText(const Options& o, int node, const std::vector<pid_t>& pids,
                           double elapsed_s) {
  const int rpn = RanksPerNode(o);
  char head[96];
  snprintf(head, sizeof(head), "# sentinel-sim: node %d, %.1f s into the job\n", node, elapsed_s);
  std::string out = head;
  for (int r = node * rpn; r < std::min(o.ranks, (node + 1) * rpn); ++r) {
    const int index = r - node * rpn;
    int sm_clock = kSmClockMax;
    unsigned reasons = 0;
    int temp = 45;
    int power_mw = 300000;
    for (const GpuSlow& g : o.gpu_slow) {
      if (g.rank != r || elapsed_s < g.from_s) continue;
      // The same kernels P % longer: the SM clock in proportion.
      sm_clock = static_cast<int>(std::lround(kSmClockMax / (1 + g.pct / 100)));
      if (g.reason == SlowReason::kPowerCap) {
        reasons |= 0x4;  // SW power cap
        power_mw = kPowerLimitMw;
      } else if (g.reason == SlowReason::kThermal) {
        reasons |= 0x20 | 0x40;  // SW and HW thermal slowdown
        temp = 92;
      } else {
        reasons |= 0x8;  // HW slowdown
      }
    }
    char line[512];
    const pid_t pid = static_cast<size_t>(r) < pids.size() ? pids[static_cast<size_t>(r)] : 0;
    snprintf(line, sizeof(line),
             "gpu index=%d bus=0000:%02x:00.0 uuid=GPU-00000000-0000-0000-%04x-%012x sm_clock=%d "
             "sm_clock_max=%d reasons=0x%x temp=%d power_mw=%d power_limit_mw=%d pcie_gen=5 "
             "pcie_gen_max=5 pcie_width=16 pcie_width_max=16 replay=0 ecc_corrected=0 "
             "ecc_uncorrected=0 retired_pending=0",
             index, 0x18 + index, node, r, sm_clock, kSmClockMax, reasons, temp, power_mw,
             kPowerLimitMw);
    out += line;
    // A process the driver does not run yet is not listed (NVML lists running contexts only).
    out += " pids=" + (pid > 0 ? std::to_string(pid) : std::string());
    out += "\n";
  }
  return out;
}

bool WriteFileAtomically(const std::string& path, const std::string& text, std::string* err) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *err = "cannot create " + tmp + ": " + ErrnoText(errno);
    return false;
  }
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int saved = errno;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    *err = "cannot write " + path + ": " + ErrnoText(ok ? errno : saved);
    return false;
  }
  return true;
}

CauseRunner::~CauseRunner() { Finish(); }

bool CauseRunner::Setup(std::string* err) {
  pids_.assign(static_cast<size_t>(o_.ranks), -1);
  for (const CpuHog& h : o_.cpu_hogs) {
    const int cpu = h.cpu >= 0 ? h.cpu : LastAllowedCpu();
    cpu_set_t set;
    CPU_ZERO(&set);
    if (cpu < 0 || sched_getaffinity(0, sizeof(set), &set) != 0 || !CPU_ISSET(cpu, &set)) {
      *err = "--cpu-hog: CPU " + std::to_string(cpu) + " is not one this process may use";
      return false;
    }
    hog_cpu_.push_back(cpu);
    hogs_.push_back(-1);
  }
  for (const CpuQuota& q : o_.cpu_quotas) {
    if (!MakeCgroup(q.rank, err)) return false;
    quota_set_.push_back(false);
  }
  slow_shown_.assign(o_.gpu_slow.size(), false);
  return true;
}

bool CauseRunner::MakeCgroup(int rank, std::string* err) {
  struct statfs fs;
  const bool v2 =
      statfs("/sys/fs/cgroup", &fs) == 0 && static_cast<long>(fs.f_type) == kCgroup2Magic;
  std::string parent;
  if (v2) {
    parent = "/sys/fs/cgroup" + OwnCgroupPath(true, "");
    const std::string controllers = ReadSmall(parent + "/cgroup.controllers");
    if (!HasWord(controllers, "cpu", ' ')) {
      *err = "--cpu-quota: the cpu controller is not available in " + parent +
             " (cgroup.controllers: '" + controllers + "')";
      return false;
    }
    if (!HasWord(ReadSmall(parent + "/cgroup.subtree_control"), "cpu", ' ') &&
        !WriteControl(parent + "/cgroup.subtree_control", "+cpu", err)) {
      *err = "--cpu-quota: " + *err +
             " (a cgroup that holds processes cannot hand controllers to a child: run the sim in"
             " a cgroup of its own with the cpu controller delegated)";
      return false;
    }
  } else {
    std::string mount, root;
    if (!FindV1Mount("cpu", &mount, &root)) {
      *err = "--cpu-quota: /sys/fs/cgroup is not cgroup2 and no cgroup v1 cpu hierarchy is mounted";
      return false;
    }
    std::string own = OwnCgroupPath(false, "cpu");
    if (root != "/" && own.compare(0, root.size(), root) == 0) own = own.substr(root.size());
    parent = mount + (own == "/" ? "" : own);
    if (access((parent + "/cpu.cfs_quota_us").c_str(), W_OK) != 0) {
      *err = "--cpu-quota: cgroup v1 cpu hierarchy " + parent + " has no writable cpu.cfs_quota_us";
      return false;
    }
  }
  SweepStale(parent);
  Cgroup cg;
  cg.rank = rank;
  cg.v2 = v2;
  cg.dir = parent + "/sentinel-sim-" + std::to_string(getpid()) + "-r" + std::to_string(rank);
  if (mkdir(cg.dir.c_str(), 0755) != 0) {
    *err = "--cpu-quota: cannot create " + cg.dir + ": " + ErrnoText(errno);
    return false;
  }
  cgroups_.push_back(cg);
  // No limit until from-s: the rank starts healthy in the cgroup it keeps.
  const bool ok =
      v2 ? WriteControl(cg.dir + "/cpu.max", "max " + std::to_string(kQuotaPeriodUs), err)
         : WriteControl(cg.dir + "/cpu.cfs_period_us", std::to_string(kQuotaPeriodUs), err) &&
               WriteControl(cg.dir + "/cpu.cfs_quota_us", "-1", err);
  if (!ok) *err = "--cpu-quota: " + *err;
  return ok;
}

void CauseRunner::InChild(int rank) const {
  for (size_t i = 0; i < o_.cpu_hogs.size(); ++i) {
    if (o_.cpu_hogs[i].rank == rank && !PinSelf(hog_cpu_[i])) _exit(4);
  }
}

bool CauseRunner::Started(int rank, pid_t pid, std::string* err) {
  pids_[static_cast<size_t>(rank)] = pid;
  for (const Cgroup& cg : cgroups_) {
    if (cg.rank == rank && !WriteControl(cg.dir + "/cgroup.procs", std::to_string(pid), err)) {
      *err = "--cpu-quota: cannot move rank " + std::to_string(rank) + ": " + *err;
      return false;
    }
  }
  return true;
}

void CauseRunner::WriteNvmlScripts(double elapsed_s, std::vector<std::string>* lines) {
  for (int node = 0; node < static_cast<int>(o_.nvml_scripts.size()); ++node) {
    std::string err;
    const std::string& path = o_.nvml_scripts[static_cast<size_t>(node)];
    if (!WriteFileAtomically(path, NvmlScriptText(o_, node, pids_, elapsed_s), &err)) {
      lines->push_back("--nvml-script: " + err);
    }
  }
}

std::vector<std::string> CauseRunner::Tick(double elapsed_s) {
  std::vector<std::string> lines;
  char line[256];
  bool nvml_due = !nvml_written_;
  for (size_t i = 0; i < o_.gpu_slow.size(); ++i) {
    if (!slow_shown_[i] && elapsed_s >= o_.gpu_slow[i].from_s) {
      slow_shown_[i] = true;
      nvml_due = true;
    }
  }
  if (nvml_due && !o_.nvml_scripts.empty()) {
    WriteNvmlScripts(elapsed_s, &lines);
    snprintf(line, sizeof(line), "%.1f s: NVML scripts written", elapsed_s);
    lines.emplace_back(line);
  }
  nvml_written_ = true;
  for (size_t i = 0; i < o_.cpu_hogs.size(); ++i) {
    if (hogs_[i] < 0 && elapsed_s >= o_.cpu_hogs[i].from_s) {
      hogs_[i] = StartHog(hog_cpu_[i]);
      snprintf(line, sizeof(line), "%.1f s: cpu hog pid %d on CPU %d beside rank %d", elapsed_s,
               static_cast<int>(hogs_[i]), hog_cpu_[i], o_.cpu_hogs[i].rank);
      lines.emplace_back(line);
    }
  }
  for (size_t i = 0; i < o_.cpu_quotas.size(); ++i) {
    const CpuQuota& q = o_.cpu_quotas[i];
    if (quota_set_[i] || elapsed_s < q.from_s) continue;
    quota_set_[i] = true;
    const Cgroup& cg = cgroups_[i];
    const long quota = std::max(1000L, std::lround(q.cpus * kQuotaPeriodUs));
    std::string err;
    const bool ok =
        cg.v2 ? WriteControl(cg.dir + "/cpu.max",
                             std::to_string(quota) + " " + std::to_string(kQuotaPeriodUs), &err)
              : WriteControl(cg.dir + "/cpu.cfs_quota_us", std::to_string(quota), &err);
    snprintf(line, sizeof(line), "%.1f s: rank %d limited to %.2f CPUs in %s%s%s", elapsed_s,
             q.rank, q.cpus, cg.dir.c_str(), ok ? "" : ": FAILED: ", ok ? "" : err.c_str());
    lines.emplace_back(line);
  }
  return lines;
}

void CauseRunner::Finish() {
  for (pid_t& hog : hogs_) {
    if (hog > 0) {
      kill(hog, SIGKILL);
      waitpid(hog, nullptr, 0);
    }
    hog = 0;  // never started again
  }
  for (Cgroup& cg : cgroups_) {
    if (cg.dir.empty()) continue;
    // A rank that just exited may leave its cgroup populated for a moment.
    for (int attempt = 0; attempt < 50 && rmdir(cg.dir.c_str()) != 0 && errno == EBUSY; ++attempt) {
      usleep(20000);
    }
    cg.dir.clear();
  }
}

}  // namespace sentinel::sim
