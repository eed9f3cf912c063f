// Evidence from our wrapping net plugin (libnccl-net-sentinel.so, plugin/net): what the real net
// plugin offered NCCL (devices, GPUDirect ptrSupport, speed) and which devices carry connections.
// Independent of NCCL's log text. Read through sentinelNetSnapshot() when the wrapper is loaded.
#pragma once

#include <string>
#include <vector>

#include "plugin/net/net_observer.h"

namespace sentinel::guard {

struct NetPluginDevice {
  int index = 0;
  std::string name;
  std::string pci_path;
  bool gdr_offered = false;  // ptrSupport has NCCL_PTR_CUDA
  int speed_mbps = 0;
  int port = 0;
  bool in_use = false;  // at least one connection on it
};

struct NetPluginEvidence {
  bool present = false;  // the wrapper is loaded and wraps a real plugin
  std::string real_name;
  int version = 0;
  int connections = 0;
  std::vector<NetPluginDevice> devices;

  // The devices with connections, or every device when none is connected yet.
  std::vector<const NetPluginDevice*> DevicesInUse() const;
  // One line per device, for the verdict's evidence: "net plugin FakeNet (v11, via
  // libnccl-net-sentinel.so) dev 0 fake0 ...".
  std::vector<std::string> Lines() const;
};

// Pure: the evidence in a snapshot.
NetPluginEvidence FromSnapshot(const SentinelNetSnapshot& snapshot);

// The snapshot function of the loaded wrapper (dlopen RTLD_NOLOAD), or null when it is not loaded.
// Replaceable for tests.
using SnapshotLookup = SentinelNetSnapshotFn (*)();
void SetSnapshotLookupForTest(SnapshotLookup lookup);

// Reads the wrapper's snapshot; `present` false when the wrapper is absent or wraps nothing.
// Slow path (allocates the snapshot): call at init / first collective, never on NCCL's hot path.
NetPluginEvidence ReadNetPluginEvidence();

}  // namespace sentinel::guard
