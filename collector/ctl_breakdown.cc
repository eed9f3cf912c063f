// `sentinelctl breakdown` table; see ctl_breakdown.h.
#include "collector/ctl_breakdown.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

#include "collector/ctl_text.h"

namespace sentinel::ctl {
namespace {

constexpr const char* kParts[] = {"compute", "communication", "wait", "host"};

bool Number(const nlohmann::json& obj, const char* key, double* out) {
  const nlohmann::json& v = Field(obj, key);
  if (!v.is_number()) return false;
  *out = v.get<double>();
  return true;
}

// The communicator its figures are exported under (its primary rank's).
std::string PrimaryComm(const nlohmann::json& r) { return Shown(Field(r, "time"), "comm", "?"); }

// One part's cell: "350.0ms 70.0%", "- 14.9%" without steps, "n/m" when unknown.
std::string Cell(const nlohmann::json& time, const char* part, double total) {
  double seconds = 0;
  if (!Number(Field(time, "seconds"), part, &seconds)) return "n/m";
  double per_step = 0;
  const std::string step = Number(Field(time, "per_step_ms"), part, &per_step)
                               ? absl::StrFormat("%.1fms", per_step)
                               : std::string("-");
  const std::string share =
      total > 0 ? absl::StrFormat("%.1f%%", seconds / total * 100) : std::string("-");
  return step + " " + share;
}

std::string Verdict(const nlohmann::json& b) {
  const nlohmann::json& verdict = Field(b, "verdict");
  const std::string kind = verdict.is_string() ? verdict.get<std::string>() : "";
  std::string names;
  const nlohmann::json& culprits = Field(b, "culprits");
  if (culprits.is_array()) {
    for (const auto& c : culprits) {
      if (!names.empty()) names += ", ";
      names += absl::StrFormat("rank %s (comm %s, pid %s)", Shown(c, "rank", "?"),
                               Shown(c, "comm", "?"), Shown(c, "pid", "?"));
    }
  }
  if (kind == "one_rank") return "one bad rank: " + names;
  if (kind == "few_ranks") return "a few bad ranks: " + names;
  if (kind == "widened") return "the distribution widened (no culprit: the tail grew)";
  if (kind == "little_waiting") return "little waiting";
  if (kind == "not_enough_data") return "not enough data";
  return "unknown (" + Shown(b, "verdict", "?") + ")";
}

}  // namespace

std::string BreakdownTable(const nlohmann::json& ranks) {
  const nlohmann::json& list = Field(ranks, "ranks");
  std::string out;
  double window = 0;
  std::vector<std::pair<std::string, const nlohmann::json*>> rows;
  if (list.is_array()) {
    for (const auto& r : list) {
      if (Field(r, "connected") != true || !Field(r, "time").is_object()) continue;
      rows.emplace_back(PrimaryComm(r), &r);
      double w = 0;
      if (Number(Field(r, "time"), "window_s", &w)) window = std::max(window, w);
    }
  }
  if (rows.empty()) return "no connected rank has figures yet\n";
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  out += absl::StrFormat(
      "WHERE THE TIME WENT (last %.0f s; per step, and %% of the rank's time; n/m = not "
      "measured)\n%-20s %-5s %-8s %-6s %-16s %-16s %-16s %s\n",
      window, "COMM", "RANK", "PID", "STEPS", "COMPUTE", "COMMUNICATION", "WAIT", "HOST");
  for (const auto& [comm, r] : rows) {
    const nlohmann::json& time = Field(*r, "time");
    // The rank's time: the parts' sum with CUPTI, else its wall time (the wait's share of it).
    double total = 0;
    if (Field(time, "cupti") == true) {
      for (const char* part : kParts) {
        double s = 0;
        if (Number(Field(time, "seconds"), part, &s)) total += s;
      }
    } else {
      Number(time, "window_s", &total);
    }
    out += absl::StrFormat("%-20s %-5s %-8s %-6s %-16s %-16s %-16s %s\n", comm,
                           Shown(*r, "rank", "?"), Shown(*r, "pid", "?"), Shown(time, "steps", "-"),
                           Cell(time, "compute", total), Cell(time, "communication", total),
                           Cell(time, "wait", total), Cell(time, "host", total));
  }
  const nlohmann::json& jobs = Field(ranks, "breakdown");
  if (!jobs.is_array()) return out;
  for (const auto& b : jobs) {
    out += absl::StrFormat("\nuid %s: %s ranks (%s with CUPTI)", Shown(b, "uid", "?"),
                           Shown(b, "ranks", "?"), Shown(b, "ranks_cupti", "?"));
    const nlohmann::json& shares = Field(b, "shares");
    if (shares.is_object()) {
      std::string parts;
      for (const char* part : kParts) {
        double s = 0;
        if (!Number(shares, part, &s)) continue;
        parts += absl::StrFormat("%s%s %.1f%%", parts.empty() ? "" : ", ", part, s * 100);
      }
      out += ": " + parts;
    }
    out += "\n";
    double wait = 0;
    out += Number(b, "wait_share", &wait)
               ? absl::StrFormat("  lost to waiting: %.1f%% of the ranks' time\n", wait * 100)
               : std::string("  lost to waiting: unknown\n");
    out += "  verdict: " + Verdict(b) + "\n";
    out += "  why: " + Shown(b, "why", "?") + "\n";
  }
  return out;
}

nlohmann::json BreakdownJson(const nlohmann::json& ranks) {
  nlohmann::json out = {{"ranks", nlohmann::json::array()},
                        {"breakdown", Field(ranks, "breakdown")}};
  const nlohmann::json& list = Field(ranks, "ranks");
  if (!list.is_array()) return out;
  for (const auto& r : list) {
    if (Field(r, "connected") != true || !Field(r, "time").is_object()) continue;
    out["ranks"].push_back({{"comm", PrimaryComm(r)},
                            {"rank", Field(r, "rank")},
                            {"pid", Field(r, "pid")},
                            {"time", Field(r, "time")}});
  }
  return out;
}

}  // namespace sentinel::ctl
