// The NIC ports whose counters moved over a span of slow windows (slow_cause.h), from their kept
// poll history (nic/nic_counters.h). Errors, link-down and a port not ACTIVE count on any growth;
// a rate counter (port_xmit_wait, congestion notifications) when its rate over the span stands
// well above its own usual in two consecutive polls, or above the node's other ports'. The
// formulas: collector/README.md, "Late rank or network".
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "collector/aggregate/slow_cause_types.h"
#include "collector/nic/nic_counters.h"

namespace sentinel::collector {

// What NicMovesIn works out from the ports' polls alone (the node's usual noise; whether each poll
// of each port stood above the node's other ports): the same for every span judged until the next
// poll, so a caller that judges many keeps it between calls (linear, not ports² x polls, each).
struct NicPollCache {
  const NicState* nic = nullptr;
  uint64_t polls = 0;      // NicState::polls when filled
  uint64_t signature = 0;  // of the ports' history sizes and newest polls
  double k = 0;
  int usual_polls = 0;
  std::array<double, kNicCounterCount> noise{};
  // [port x kNicCounterCount + counter][interval]: 0 not worked out yet, 1 above its peers, 2 not.
  std::vector<std::vector<uint8_t>> above;
};

// The NIC ports whose counters moved over [start_ns, end_ns]. `devices` (sorted): the devices the
// communicator's transfers use; when one of them is a polled port, only their ports may be named,
// judged against their own history. Otherwise (null, empty, or none polled) every port may be,
// and a rate counter's rise must also stand out from the other ports' rises over the span.
// `cache`: kept by the caller between calls (null: worked out afresh).
std::vector<NicMove> NicMovesIn(const NicState& nic, int64_t start_ns, int64_t end_ns,
                                const SlowCauseParams& p,
                                const std::vector<std::string>* devices = nullptr,
                                NicPollCache* cache = nullptr);

}  // namespace sentinel::collector
