// Reads the transport-relevant NCCL_* variables and evaluates NCCL_IB_HCA filters.
#include "plugin/guard/nccl_env.h"

#include <cstdlib>

namespace sentinel::guard {
namespace {

std::string Get(const char* name) {
  const char* v = getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

bool Matches(const std::string& entry_name, const std::string& dev, bool exact) {
  return exact ? dev == entry_name : dev.compare(0, entry_name.size(), entry_name) == 0;
}

}  // namespace

NcclEnv ReadNcclEnv() {
  NcclEnv e;
  e.ib_disable = Get("NCCL_IB_DISABLE");
  e.net = Get("NCCL_NET");
  e.net_plugin = Get("NCCL_NET_PLUGIN");
  e.ib_hca = Get("NCCL_IB_HCA");
  e.socket_ifname = Get("NCCL_SOCKET_IFNAME");
  e.net_gdr_level = Get("NCCL_NET_GDR_LEVEL");
  e.dmabuf_enable = Get("NCCL_DMABUF_ENABLE");
  e.p2p_disable = Get("NCCL_P2P_DISABLE");
  e.p2p_level = Get("NCCL_P2P_LEVEL");
  e.shm_disable = Get("NCCL_SHM_DISABLE");
  e.nvls_enable = Get("NCCL_NVLS_ENABLE");
  return e;
}

std::vector<std::string> FilterByIbHca(const std::string& ib_hca,
                                       const std::vector<std::string>& devices) {
  if (ib_hca.empty()) return devices;
  std::string spec = ib_hca;
  bool exclude = false;
  bool exact = false;
  if (!spec.empty() && spec[0] == '^') {
    exclude = true;
    spec.erase(0, 1);
  }
  if (!spec.empty() && spec[0] == '=') {
    exact = true;
    spec.erase(0, 1);
  }
  std::vector<std::string> names;
  size_t begin = 0;
  while (begin <= spec.size()) {
    size_t comma = spec.find(',', begin);
    std::string entry = spec.substr(begin, comma == std::string::npos ? comma : comma - begin);
    entry = entry.substr(0, entry.find(':'));  // the port part does not change device matching
    if (!entry.empty()) names.push_back(entry);
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  std::vector<std::string> kept;
  for (const std::string& dev : devices) {
    bool hit = false;
    for (const std::string& n : names) hit = hit || Matches(n, dev, exact);
    if (hit != exclude) kept.push_back(dev);
  }
  return kept;
}

}  // namespace sentinel::guard
