// The node's NIC alerts from the sysfs counters (collector/nic/): nic_errors for a port whose
// error counters grew on two polls in a row, link_degraded (NIC) for an active port slower than
// the node's fastest of its link layer. Node-level: no communicator, raised by sentineld itself.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "collector/aggregate/alert_book.h"
#include "collector/nic/nic_counters.h"

namespace sentinel::collector {

// One change to the alert book: fire `alert`, or (fire false) resolve the alert `resolve_id`.
struct AlertUpdate {
  bool fire = false;
  Alert alert;
  std::string resolve_id;
};

// What one poll's state `nic` changes, port by port in order; `live` gets the ids of every port
// still present (the caller resolves the NIC alerts of ports that vanished).
std::vector<AlertUpdate> NicAlertUpdates(const NicState& nic, const std::string& host,
                                         const std::string& runbook_base,
                                         std::set<std::string>* live);

}  // namespace sentinel::collector
