// The NCCL environment variables that decide the transport (docs/nccl-facts.md "7.2 `NCCL_NET`",
// docs/cupti-verbs-facts.md "3.7 How NCCL chooses IB, RoCE or sockets"), read once so the verdict
// can name contradictions with the expectation (NCCL_IB_DISABLE=1 with net=ib, NCCL_NET naming
// another net, NCCL_IB_HCA matching no device, ...).
#pragma once

#include <string>
#include <vector>

namespace sentinel::guard {

struct NcclEnv {
  // Empty string: unset.
  std::string ib_disable;     // NCCL_IB_DISABLE
  std::string net;            // NCCL_NET
  std::string net_plugin;     // NCCL_NET_PLUGIN
  std::string ib_hca;         // NCCL_IB_HCA
  std::string socket_ifname;  // NCCL_SOCKET_IFNAME
  std::string net_gdr_level;  // NCCL_NET_GDR_LEVEL
  std::string dmabuf_enable;  // NCCL_DMABUF_ENABLE
  std::string p2p_disable;    // NCCL_P2P_DISABLE
  std::string p2p_level;      // NCCL_P2P_LEVEL
  std::string shm_disable;    // NCCL_SHM_DISABLE
  std::string nvls_enable;    // NCCL_NVLS_ENABLE

  bool IbDisabled() const { return !ib_disable.empty() && ib_disable != "0"; }
  bool P2pDisabled() const { return !p2p_disable.empty() && p2p_disable != "0"; }
  bool NvlsDisabled() const { return nvls_enable == "0"; }
};

NcclEnv ReadNcclEnv();

// NCCL_IB_HCA semantics (docs/cupti-verbs-facts.md "3.7 How NCCL chooses IB, RoCE or sockets"):
// comma list of `dev[:port]`, a leading '^' excludes, a leading '=' asks for exact names (otherwise
// a prefix match). Returns the subset of `devices` the filter keeps (all of them when the filter is
// empty).
std::vector<std::string> FilterByIbHca(const std::string& ib_hca,
                                       const std::vector<std::string>& devices);

}  // namespace sentinel::guard
