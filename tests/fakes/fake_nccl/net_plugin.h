// External net plugin host of the fake NCCL (docs/nccl-facts.md "7.1 Symbols and loading" and
// "7.2 `NCCL_NET`"): loads NCCL_NET_PLUGIN by NCCL's name rule, probes ncclNetPlugin_v11..v6,
// initialises it per communicator, and carries the inter-node bytes of collectives and p2p through
// its listen/connect/accept/isend/irecv/test.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sentinel::testing {

class ShmBarrier;

// The process-wide plugin (loaded once, sticky failure, like NCCL). Logs the
// docs/nccl-facts.md "7.1 Symbols and loading" lines. Returns true and the plugin's name when a
// usable v11 plugin is loaded.
bool LoadExternalNet(std::string* name);
// The number of devices of the loaded plugin (queried once).
int ExternalNetDevices();
// GPUDirect offered by device `dev` (ptrSupport has the CUDA bit).
bool ExternalNetGdr(int dev);

// One communicator's use of the plugin.
class NetComm {
 public:
  // Calls the plugin's init with commId = comm_hash; false when it fails.
  bool Init(uint64_t comm_hash, int rank, int nranks);
  // The device this rank's connections use (NetDev of the communicator).
  void set_dev(int dev) { dev_ = dev; }
  // One message per (peer, direction): sends `send_bytes[peer]` bytes of a pattern derived from
  // (comm, rank, ordinal) and receives from every peer in `recv_from`; connects on first use,
  // exchanging listen handles through the communicator's shared-memory segment. Folds every
  // received byte into the checksum. Returns false on a plugin error (logged once).
  struct Transfer {
    int peer;
    bool is_send;
    size_t bytes;
  };
  bool Exchange(ShmBarrier* barrier, const std::vector<Transfer>& transfers,
                const std::atomic<bool>& abort);
  void Close();

  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t bytes_received() const { return bytes_received_; }
  uint64_t checksum() const { return checksum_; }
  bool active() const { return ctx_set_; }

 private:
  bool ConnectAll(ShmBarrier* barrier, const std::vector<Transfer>& transfers,
                  const std::atomic<bool>& abort);
  bool Fail(const char* call, int rc);

  void* ctx_ = nullptr;
  bool ctx_set_ = false;
  bool failed_ = false;
  int rank_ = 0;
  int dev_ = 0;
  std::vector<uint64_t> sent_msgs_;  // per peer: messages sent / received (pattern seeds)
  std::vector<uint64_t> recv_msgs_;
  std::vector<void*> send_comm_;
  std::vector<void*> recv_comm_;
  std::vector<void*> listen_comm_;
  std::vector<char> out_;
  std::vector<char> in_;
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
  uint64_t checksum_ = 1469598103934665603ull;  // FNV-1a offset basis
};

}  // namespace sentinel::testing
