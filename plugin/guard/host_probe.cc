// sysfs / /dev / libibverbs probe (docs/cupti-verbs-facts.md "3.1 Listing devices",
// "3.4 Link rate", "3.8 GPUDirect RDMA detection", "4.1 Port files").
#include "plugin/guard/host_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "absl/base/attributes.h"

#include "common/sentinel_env.h"
#include "plugin/base/no_destructor.h"

namespace sentinel::guard {
namespace {

std::string ReadSmallFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::string();
  char buf[256];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return std::string();
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return names;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    names.emplace_back(e->d_name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

// "4: ACTIVE" -> 4
int LeadingInt(const std::string& s) {
  if (s.empty()) return -1;
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  return end == s.c_str() ? -1 : static_cast<int>(v);
}

double LaneSpeed(const std::string& name) {
  struct Speed {
    const char* name;
    double gbps;
  };
  static constexpr Speed kSpeeds[] = {{"SDR", 2.5},  {"DDR", 5},   {"QDR", 10},
                                      {"FDR10", 10}, {"FDR", 14},  {"EDR", 25},
                                      {"HDR", 50},   {"NDR", 100}, {"XDR", 200}};
  for (const Speed& s : kSpeeds) {
    if (name == s.name) return s.gbps;
  }
  return 0;
}

}  // namespace

double ParseRate(const std::string& text, int* lanes, std::string* speed_name, double* lane_gbps) {
  *lanes = 0;
  speed_name->clear();
  *lane_gbps = 0;
  char* end = nullptr;
  double gbps = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) gbps = 0;
  size_t open_paren = text.find('(');
  if (open_paren != std::string::npos) {
    const char* p = text.c_str() + open_paren + 1;
    char* after = nullptr;
    long w = std::strtol(p, &after, 10);
    if (after != p && *after == 'X') {
      *lanes = static_cast<int>(w);
      std::string rest(after + 1);
      size_t b = rest.find_first_not_of(' ');
      size_t e = rest.find_first_of(" )", b);
      if (b != std::string::npos) *speed_name = rest.substr(b, e == std::string::npos ? e : e - b);
      *lane_gbps = LaneSpeed(*speed_name);
    }
  }
  if (gbps <= 0 && *lanes > 0) gbps = *lanes * *lane_gbps;
  return gbps;
}

std::string BusIdToBdf(const std::string& hex) {
  if (hex.empty() || hex.size() > 16) return std::string();
  char* end = nullptr;
  unsigned long long v = std::strtoull(hex.c_str(), &end, 16);
  if (end == hex.c_str() || *end != '\0') return std::string();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04llx:%02llx:%02llx.%llx", v >> 20, (v >> 12) & 0xff,
                (v >> 4) & 0xff, v & 0xf);
  return buf;
}

PciLocation ProbePciDevice(const std::string& sysfs_root, const std::string& bdf) {
  PciLocation loc;
  loc.bdf = bdf;
  if (bdf.empty()) return loc;
  const std::string link = sysfs_root + "/bus/pci/devices/" + bdf;
  char resolved[PATH_MAX];
  if (realpath(link.c_str(), resolved) == nullptr) return loc;
  loc.path = resolved;
  loc.numa_node = LeadingInt(ReadSmallFile(loc.path + "/numa_node"));
  return loc;
}

namespace {

// The components below ".../devices/": {"pci0000:16", "0000:16:02.0", ..., "<bdf>"}.
std::vector<std::string> PciComponents(const std::string& path) {
  std::vector<std::string> out;
  size_t pos = path.rfind("/devices/pci");
  if (pos == std::string::npos) return out;
  pos += std::strlen("/devices/");
  while (pos < path.size()) {
    size_t slash = path.find('/', pos);
    size_t end = slash == std::string::npos ? path.size() : slash;
    if (end > pos) out.push_back(path.substr(pos, end - pos));
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  return out;
}

}  // namespace

PciAffinity ClassifyPciAffinity(const std::string& path_a, int numa_a, const std::string& path_b,
                                int numa_b) {
  std::vector<std::string> a = PciComponents(path_a);
  std::vector<std::string> b = PciComponents(path_b);
  if (a.size() < 2 || b.size() < 2) return PciAffinity::kUnknown;
  if (a[0] == b[0]) {
    // Bridges are the components between the root complex (a[0]) and the device itself (last).
    size_t i = 1;
    while (i + 1 < a.size() && i + 1 < b.size() && a[i] == b[i]) ++i;
    bool shares_bridge = i > 1;
    return shares_bridge ? PciAffinity::kPcie : PciAffinity::kNuma;
  }
  if (numa_a >= 0 && numa_b >= 0)
    return numa_a == numa_b ? PciAffinity::kNuma : PciAffinity::kCrossNuma;
  // No NUMA information at all: the kernel reports -1 on machines with one NUMA node.
  if (numa_a < 0 && numa_b < 0) return PciAffinity::kNuma;
  return PciAffinity::kUnknown;
}

const char* PciAffinityName(PciAffinity affinity) {
  switch (affinity) {
    case PciAffinity::kPcie:
      return "share a PCIe switch";
    case PciAffinity::kNuma:
      return "same NUMA node, no shared PCIe switch";
    case PciAffinity::kCrossNuma:
      return "different NUMA nodes";
    case PciAffinity::kUnknown:
      break;
  }
  return "unknown";
}

const RdmaDevice* HostFacts::FindDevice(const std::string& name) const {
  for (const RdmaDevice& d : devices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

int HostFacts::PortCount() const {
  int n = 0;
  for (const RdmaDevice& d : devices) n += static_cast<int>(d.ports.size());
  return n;
}

ProbeOptions ProbeOptionsFromEnv(bool want_verbs) {
  ProbeOptions o;
  const rules::SentinelEnv& env = rules::ProcessSentinelEnv();
  if (env.Set(rules::Var::kSysfsRoot)) o.sysfs_root = env.Text(rules::Var::kSysfsRoot);
  if (env.Set(rules::Var::kDevRoot)) o.dev_root = env.Text(rules::Var::kDevRoot);
  const bool verbs_off = !env.Flag(rules::Var::kVerbs);  // the one boolean rule
  if (want_verbs && !verbs_off) {
    // Without libibverbs its evidence is missing (verbs_loaded false), which is not an error.
    const plugin::Status loaded = plugin::LoadVerbsApi(&o.verbs);
    if (!loaded.ok()) o.verbs = nullptr;
  }
  return o;
}

HostFacts ProbeHost(const ProbeOptions& options) {
  HostFacts f;
  const std::string ib_class = options.sysfs_root + "/class/infiniband";
  f.sysfs_class_present = Exists(ib_class);
  for (const std::string& dev : ListDir(ib_class)) {
    RdmaDevice d;
    d.name = dev;
    const std::string base = ib_class + "/" + dev;
    char resolved[PATH_MAX];
    if (realpath((base + "/device").c_str(), resolved) != nullptr) d.pci_path = resolved;
    d.numa_node = LeadingInt(ReadSmallFile(base + "/device/numa_node"));
    for (const std::string& port : ListDir(base + "/ports")) {
      PortInfo p;
      p.port = std::atoi(port.c_str());
      const std::string pbase = base + "/ports/" + port;
      p.state_text = ReadSmallFile(pbase + "/state");
      p.state = LeadingInt(p.state_text);
      p.phys_state_text = ReadSmallFile(pbase + "/phys_state");
      p.phys_state = LeadingInt(p.phys_state_text);
      p.link_layer = ReadSmallFile(pbase + "/link_layer");
      p.rate_text = ReadSmallFile(pbase + "/rate");
      p.rate_gbps = ParseRate(p.rate_text, &p.width_lanes, &p.speed_name, &p.lane_gbps);
      d.ports.push_back(std::move(p));
    }
    f.devices.push_back(std::move(d));
  }
  const std::string dev_ib = options.dev_root + "/infiniband";
  f.dev_infiniband_present = Exists(dev_ib);
  for (const std::string& node : ListDir(dev_ib)) {
    if (node.rfind("uverbs", 0) == 0) ++f.uverbs_nodes;
  }
  if (options.verbs != nullptr) {
    f.verbs_loaded = true;
    f.dmabuf_nic_symbol = options.verbs->has_reg_dmabuf_mr;
    int n = 0;
    errno = 0;
    void** list = options.verbs->get_device_list(&n);
    if (list == nullptr) {
      f.verbs_errno = errno;
    } else {
      f.verbs_devices = n;
      options.verbs->free_device_list(list);
    }
  }
  // docs/cupti-verbs-facts.md "3.8 GPUDirect RDMA detection": the peer-memory path of GPUDirect
  // RDMA.
  static constexpr const char* kPeermem[] = {"/kernel/mm/memory_peers/nv_mem/version",
                                             "/kernel/mm/memory_peers/nv_mem_nc/version",
                                             "/module/nvidia_peermem/version"};
  for (const char* rel : kPeermem) {
    if (Exists(options.sysfs_root + rel)) {
      f.peermem_loaded = true;
      f.peermem_evidence = options.sysfs_root + rel;
      break;
    }
  }
  return f;
}

namespace {
std::mutex& ProbeMutex() {
  static plugin::NoDestructor<std::mutex> mu;
  return *mu;
}
ABSL_CONST_INIT HostFacts* cached_facts = nullptr;  // guarded by ProbeMutex(); leaked on purpose
}  // namespace

const HostFacts& CachedHostFacts(bool want_verbs) {
  std::lock_guard<std::mutex> lock(ProbeMutex());
  if (cached_facts == nullptr)
    cached_facts = new HostFacts(ProbeHost(ProbeOptionsFromEnv(want_verbs)));
  return *cached_facts;
}

void ResetHostProbeCacheForTest() {
  std::lock_guard<std::mutex> lock(ProbeMutex());
  delete cached_facts;
  cached_facts = nullptr;
}

}  // namespace sentinel::guard
