// NIC health for sentineld: reads the RDMA ports' sysfs counters (docs/cupti-verbs-facts.md
// docs/cupti-verbs-facts.md "4.1 Port files" to "4.3 `hw_counters/`") under a configurable root,
// turns them into reset-safe running totals with a bounded history for window rates, and polls them
// from a small thread of its own (sysfs PMA reads are firmware round trips: never under the
// aggregator's lock, never on the ingest thread).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

#include "collector/base/ring.h"

namespace sentinel::collector {

// The counters we read, and the only values of the `counter` label (bounded cardinality).
enum NicCounter : int {
  kNicSymbolError = 0,
  kNicLinkErrorRecovery,
  kNicLinkDowned,
  kNicPortRcvErrors,
  kNicPortRcvRemotePhysicalErrors,
  kNicPortXmitDiscards,
  kNicLocalLinkIntegrityErrors,
  kNicExcessiveBufferOverrunErrors,
  kNicPortXmitWait,
  kNicOutOfSequence,
  kNicPacketSeqErr,
  kNicLocalAckTimeoutErr,
  kNicNpCnpSent,
  kNicRpCnpHandled,
  kNicNpEcnMarkedRocePackets,
  kNicCounterCount,
};
// The counter's file name, e.g. "symbol_error".
const char* NicCounterName(int counter);
// True for the counters whose growth raises `nic_errors`.
bool NicCounterIsError(int counter);

// One port as read from sysfs at one instant. Missing files leave `present` bits clear.
struct NicPortReading {
  std::string device;
  int port = 0;
  bool active = false;     // state "4: ACTIVE"
  std::string link_layer;  // "InfiniBand", "Ethernet", "" when unknown
  double rate_gbps = 0;    // 0 when unknown
  std::array<uint64_t, kNicCounterCount> value{};
  uint32_t present = 0;  // bit i: counter i was read
};

// Reads every <root>/class/infiniband/<dev>/ports/<n>/. No devices (or no root) -> empty.
std::vector<NicPortReading> ReadNicPorts(const std::string& sysfs_root);
// "400 Gb/sec (4X NDR)" -> 400; garbage -> 0.
double ParseNicRate(const std::string& text);

// One kept poll of a port: running totals (monotonic even across counter resets).
struct NicPoint {
  int64_t mono_ns = 0;
  std::array<uint64_t, kNicCounterCount> total{};
};

// A port's tracked state.
struct NicPortState {
  NicPortReading last;                             // the latest raw reading
  std::array<uint64_t, kNicCounterCount> total{};  // reset-safe running totals since first seen
  std::array<uint64_t, kNicCounterCount> delta{};  // growth in the latest poll
  uint64_t resets = 0;                             // counters seen going backwards
  Ring<NicPoint> history{720};                     // an hour at the default 5 s poll
  int error_polls = 0;                             // consecutive polls with error-counter growth
  int clean_polls = 0;                             // consecutive polls without
  int64_t last_seen_mono_ns = 0;
};

struct NicState {
  bool enabled = false;
  uint64_t polls = 0;
  // (device, port) -> state; std::map so exports are sorted and stable.
  std::map<std::pair<std::string, int>, NicPortState> ports;
};

// Folds one poll into `state` (deltas, resets, history, alert streaks). Ports that vanished are
// dropped. Pure: no I/O, testable with synthetic readings.
void UpdateNicState(NicState* state, const std::vector<NicPortReading>& readings, int64_t now_ns);

// Window figures over the ports' kept history (for /v1/telemetry).
struct NicWindow {
  bool any_port = false;
  bool has_retransmits = false;
  uint64_t retransmits = 0;  // out_of_sequence + packet_seq_err + local_ack_timeout_err
  bool has_cnp = false;
  double cnp_per_s = 0;  // np_cnp_sent + rp_cnp_handled
  bool has_ecn = false;
  double ecn_per_s = 0;            // np_ecn_marked_roce_packets
  double fastest_active_gbps = 0;  // 0 when no ACTIVE port with a known rate
};
NicWindow ComputeNicWindow(const NicState& state, int64_t window_ns, int64_t now_ns);

// Receives one poll's readings on the poller's thread. The aggregator implements it, so nic/ never
// depends on the aggregator (collector/ layering: nic sits below aggregate).
class NicPollConsumer {
 public:
  virtual ~NicPollConsumer() = default;
  virtual void OnNicPoll(const std::vector<NicPortReading>& readings) = 0;
};

// Polls ReadNicPorts every `period_ns` on its own thread and hands the readings to the consumer
// (the aggregator). period 0 = never started.
class NicPoller {
 public:
  NicPoller(std::string sysfs_root, int64_t period_ns, NicPollConsumer* consumer);
  ~NicPoller();
  NicPoller(const NicPoller&) = delete;
  NicPoller& operator=(const NicPoller&) = delete;
  void Start();
  void Stop();
  void PollOnce();

 private:
  void Loop();

  const std::string root_;
  const int64_t period_ns_;
  NicPollConsumer* const consumer_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace sentinel::collector
