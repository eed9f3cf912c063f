// Reads the wrapping net plugin's snapshot for the guard; see net_evidence.h.
#include "plugin/guard/net_evidence.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <new>

#include "absl/base/attributes.h"

namespace sentinel::guard {
namespace {

SentinelNetSnapshotFn DefaultLookup() {
  // NCCL opens net plugins RTLD_LOCAL: find the already-loaded wrapper by name, never load it.
  void* lib = dlopen("libnccl-net-sentinel.so", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return nullptr;
  auto fn = reinterpret_cast<SentinelNetSnapshotFn>(dlsym(lib, "sentinelNetSnapshot"));
  dlclose(lib);  // drops only our reference; the wrapper is linked -z nodelete
  return fn;
}

ABSL_CONST_INIT SnapshotLookup g_lookup = DefaultLookup;

std::string Bounded(const char* s, size_t n) { return std::string(s, strnlen(s, n)); }

}  // namespace

void SetSnapshotLookupForTest(SnapshotLookup lookup) {
  g_lookup = lookup != nullptr ? lookup : DefaultLookup;
}

std::vector<const NetPluginDevice*> NetPluginEvidence::DevicesInUse() const {
  std::vector<const NetPluginDevice*> out;
  for (const NetPluginDevice& d : devices) {
    if (d.in_use || connections == 0) out.push_back(&d);
  }
  return out;
}

std::vector<std::string> NetPluginEvidence::Lines() const {
  std::vector<std::string> out;
  if (!present) return out;
  for (const NetPluginDevice& d : devices) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "net plugin %s (v%d, seen by libnccl-net-sentinel.so) dev %d %s (%s): GPUDirect "
                  "%s, %.0f Gb/s, port %d, %s",
                  real_name.c_str(), version, d.index, d.name.c_str(), d.pci_path.c_str(),
                  d.gdr_offered ? "offered" : "not offered", d.speed_mbps / 1000.0, d.port,
                  d.in_use ? "in use" : (connections == 0 ? "no connection yet" : "not in use"));
    out.push_back(line);
  }
  return out;
}

NetPluginEvidence FromSnapshot(const SentinelNetSnapshot& s) {
  NetPluginEvidence e;
  if (s.wrapped_version == 0) return e;
  e.present = true;
  e.version = s.wrapped_version;
  e.real_name = Bounded(s.real_name, sizeof(s.real_name));
  int ndev = s.ndevices < 0
                 ? 0
                 : (s.ndevices > SENTINEL_NET_MAX_DEVICES ? SENTINEL_NET_MAX_DEVICES : s.ndevices);
  for (int i = 0; i < ndev; ++i) {
    const SentinelNetDevice& d = s.devices[i];
    NetPluginDevice out;
    out.index = i;
    out.name = Bounded(d.name, sizeof(d.name));
    out.pci_path = Bounded(d.pci_path, sizeof(d.pci_path));
    out.gdr_offered = (d.ptr_support & 0x2) != 0;
    out.speed_mbps = d.speed_mbps;
    out.port = d.port;
    e.devices.push_back(out);
  }
  int nconns =
      s.nconns < 0 ? 0 : (s.nconns > SENTINEL_NET_MAX_CONNS ? SENTINEL_NET_MAX_CONNS : s.nconns);
  e.connections = nconns;
  for (int i = 0; i < nconns; ++i) {
    int dev = s.conns[i].dev;
    if (dev >= 0 && dev < ndev) e.devices[static_cast<size_t>(dev)].in_use = true;
  }
  return e;
}

NetPluginEvidence ReadNetPluginEvidence() {
  SentinelNetSnapshotFn fn = g_lookup();
  if (fn == nullptr) return NetPluginEvidence();
  std::unique_ptr<SentinelNetSnapshot> snap(new (std::nothrow) SentinelNetSnapshot());
  if (snap == nullptr || fn(snap.get()) != 0) return NetPluginEvidence();
  return FromSnapshot(*snap);
}

}  // namespace sentinel::guard
