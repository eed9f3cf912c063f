// The verdict and the evidence of a span of slow windows: see slow_span_text.h.
#include "collector/aggregate/slow_span_text.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "collector/aggregate/snapshot.h"
#include "collector/aggregate/stats.h"
#include "common/wire_text.h"

namespace sentinel::collector {
namespace {

// A name from outside (sysfs directory, the net plugin's device string) made safe to show.
std::string EscapedName(const std::string& v) {
  std::string out(v.size() * 4 + 1, '\0');
  out.resize(rules::EscapeWireText(v.data(), v.size(), out.data(), out.size()));
  return out;
}

}  // namespace

const char* SlowCauseName(SlowCauseKind kind) {
  switch (kind) {
    case SlowCauseKind::kLateRank:
      return "late_rank";
    case SlowCauseKind::kNetwork:
      return "network";
    case SlowCauseKind::kTransfer:
      return "transfer";
  }
  return "transfer";
}

nlohmann::json SlowSpanJson(const SlowSpan& s) {
  nlohmann::json late = nlohmann::json::array();
  for (const LateRank& r : s.late_ranks) {
    late.push_back({{"rank", r.rank},
                    {"late_ms", static_cast<double>(r.late_ns) / 1e6},
                    {"windows", r.windows}});
  }
  nlohmann::json nics = nlohmann::json::array();
  for (const NicMove& m : s.nics) {
    nics.push_back(
        {{"device", m.device},
         {"port", m.port},
         {"counter", m.counter},
         {"delta", m.delta},
         {"rate_per_s", m.rate_per_s},
         {"usual_per_s", m.usual_per_s < 0 ? nlohmann::json() : nlohmann::json(m.usual_per_s)}});
  }
  nlohmann::json links = nlohmann::json::array();
  for (const LinkMove& m : s.links) {
    links.push_back({{"link_id", absl::StrFormat("%016x", m.link_id)},
                     {"host", m.host},
                     {"dev_name", m.dev_name},
                     {"peer_host", m.peer_host},
                     {"mean_latency_us", m.mean_latency_ns / 1e3},
                     {"usual_latency_us", m.usual_latency_ns / 1e3},
                     {"compared_with", m.vs_other_links ? "other_links" : "own_history"}});
  }
  const double windows = std::max<double>(s.windows, 1);
  return {{"comm", CommLabel(s.comm_hash)},
          {"func", FuncName(s.func)},
          {"size_bucket", SizeBucketLabel(s.bucket)},
          {"first_seq", s.first_seq},
          {"last_seq", s.last_seq},
          {"windows", s.windows},
          {"settled", s.settled},
          {"cause", SlowCauseName(s.cause)},
          {"verdict", SlowSpanVerdict(s)},
          {"usual_ms", static_cast<double>(s.usual_ns) / 1e6},
          {"mean_duration_ms", static_cast<double>(s.duration_ns) / 1e6 / windows},
          {"excess_ms", static_cast<double>(s.excess_ns) / 1e6},
          {"late_rank_ms", static_cast<double>(s.late_ns) / 1e6},
          {"transfer_ms", static_cast<double>(s.transfer_ns) / 1e6},
          {"excess_share", s.usual_ns > 0 ? static_cast<double>(s.excess_ns) / windows /
                                                static_cast<double>(s.usual_ns)
                                          : 0.0},
          {"remote_ranks", s.remote_ranks},
          {"late_ranks", late},
          {"nics", nics},
          {"links", links}};
}

std::string SlowSpanVerdict(const SlowSpan& s) {
  if (!s.settled) return "pending";
  if (s.cause == SlowCauseKind::kLateRank) {
    if (s.late_ranks.empty()) return "late rank";
    std::string out = "late rank";
    for (size_t i = 0; i < s.late_ranks.size() && i < 3; ++i) {
      absl::StrAppend(&out, i == 0 ? " " : ", ", s.late_ranks[i].rank,
                      absl::StrFormat(" (%.2f ms)", static_cast<double>(s.late_ranks[i].late_ns) /
                                                        1e6 / std::max<double>(s.windows, 1)));
    }
    return out;
  }
  if (s.cause == SlowCauseKind::kNetwork) {
    std::string out = "network (";
    int shown = 0;
    for (const NicMove& m : s.nics) {
      if (shown++ == 3) break;
      absl::StrAppend(&out, shown > 1 ? "; " : "", EscapedName(m.device), " port ", m.port, ": ");
      if (m.counter == "state") {
        absl::StrAppend(&out, "link down");
      } else {
        absl::StrAppend(&out, m.counter, absl::StrFormat(" +%.0f", m.delta));
      }
    }
    for (const LinkMove& m : s.links) {
      if (shown++ == 3) break;
      absl::StrAppend(&out, shown > 1 ? "; " : "", "link ",
                      m.dev_name.empty() ? "?" : EscapedName(m.dev_name), " to ",
                      m.peer_host.empty() ? "?" : EscapedName(m.peer_host),
                      absl::StrFormat(": latency %.1f us vs %.1f us", m.mean_latency_ns / 1e3,
                                      m.usual_latency_ns / 1e3));
    }
    return out + ")";
  }
  return s.remote_ranks ? "transfer (no counter moved; or a rank on another node)"
                        : "transfer (inside the node: no NIC)";
}

}  // namespace sentinel::collector
