// Who reads the HTTP API's job details, as the kernel tells it, and which jobs' details that reader
// may see: a job's communicator hashes, ranks, hosts, trace and alerts belong to the uid running
// it. The HTTP server finds the viewer; the snapshots leave out what the viewer may not see.
#pragma once

#include <cstdint>

namespace sentinel::collector {

struct ApiViewer {
  static constexpr uint32_t kUnknownUid = UINT32_MAX;  // not known (a peer on another host)

  uint32_t uid = kUnknownUid;
  bool sees_all = false;  // root, the daemon's own uid, or a reader the operator allowed

  static ApiViewer Everything() {
    ApiViewer v;
    v.sees_all = true;
    return v;
  }
  static ApiViewer OfUid(uint32_t uid) {
    ApiViewer v;
    v.uid = uid;
    return v;
  }
  // Whether the details of something owned by `owner_uid` are this viewer's to see.
  bool Sees(uint32_t owner_uid) const {
    return sees_all || (uid != kUnknownUid && uid == owner_uid);
  }
};

}  // namespace sentinel::collector
