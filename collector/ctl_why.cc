// `sentinelctl why`; see ctl_why.h.
#include "collector/ctl_why.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "collector/ctl_text.h"

namespace sentinel::ctl {
namespace {

// One cause object (the alert's, or a slow node's flagged rank's) as indented lines.
std::string CauseLines(const nlohmann::json& c) {
  std::string out;
  const double share =
      Field(c, "explained_share").is_number() ? Field(c, "explained_share").get<double>() : 0.0;
  const std::string name = Shown(c, "cause", "unknown");
  const std::string detail = Shown(c, "detail", "");
  out += absl::StrFormat("  cause:      %s%s\n", name, detail.empty() ? "" : " (" + detail + ")");
  if (name == "unknown") {
    out += absl::StrFormat("  why:        %s\n", Shown(c, "unknown_reason", "-"));
  } else {
    const nlohmann::json& late = Field(c, "late_ms");
    out += absl::StrFormat(
        "  evidence:   %s, %.0f%% of %s late per collective\n", Shown(c, "figures", "-"),
        share * 100,
        late.is_number() ? absl::StrFormat("%.2f ms", late.get<double>()) : std::string("?"));
    const std::string support = Shown(c, "support", "");
    if (!support.empty()) out += absl::StrFormat("  backed by:  %s\n", support);
    out += absl::StrFormat("  what to do: %s\n", Shown(c, "what_to_do", "-"));
  }
  const nlohmann::json& also = Field(c, "also");
  if (also.is_object()) {
    out += absl::StrFormat("  also:       %s: %s\n", Shown(also, "cause", "?"),
                           Shown(also, "figures", "-"));
  }
  const std::string not_judged = Shown(c, "not_judged", "");
  if (!not_judged.empty()) out += absl::StrFormat("  not judged: %s\n", not_judged);
  return out;
}

}  // namespace

std::string WhyText(const nlohmann::json& alerts, int rank) {
  const nlohmann::json& list = Field(alerts, "alerts");
  std::string out;
  int shown = 0;
  if (list.is_array()) {
    for (const auto& a : list) {
      if (Shown(a, "state", "") != "firing" || Shown(a, "kind", "") != "straggler") continue;
      const nlohmann::json& ev = Field(a, "evidence");
      if (Field(ev, "cause").is_object()) {
        const nlohmann::json& ranks = Field(a, "ranks");
        const int r = ranks.is_array() && !ranks.empty() && ranks[0].is_number_integer()
                          ? ranks[0].get<int>()
                          : -1;
        if (rank >= 0 && r != rank) continue;
        out += absl::StrFormat("rank %s on comm %s (%s)\n", r >= 0 ? std::to_string(r) : "?",
                               Shown(a, "comm", "?"), Shown(a, "host", "?"));
        out += CauseLines(Field(ev, "cause"));
        ++shown;
        continue;
      }
      // A slow node: each flagged rank's own cause.
      const nlohmann::json& flagged = Field(ev, "flagged");
      if (!flagged.is_array()) continue;
      for (const auto& f : flagged) {
        const nlohmann::json& rv = Field(f, "rank");
        const int r = rv.is_number_integer() ? rv.get<int>() : -1;
        if (rank >= 0 && r != rank) continue;
        if (!Field(f, "cause").is_object()) continue;
        out +=
            absl::StrFormat("rank %s on comm %s (slow node %s)\n", r >= 0 ? std::to_string(r) : "?",
                            Shown(f, "comm", "?"), Shown(a, "host", "?"));
        out += CauseLines(Field(f, "cause"));
        ++shown;
      }
    }
  }
  if (shown == 0) {
    return rank >= 0 ? absl::StrCat("rank ", rank, " is not late (no firing straggler alert)\n")
                     : std::string("no late rank (no firing straggler alert)\n");
  }
  return out;
}

}  // namespace sentinel::ctl
