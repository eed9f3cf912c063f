// Extracts transport and placement evidence from NCCL's own log lines
// (docs/nccl-facts.md "8. NCCL log lines"): the network in use, the NICs NCCL opened, the
// per-channel paths and the ranks/nodes layout. Not thread-safe: the caller serialises calls on one
// LogEvidence.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sentinel::guard {

struct NetDevice {
  int index = -1;
  std::string name;        // mlx5_0 (IB) or eth0 (Socket)
  int port = 0;            // IB only
  std::string link_layer;  // "IB", "RoCE", "UNSPECIFIED" (IB); empty for Socket
};

struct LogComm {
  uint64_t comm_ptr = 0;   // the `comm 0x...` pointer NCCL prints
  uint64_t comm_hash = 0;  // commId from the Init START/COMPLETE line, 0 if not seen
  int rank = -1;
  int nranks = 0;
  int nnodes = 0;
  int local_ranks = 0;
  std::string bus_id;  // the GPU's `busId <hex>` from the Init line, as NCCL prints it ("18000")
  bool init_complete = false;
};

struct LogEvidence {
  uint64_t lines_seen = 0;                      // NCCL lines of any kind
  std::string version;                          // "2.28.9+cuda13.0"
  std::string net_name;                         // from `Using network X` (the last one seen)
  std::vector<std::string> failed_net_plugins;  // `Failed to initialize NET plugin X`
  bool failed_any_net = false;                  // `Failed to initialize any NET plugin`
  bool ib_no_device = false;                    // `NET/IB : No device found.`
  bool ib_list_seen = false;
  std::vector<NetDevice> ib_devices;  // `NET/IB : Using [0]mlx5_0:1/IB ...`
  bool socket_list_seen = false;
  std::vector<NetDevice> socket_devices;  // `NET/Socket : Using [0]eth0:...`
  // Channel connection lines (`... via NET/IB/0/GDRDMA`, `via P2P/CUMEM`, `via SHM/direct/direct`).
  int net_channels = 0;
  int net_gdr_channels = 0;
  std::vector<std::string> channel_nets;  // distinct net names seen in `via NET/<name>/...`
  std::vector<int> channel_net_devs;      // distinct netDev indexes used
  int p2p_channels = 0;
  int shm_channels = 0;
  int nvls_lines = 0;         // `NVLS ...` INIT lines (multicast support / NVLS comm set-up)
  int ring_gdr = -1;          // `Connected all rings, use ring PXN x GDR g`: g, or -1 if not seen
  int gdr_enabled_hcas = 0;   // `GPU Direct RDMA Enabled for HCA`
  int gdr_disabled_hcas = 0;  // `GPU Direct RDMA Disabled for HCA`
  std::vector<LogComm> comms;
  std::vector<std::string> warn_lines;  // NCCL WARN messages (bounded)
  std::vector<std::string> lines;       // the relevant lines, as NCCL printed them (bounded)

  bool AnyChannelLines() const { return net_channels + p2p_channels + shm_channels > 0; }
  const LogComm* FindComm(uint64_t comm_hash) const;
  const LogComm* LastComm() const { return comms.empty() ? nullptr : &comms.back(); }
};

// Feeds one line (without its trailing newline) to `ev`. Lines that are not NCCL's are ignored.
void ParseNcclLogLine(std::string_view line, LogEvidence* ev);

// Feeds a whole buffer, line by line (a trailing partial line is parsed too).
void ParseNcclLog(std::string_view text, LogEvidence* ev);

}  // namespace sentinel::guard
