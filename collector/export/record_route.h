// POST /v1/record: writes a flight record now (collector/log/flight_record.h) and answers where.
// A record writes a file, so it is the one route that acts rather than reads, and its rule is
// stricter than the read policy (http_peer.h): only a local peer the kernel names may ask, and it
// records only its own uid's communicators; root and sentineld's own user record any. Members of
// the reader group and remote peers (even with --api-remote-details) read, they never write.
#pragma once

#include <nlohmann/json.hpp>

#include "collector/aggregate/snapshot_source.h"
#include "collector/export/http_peer.h"
#include "collector/export/http_request.h"

namespace sentinel::collector {

// Who may ask for a record, and for whose jobs; false (403) for anyone else.
bool FlightRequesterFor(const ApiReadPolicy& policy, const PeerIdentity& peer,
                        FlightRequester* out);

// The NOLINT: its implicit noexcept move and destructor reach nlohmann::json's, which
// clang-tidy follows into their allocating helpers.
struct RecordAnswer {  // NOLINT(bugprone-exception-escape)
  int status = 200;
  nlohmann::json body;
};

// The whole route: who asks (`peer`), its `comm` parameter (hex, "0x" optional), the record.
RecordAnswer AnswerRecordRequest(SnapshotSource* source, const ApiReadPolicy& policy,
                                 const HttpRequest& req, const PeerIdentity& peer);

}  // namespace sentinel::collector
