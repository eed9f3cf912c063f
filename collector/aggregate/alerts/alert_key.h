// What identifies an alert: its kind of key and the fields that name it, and the id string
// rendered from them (the AlertBook's key, shown in JSON, Alertmanager labels and /v1/alerts).
// Code that asks "is this a NIC alert" or "which rank is this straggler" reads the key, never a
// prefix of the id.
//
// Ids, one form per key kind (<comm> is CommLabel: "0x" and 16 hex digits):
//   straggler-<comm>-r<rank>             a late rank of a communicator
//   straggler-wait-<comm>-r<rank>        a rank its communicator waits for (the wait evidence)
//   straggler-node-<host>                this node, slow by its wait evidence (<host>: --node)
//   hang-<comm>                          a hang of a communicator (join-based or in-flight)
//   <guard kind>-<comm>                  a guard verdict: transport, placement or link_degraded
//   nic_errors-<device>-<port>           a NIC port's error counters grew
//   link_degraded-nic-<device>-<port>    a NIC port runs slower than the node's fastest
//   link_degraded-net-<16 hex>           a net plugin link slower than its peers
//   link_degraded-slow-<comm>            a communicator's collectives slowed by the network
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

#include "collector/base/alert_kind.h"

namespace sentinel::collector {

enum class AlertKeyKind : uint8_t {
  kStraggler,
  kHang,
  kGuardVerdict,
  kNicErrors,
  kNicLink,
  kNetLink,
  kWaitRank,
  kSlowNode,
  kSlowNetwork,
};

struct AlertKey {
  AlertKeyKind kind = AlertKeyKind::kHang;
  AlertKind guard = AlertKind::kTransport;  // kGuardVerdict: transport, placement, link_degraded
  uint64_t comm_hash = 0;                   // kStraggler, kHang, kGuardVerdict, kWaitRank,
                                            // kSlowNetwork
  int32_t rank = 0;                         // kStraggler, kWaitRank
  std::string device;                       // kNicErrors, kNicLink
  int port = 0;                             // kNicErrors, kNicLink
  uint64_t link_id = 0;                     // kNetLink
  std::string host;                         // kSlowNode

  static AlertKey Straggler(uint64_t comm_hash, int32_t rank);
  static AlertKey Hang(uint64_t comm_hash);
  // `guard` is one of kTransport, kPlacement, kLinkDegraded.
  static AlertKey GuardVerdict(AlertKind guard, uint64_t comm_hash);
  static AlertKey NicErrors(const std::string& device, int port);
  static AlertKey NicLink(const std::string& device, int port);
  static AlertKey NetLink(uint64_t link_id);
  static AlertKey WaitRank(uint64_t comm_hash, int32_t rank);
  static AlertKey SlowNode(const std::string& host);
  static AlertKey SlowNetwork(uint64_t comm_hash);

  // The id string (see the forms above).
  std::string Id() const;
  // The alert kind an alert of this key carries (AlertKindName: its "kind" in JSON).
  AlertKind alert_kind() const;
  // A node-level NIC alert (sysfs counters): kNicErrors or kNicLink.
  bool is_nic() const { return kind == AlertKeyKind::kNicErrors || kind == AlertKeyKind::kNicLink; }
  // A job-wide straggler alert from the node's wait evidence: kWaitRank or kSlowNode.
  bool is_wait() const {
    return kind == AlertKeyKind::kWaitRank || kind == AlertKeyKind::kSlowNode;
  }

  bool operator==(const AlertKey& o) const;
  bool operator!=(const AlertKey& o) const { return !(*this == o); }
};

// The key an id was rendered from: exactly the ids Id() renders parse (Id() of the result gives
// `id` back); anything else is nullopt.
std::optional<AlertKey> ParseAlertKey(absl::string_view id);

// True when `id` parses to a key of `kind`.
bool AlertIdIs(absl::string_view id, AlertKeyKind kind);

}  // namespace sentinel::collector
