// Helpers shared by the net plugin tests against a real sentineld (net_e2e_test, net_sim_test).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sentinel::testing {

// A predicate for DaemonFixture::WaitFor("/v1/alerts", ...): some alert of `kind` is firing.
inline auto FiringAlertOf(std::string kind) {
  return [kind](const nlohmann::json& j) {
    for (const auto& a : j["alerts"]) {
      if (a["kind"] == kind && a["state"] == "firing") return true;
    }
    return false;
  };
}

// The alerts of `kind` in an /v1/alerts answer.
inline std::vector<nlohmann::json> AlertsOfKind(const nlohmann::json& alerts,
                                                const std::string& kind) {
  std::vector<nlohmann::json> out;
  for (const auto& a : alerts["alerts"]) {
    if (a["kind"] == kind) out.push_back(a);
  }
  return out;
}

}  // namespace sentinel::testing
