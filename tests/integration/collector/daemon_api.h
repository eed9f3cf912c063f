// A real sentineld's HTTP API as the integration tests read it.
#pragma once

#include <string>

#include "nlohmann/json.hpp"

#include "httplib.h"

namespace sentinel::testing {

// GET `path` from the sentineld listening on 127.0.0.1:`port`, parsed; null when it does not
// answer 200, discarded when the body is not JSON.
inline nlohmann::json GetDaemonJson(int port, const std::string& path) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(5, 0);
  auto res = cli.Get(path.c_str());
  if (!res || res->status != 200) return nlohmann::json();
  return nlohmann::json::parse(res->body, nullptr, false);
}

}  // namespace sentinel::testing
