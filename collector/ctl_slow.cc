// `sentinelctl slow` table; see ctl_slow.h.
#include "collector/ctl_slow.h"

#include "absl/strings/str_format.h"

#include "collector/ctl_text.h"

namespace sentinel::ctl {
namespace {

double Num(const nlohmann::json& obj, const char* key) {
  const nlohmann::json& v = Field(obj, key);
  return v.is_number() ? v.get<double>() : 0.0;
}

}  // namespace

std::string SlowTable(const nlohmann::json& telemetry) {
  const nlohmann::json& slow = Field(telemetry, "slow_windows");
  const nlohmann::json& spans = Field(slow, "spans");
  const nlohmann::json& by_comm = Field(slow, "by_comm");
  if (!spans.is_array() || spans.empty()) {
    std::string out = "no slow collectives in the window\n";
    if (by_comm.is_array() && !by_comm.empty()) out += "\n";
    if (!by_comm.is_array() || by_comm.empty()) return out;
  }
  std::string out;
  if (spans.is_array() && !spans.empty()) {
    out += absl::StrFormat(
        "SLOW COLLECTIVES (%d spans, newest first)\n%-20s %-14s %-6s %-23s %-6s "
        "%-9s %-8s %s\n",
        spans.size(), "COMM", "FUNC", "SIZE", "SEQ", "N", "USUAL", "EXCESS", "CAUSE");
    for (const auto& s : spans) {
      const double usual = Num(s, "usual_ms");
      const double n = std::max(Num(s, "windows"), 1.0);
      out += absl::StrFormat("%-20s %-14s %-6s %-23s %-6s %-9s %-8s %s\n", Shown(s, "comm", "?"),
                             Shown(s, "func", "?"), Shown(s, "size_bucket", "?"),
                             Shown(s, "first_seq", "?") + "-" + Shown(s, "last_seq", "?"),
                             Shown(s, "windows", "?"), absl::StrFormat("%.3fms", usual),
                             usual > 0
                                 ? absl::StrFormat("+%.0f%%", Num(s, "excess_ms") / n / usual * 100)
                                 : std::string("-"),
                             Shown(s, "verdict", "?"));
    }
  }
  if (by_comm.is_array() && !by_comm.empty()) {
    if (!out.empty()) out += "\n";
    out += absl::StrFormat("EXCESS BY CAUSE\n%-20s %-12s %-12s %-12s %s\n", "COMM", "LATE_RANK",
                           "NETWORK", "TRANSFER", "WINDOWS");
    for (const auto& c : by_comm) {
      out +=
          absl::StrFormat("%-20s %-12s %-12s %-12s %s\n", Shown(c, "comm", "?"),
                          absl::StrFormat("%.3fs", Num(c, "late_rank_s")),
                          absl::StrFormat("%.3fs", Num(c, "network_s")),
                          absl::StrFormat("%.3fs", Num(c, "transfer_s")), Shown(c, "windows", "0"));
    }
  }
  return out;
}

}  // namespace sentinel::ctl
