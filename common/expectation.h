// The transport/placement expectation a job declares (SENTINEL_EXPECT, SENTINEL_EXPECT_FILE) and
// its parser. The grammar is documented in plugin/guard/README.md; parse errors point at the bad
// token with a column and a caret line.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace sentinel::rules {

enum class NetKind { kAny, kIb, kRoce, kSocket, kPlugin };
enum class IntraPath { kAny, kP2p, kNvls, kShm };
enum class Toggle { kAny, kOn, kOff };
enum class Compare { kAtLeast, kExactly };
// GPU<->NIC PCI affinity, weakest to strongest: same NUMA node (or root complex), or a shared
// PCIe switch below the root complex.
enum class Affinity { kAny, kNuma, kPcie };

struct Expectation {
  std::string text;    // the expectation as the user wrote it (comments stripped, one line)
  std::string source;  // where it came from, for messages (set by the caller, not the parser)
  NetKind net = NetKind::kAny;
  std::string net_plugin;  // kPlugin: the net name as NCCL prints it (compared case-insensitively)
  Toggle gdr = Toggle::kAny;
  IntraPath intra = IntraPath::kAny;
  int ranks_per_node = 0;  // 0: no placement expectation
  Compare ranks_per_node_cmp = Compare::kAtLeast;
  double link_gbps = 0;  // minimum per-port link rate of the NICs in use; 0: none
  int nics = 0;          // 0: no NIC-count expectation
  Compare nics_cmp = Compare::kAtLeast;
  bool ports_active = false;           // every NIC port in use must be ACTIVE / LinkUp
  Affinity affinity = Affinity::kAny;  // the rank's GPU and its NIC, as sysfs shows them

  bool Empty() const {
    return net == NetKind::kAny && gdr == Toggle::kAny && intra == IntraPath::kAny &&
           ranks_per_node == 0 && link_gbps <= 0 && nics == 0 && !ports_active &&
           affinity == Affinity::kAny;
  }
  // True when anything about the inter-node network is expected (the host probe is worth running).
  bool WantsRdma() const {
    return net == NetKind::kIb || net == NetKind::kRoce || gdr == Toggle::kOn || link_gbps > 0 ||
           nics > 0 || ports_active || affinity != Affinity::kAny;
  }
};

// Parses `text` into *out. Ok, or kInvalidArgument whose message points at the bad token:
// "<line>:<column>: <what is wrong>", then the source line and a caret line under the token, each
// indented two spaces (a text past Status::kDetailCap is cut, marked "..."). *out is then
// unspecified.
[[nodiscard]] Status ParseExpectation(std::string_view text, Expectation* out);

// The error of ParseExpectation with the source's name in front:
// "SENTINEL_EXPECT:1:9: unknown value 'ibx' for net (expected ib, roce, socket or a plugin name)"
// followed by the source line and a caret line under the bad token.
std::string FormatParseError(std::string_view source_name, const Status& error);

const char* NetKindName(NetKind kind);
const char* IntraPathName(IntraPath path);
const char* AffinityName(Affinity affinity);

}  // namespace sentinel::rules
