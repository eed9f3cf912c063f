// What the host itself says about its RDMA NICs (docs/cupti-verbs-facts.md "3. libibverbs",
// "4. RDMA health in sysfs"): sysfs devices and ports (state, link layer, width x speed),
// /dev/infiniband device nodes, libibverbs' view, and whether GPUDirect RDMA can work. Roots are
// configurable so tests build fake trees.
#pragma once

#include <string>
#include <vector>

#include "plugin/verbs/verbs_api.h"

namespace sentinel::guard {

struct PortInfo {
  int port = 0;
  int state = -1;  // ibv_port_state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER; -1 unknown
  std::string state_text;  // "4: ACTIVE" as sysfs shows it
  int phys_state = -1;     // 5 LinkUp; -1 unknown
  std::string phys_state_text;
  std::string link_layer;  // "InfiniBand", "Ethernet", "Unknown" or empty when unreadable
  std::string rate_text;   // "400 Gb/sec (4X NDR)"
  double rate_gbps = 0;    // width x per-lane speed, 0 when unknown
  int width_lanes = 0;     // 1, 2, 4, 8, 12; 0 unknown
  double lane_gbps = 0;    // per-lane speed of the trained link
  std::string speed_name;  // SDR .. XDR

  bool Active() const { return state == 4 || state == 5; }
  bool LinkUp() const { return phys_state == 5; }
  bool IsEthernet() const { return link_layer == "Ethernet"; }
  bool IsInfiniBand() const { return link_layer == "InfiniBand"; }
};

struct RdmaDevice {
  std::string name;      // mlx5_0
  std::string pci_path;  // realpath of <sysfs>/class/infiniband/<dev>/device, empty if unknown
  int numa_node = -1;
  std::vector<PortInfo> ports;
};

struct HostFacts {
  bool sysfs_class_present = false;     // <sysfs>/class/infiniband exists
  std::vector<RdmaDevice> devices;      // sorted by name
  bool dev_infiniband_present = false;  // <dev>/infiniband exists
  int uverbs_nodes = 0;                 // <dev>/infiniband/uverbsN entries
  bool verbs_loaded = false;            // libibverbs could be loaded
  int verbs_devices = -1;       // devices libibverbs lists (needs the uverbs nodes); -1 unknown
  int verbs_errno = 0;          // errno of a failed ibv_get_device_list (ENOSYS: no kernel RDMA)
  bool peermem_loaded = false;  // nvidia_peermem / nv_peer_mem (the peer-memory GDR path)
  std::string peermem_evidence;
  bool dmabuf_nic_symbol = false;  // libibverbs exports ibv_reg_dmabuf_mr

  const RdmaDevice* FindDevice(const std::string& name) const;
  int PortCount() const;
};

struct ProbeOptions {
  std::string sysfs_root = "/sys";
  std::string dev_root = "/dev";
  // null: do not ask libibverbs (tests; or SENTINEL_VERBS=0)
  const plugin::VerbsApi* verbs = nullptr;
};

// SENTINEL_SYSFS_ROOT (default /sys), SENTINEL_DEVFS_ROOT (default /dev), and libibverbs unless
// SENTINEL_VERBS=0 (loaded only when `want_verbs`).
ProbeOptions ProbeOptionsFromEnv(bool want_verbs);

// Reads everything once. Slow path: file reads only, no locks held by the caller required.
HostFacts ProbeHost(const ProbeOptions& options);

// The process-wide probe: run once (thread-safe) and then served from the cache.
const HostFacts& CachedHostFacts(bool want_verbs);
// Test hook: forget the cached probe.
void ResetHostProbeCacheForTest();

// A PCI device as sysfs shows it: <sysfs>/bus/pci/devices/<bdf> ->
// /sys/devices/pciDDDD:BB/.../<bdf>.
struct PciLocation {
  std::string bdf;     // 0000:18:00.0
  std::string path;    // realpath of the sysfs device directory, empty when sysfs lacks it
  int numa_node = -1;  // -1: unknown or no NUMA
  bool Known() const { return !path.empty(); }
};

// NCCL's `busId <hex>` (the PCI address as one hex number: domain, bus, device, function) ->
// "0000:18:00.0". Empty when `hex` is not a hex number.
std::string BusIdToBdf(const std::string& hex);

// Looks the device up under `sysfs_root` (file reads only).
PciLocation ProbePciDevice(const std::string& sysfs_root, const std::string& bdf);

// How close two PCI devices are, weakest first.
enum class PciAffinity {
  kUnknown,    // a path is missing, or NUMA nodes are unknown across root complexes
  kCrossNuma,  // different NUMA nodes
  kNuma,       // same root complex, or different root complexes on the same NUMA node
  kPcie,       // a common PCIe bridge/switch below the root complex
};
// Compares two realpaths (".../devices/pciDDDD:BB/<bridge>/.../<bdf>") and NUMA nodes.
PciAffinity ClassifyPciAffinity(const std::string& path_a, int numa_a, const std::string& path_b,
                                int numa_b);
const char* PciAffinityName(PciAffinity affinity);

// "400 Gb/sec (4X NDR)" -> 400, lanes 4, "NDR", lane 100. Returns 0 when unparsable.
double ParseRate(const std::string& text, int* lanes, std::string* speed_name, double* lane_gbps);

}  // namespace sentinel::guard
