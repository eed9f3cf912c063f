// The launch API answers with absl::Status; the tests search the failure's message. These wrap
// each call as "ok, with the message in *err" so that a check reads like the sentence it tests.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "tools/baseline/launch.h"

namespace sentinel::baseline::testing {

inline bool Said(const absl::Status& s, std::string* err) {
  *err = std::string(s.message());
  return s.ok();
}
inline bool Read(const GetEnvFn& get, LaunchInfo* li, std::string* err) {
  return Said(ReadLaunchInfo(get, li), err);
}
inline int Listen(int port, int* bound_port, std::string* err) {
  const absl::StatusOr<int> fd = ListenForRendezvous(port, bound_port);
  return Said(fd.status(), err) ? *fd : -1;
}
inline bool Serve(int fd, int world, const Rendezvous& rv, const std::string& token,
                  double timeout_s, std::string* err, int* refused = nullptr) {
  return Said(ServeRendezvous(fd, world, rv, token, timeout_s, refused), err);
}
inline bool Fetch(const std::string& addr, int port, int rank, const std::string& token,
                  double timeout_s, Rendezvous* rv, std::string* err) {
  return Said(FetchRendezvous(addr, port, rank, token, timeout_s, rv), err);
}

}  // namespace sentinel::baseline::testing
