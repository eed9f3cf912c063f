// Alert keys and their id strings; see alert_key.h.
#include "collector/aggregate/alerts/alert_key.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

#include "collector/aggregate/snapshot.h"

namespace sentinel::collector {
namespace {

constexpr absl::string_view kStragglerPrefix = "straggler-";
constexpr absl::string_view kWaitRankPrefix = "straggler-wait-";
constexpr absl::string_view kSlowNodePrefix = "straggler-node-";
constexpr absl::string_view kHangPrefix = "hang-";
constexpr absl::string_view kNicErrorsPrefix = "nic_errors-";
constexpr absl::string_view kNicLinkPrefix = "link_degraded-nic-";
constexpr absl::string_view kNetLinkPrefix = "link_degraded-net-";
constexpr absl::string_view kSlowNetworkPrefix = "link_degraded-slow-";

// "0x" and 16 hex digits (CommLabel), or 16 hex digits alone (`with_0x` false).
bool ParseHex64(absl::string_view text, bool with_0x, uint64_t* out) {
  if (with_0x && !absl::ConsumePrefix(&text, "0x")) return false;
  if (text.size() != 16) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return absl::SimpleHexAtoi(text, out);
}

// "<device>-<port>": the port after the last '-'.
bool ParseDevicePort(absl::string_view text, std::string* device, int* port) {
  const size_t dash = text.rfind('-');
  if (dash == absl::string_view::npos) return false;
  if (!absl::SimpleAtoi(text.substr(dash + 1), port)) return false;
  *device = std::string(text.substr(0, dash));
  return true;
}

// The rest of "straggler-<comm>-r<rank>" (and of "straggler-wait-<comm>-r<rank>").
bool ParseStragglerRest(absl::string_view rest, AlertKey* key) {
  const size_t r = rest.rfind("-r");
  return r != absl::string_view::npos && ParseHex64(rest.substr(0, r), true, &key->comm_hash) &&
         absl::SimpleAtoi(rest.substr(r + 2), &key->rank);
}

bool ParseCommRest(absl::string_view rest, AlertKey* key) {
  return ParseHex64(rest, true, &key->comm_hash);
}

bool ParseDevicePortRest(absl::string_view rest, AlertKey* key) {
  return ParseDevicePort(rest, &key->device, &key->port);
}

bool ParseLinkIdRest(absl::string_view rest, AlertKey* key) {
  return ParseHex64(rest, false, &key->link_id);
}

bool ParseHostRest(absl::string_view rest, AlertKey* key) {
  key->host = std::string(rest);
  return true;
}

// The key kinds whose ids start with a fixed prefix, and how the rest of such an id reads. The
// first prefix an id starts with decides: an id with it is of that kind or of none. A prefix that
// extends another ("straggler-wait-" of "straggler-") comes before it.
struct PrefixedForm {
  absl::string_view prefix;
  AlertKeyKind kind;
  bool (*parse_rest)(absl::string_view rest, AlertKey* key);
};
constexpr PrefixedForm kPrefixedForms[] = {
    {kWaitRankPrefix, AlertKeyKind::kWaitRank, ParseStragglerRest},
    {kSlowNodePrefix, AlertKeyKind::kSlowNode, ParseHostRest},
    {kStragglerPrefix, AlertKeyKind::kStraggler, ParseStragglerRest},
    {kHangPrefix, AlertKeyKind::kHang, ParseCommRest},
    {kNicErrorsPrefix, AlertKeyKind::kNicErrors, ParseDevicePortRest},
    {kNicLinkPrefix, AlertKeyKind::kNicLink, ParseDevicePortRest},
    {kNetLinkPrefix, AlertKeyKind::kNetLink, ParseLinkIdRest},
    {kSlowNetworkPrefix, AlertKeyKind::kSlowNetwork, ParseCommRest},
};

std::optional<AlertKey> ParseLoose(absl::string_view id) {
  AlertKey key;
  for (const PrefixedForm& form : kPrefixedForms) {
    absl::string_view rest = id;
    if (!absl::ConsumePrefix(&rest, form.prefix)) continue;
    if (!form.parse_rest(rest, &key)) return std::nullopt;
    key.kind = form.kind;
    return key;
  }
  // A guard verdict: "<guard kind>-<comm>" (link_degraded- alone: the NIC, net and slow forms
  // above took theirs).
  for (AlertKind guard : {AlertKind::kTransport, AlertKind::kPlacement, AlertKind::kLinkDegraded}) {
    absl::string_view rest = id;
    if (absl::ConsumePrefix(&rest, AlertKindName(guard)) && absl::ConsumePrefix(&rest, "-") &&
        ParseHex64(rest, true, &key.comm_hash)) {
      key.kind = AlertKeyKind::kGuardVerdict;
      key.guard = guard;
      return key;
    }
  }
  return std::nullopt;
}

}  // namespace

AlertKey AlertKey::Straggler(uint64_t comm_hash, int32_t rank) {
  AlertKey k;
  k.kind = AlertKeyKind::kStraggler;
  k.comm_hash = comm_hash;
  k.rank = rank;
  return k;
}

AlertKey AlertKey::Hang(uint64_t comm_hash) {
  AlertKey k;
  k.kind = AlertKeyKind::kHang;
  k.comm_hash = comm_hash;
  return k;
}

AlertKey AlertKey::GuardVerdict(AlertKind guard, uint64_t comm_hash) {
  AlertKey k;
  k.kind = AlertKeyKind::kGuardVerdict;
  k.guard = guard;
  k.comm_hash = comm_hash;
  return k;
}

AlertKey AlertKey::NicErrors(const std::string& device, int port) {
  AlertKey k;
  k.kind = AlertKeyKind::kNicErrors;
  k.device = device;
  k.port = port;
  return k;
}

AlertKey AlertKey::NicLink(const std::string& device, int port) {
  AlertKey k = NicErrors(device, port);
  k.kind = AlertKeyKind::kNicLink;
  return k;
}

AlertKey AlertKey::NetLink(uint64_t link_id) {
  AlertKey k;
  k.kind = AlertKeyKind::kNetLink;
  k.link_id = link_id;
  return k;
}

AlertKey AlertKey::WaitRank(uint64_t comm_hash, int32_t rank) {
  AlertKey k = Straggler(comm_hash, rank);
  k.kind = AlertKeyKind::kWaitRank;
  return k;
}

AlertKey AlertKey::SlowNode(const std::string& host) {
  AlertKey k;
  k.kind = AlertKeyKind::kSlowNode;
  k.host = host;
  return k;
}

AlertKey AlertKey::SlowNetwork(uint64_t comm_hash) {
  AlertKey k = Hang(comm_hash);
  k.kind = AlertKeyKind::kSlowNetwork;
  return k;
}

std::string AlertKey::Id() const {
  switch (kind) {
    case AlertKeyKind::kStraggler:
      return absl::StrCat(kStragglerPrefix, CommLabel(comm_hash), "-r", rank);
    case AlertKeyKind::kHang:
      return absl::StrCat(kHangPrefix, CommLabel(comm_hash));
    case AlertKeyKind::kGuardVerdict:
      return absl::StrCat(AlertKindName(guard), "-", CommLabel(comm_hash));
    case AlertKeyKind::kNicErrors:
      return absl::StrCat(kNicErrorsPrefix, device, "-", port);
    case AlertKeyKind::kNicLink:
      return absl::StrCat(kNicLinkPrefix, device, "-", port);
    case AlertKeyKind::kNetLink:
      return absl::StrFormat("%s%016x", kNetLinkPrefix, link_id);
    case AlertKeyKind::kWaitRank:
      return absl::StrCat(kWaitRankPrefix, CommLabel(comm_hash), "-r", rank);
    case AlertKeyKind::kSlowNode:
      return absl::StrCat(kSlowNodePrefix, host);
    case AlertKeyKind::kSlowNetwork:
      return absl::StrCat(kSlowNetworkPrefix, CommLabel(comm_hash));
  }
  return "";
}

AlertKind AlertKey::alert_kind() const {
  switch (kind) {
    case AlertKeyKind::kStraggler:
    case AlertKeyKind::kWaitRank:
    case AlertKeyKind::kSlowNode:
      return AlertKind::kStraggler;
    case AlertKeyKind::kHang:
      return AlertKind::kHang;
    case AlertKeyKind::kGuardVerdict:
      return guard;
    case AlertKeyKind::kNicErrors:
      return AlertKind::kNicErrors;
    case AlertKeyKind::kNicLink:
    case AlertKeyKind::kNetLink:
    case AlertKeyKind::kSlowNetwork:
      return AlertKind::kLinkDegraded;
  }
  return AlertKind::kHang;
}

bool AlertKey::operator==(const AlertKey& o) const {
  return kind == o.kind && guard == o.guard && comm_hash == o.comm_hash && rank == o.rank &&
         device == o.device && port == o.port && link_id == o.link_id && host == o.host;
}

std::optional<AlertKey> ParseAlertKey(absl::string_view id) {
  std::optional<AlertKey> key = ParseLoose(id);
  // Only what Id() renders: no leading zeros, signs or spaces a number parser would forgive.
  if (key && key->Id() != id) return std::nullopt;
  return key;
}

bool AlertIdIs(absl::string_view id, AlertKeyKind kind) {
  const std::optional<AlertKey> key = ParseAlertKey(id);
  return key && key->kind == kind;
}

}  // namespace sentinel::collector
