// POST /v1/record: see record_route.h.
#include "collector/export/record_route.h"

#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "collector/export/api_json.h"

namespace sentinel::collector {
namespace {

// "0xc2", "C2", "00000000000000c2": 1 to 16 hex digits, nothing else.
bool ParseCommHex(std::string value, uint64_t* out) {
  if (value.size() > 2 && value[0] == '0' && (value[1] == 'x' || value[1] == 'X')) {
    value.erase(0, 2);
  }
  if (value.empty() || value.size() > 16) return false;
  for (const char c : value) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return absl::SimpleHexAtoi(value, out);
}

}  // namespace

bool FlightRequesterFor(const ApiReadPolicy& policy, const PeerIdentity& peer,
                        FlightRequester* out) {
  if (!peer.local || peer.uid == ApiViewer::kUnknownUid) return false;
  out->uid = peer.uid;
  out->any_job = peer.uid == 0 || peer.uid == policy.daemon_uid;
  return true;
}

RecordAnswer AnswerRecordRequest(SnapshotSource* source, const ApiReadPolicy& policy,
                                 const HttpRequest& req, const PeerIdentity& peer) {
  RecordAnswer a;
  FlightRequester who;
  if (!FlightRequesterFor(policy, peer, &who)) {
    a.status = 403;
    a.body = ErrorJson(403,
                       "a flight record writes a file on this node: only a local user may ask (the "
                       "job's own user, root or sentineld's user), and this peer is none the "
                       "kernel names");
    return a;
  }
  std::optional<uint64_t> comm;
  if (req.has_param("comm")) {
    uint64_t hash = 0;
    if (!ParseCommHex(req.get_param_value("comm"), &hash)) {
      a.status = 400;
      a.body = ErrorJson(400, "bad comm: expected a communicator hash in hex (e.g. 0x1a2b3c)");
      return a;
    }
    comm = hash;
  }
  const FlightRecordAnswer r = source->RecordFlight(who, comm);
  a.status = r.status;
  if (r.status != 200) {
    a.body = ErrorJson(r.status, r.error);
    return a;
  }
  nlohmann::json comms = nlohmann::json::array();
  for (const uint64_t hash : r.comms) comms.push_back(absl::StrFormat("0x%016x", hash));
  a.body = {{"path", r.path},
            {"reason", "on_demand"},
            {"comms", comms},
            {"ranks", r.ranks},
            {"left_out_comms", r.left_out}};
  return a;
}

}  // namespace sentinel::collector
