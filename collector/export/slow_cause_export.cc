// The "why a collective is slow" exports: see slow_cause_export.h.
#include "collector/export/slow_cause_export.h"

#include "absl/strings/str_cat.h"

#include "collector/aggregate/snapshot.h"
#include "collector/export/prometheus_family.h"

namespace sentinel::collector {
namespace {

std::string CauseLabels(const SlowCauseSnapshot::Comm& c, SlowCauseKind cause) {
  return PromLabels(
      {{"comm", CommLabel(c.hash)}, {"uid", absl::StrCat(c.uid)}, {"cause", SlowCauseName(cause)}});
}

// The bounded `nic` label of a span: its first NIC port, else its first link's device.
std::string NicLabel(const SlowSpan& s) {
  if (!s.nics.empty()) return absl::StrCat(s.nics[0].device, ":", s.nics[0].port);
  if (!s.links.empty()) return s.links[0].dev_name;
  return "";
}

}  // namespace

std::string SlowCausePrometheusText(const SlowCauseSnapshot& snap,
                                    const absl::flat_hash_set<uint64_t>& exported) {
  std::string out;
  PromFamily seconds(&out, "sentinel_comm_slow_seconds_total", PromType::kCounter,
                     "Excess of slow collectives over the communicator's usual duration, by cause "
                     "(late_rank, network, transfer).");
  for (const SlowCauseSnapshot::Comm& c : snap.comms) {
    if (!exported.contains(c.hash)) continue;
    for (int k = 0; k < kSlowCauseKinds; ++k) {
      seconds.Add(CauseLabels(c, static_cast<SlowCauseKind>(k)),
                  c.excess_s[static_cast<size_t>(k)]);
    }
  }
  PromFamily windows(
      &out, "sentinel_comm_slow_windows_total", PromType::kCounter,
      "Collectives judged slow against the communicator's usual duration, by cause.");
  for (const SlowCauseSnapshot::Comm& c : snap.comms) {
    if (!exported.contains(c.hash)) continue;
    for (int k = 0; k < kSlowCauseKinds; ++k) {
      windows.AddCount(CauseLabels(c, static_cast<SlowCauseKind>(k)),
                       c.windows[static_cast<size_t>(k)]);
    }
  }
  PromFamily last(
      &out, "sentinel_comm_slow_last_info", PromType::kGauge,
      "1 for the communicator's latest settled slow span: its cause, late rank and NIC named.");
  for (const SlowCauseSnapshot::Comm& c : snap.comms) {
    if (!exported.contains(c.hash) || !c.has_last) continue;
    const SlowSpan& s = c.last;
    const std::string rank = s.cause == SlowCauseKind::kLateRank && !s.late_ranks.empty()
                                 ? absl::StrCat(s.late_ranks[0].rank)
                                 : "";
    const std::string nic = s.cause == SlowCauseKind::kNetwork ? NicLabel(s) : "";
    last.Add(PromLabels({{"comm", CommLabel(c.hash)},
                         {"uid", absl::StrCat(c.uid)},
                         {"cause", SlowCauseName(s.cause)},
                         {"late_rank", rank},
                         {"nic", nic}}),
             1);
  }
  return out;
}

nlohmann::json SlowWindowsJson(const SlowCauseSnapshot& snap, int64_t since_ns) {
  nlohmann::json spans = nlohmann::json::array();
  for (const SlowSpan& s : snap.recent) {
    if (s.end_ns >= since_ns) spans.push_back(SlowSpanJson(s));
  }
  nlohmann::json by_comm = nlohmann::json::array();
  for (const SlowCauseSnapshot::Comm& c : snap.comms) {
    nlohmann::json e = {{"comm", CommLabel(c.hash)}};
    uint64_t windows = 0;
    for (int k = 0; k < kSlowCauseKinds; ++k) {
      e[absl::StrCat(SlowCauseName(static_cast<SlowCauseKind>(k)), "_s")] =
          c.excess_s[static_cast<size_t>(k)];
      windows += c.windows[static_cast<size_t>(k)];
    }
    e["windows"] = windows;
    by_comm.push_back(std::move(e));
  }
  return {{"spans", spans}, {"by_comm", by_comm}};
}

}  // namespace sentinel::collector
