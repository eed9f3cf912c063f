// Why a collective is slow. Each joined collective of a communicator (a window) is judged
// against the communicator's usual for it (slow_window.h); consecutive slow windows form a span,
// settled once the NIC polls and link reports covering it are in, with the ports (nic_moves.h)
// and links (link_history.h) that moved over it and its cause: late_rank, network or transfer.
// The rules as formulas: collector/README.md, "Late rank or network".
//
// Memory is bounded (the kMax* below, SlowCauseParams::history; the least recently active
// communicators and links go, counted in evicted()). Not thread-safe: the Aggregator owns one in
// its State and calls it under its lock.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "collector/aggregate/link_history.h"
#include "collector/aggregate/nic_moves.h"
#include "collector/aggregate/slow_cause_types.h"
#include "collector/aggregate/slow_span_text.h"
#include "collector/aggregate/slow_window.h"
#include "collector/aggregate/snapshot.h"
#include "collector/nic/nic_counters.h"

namespace sentinel::collector {

struct Alert;

class SlowCause {
 public:
  static constexpr size_t kMaxKeys = 4;    // (function, size bucket) histories per communicator
  static constexpr size_t kMaxSpans = 16;  // spans kept per communicator (open and settled)
  static constexpr size_t kMaxComms = 1024;
  static constexpr size_t kMaxRecent = 64;  // spans in the snapshot's `recent`
  static constexpr size_t kMaxPids = 16;    // local processes remembered per communicator

  explicit SlowCause(SlowCauseParams params = {}) : params_(params) {}

  // One joined collective. Returns true when it was judged slow. `nic`: the NIC state, used only
  // when a span must be settled early to stay within kMaxSpans (may be null).
  bool OnWindow(const WindowObservation& w, const NicState* nic = nullptr);
  // One report of a net-plugin link's send end.
  // `pid`: the send end's process (0: unknown), which maps the link to the communicators of
  // that process's ranks.
  void OnLinkSample(uint64_t link_id, const std::string& host, const std::string& dev_name,
                    const std::string& peer_host, const LinkLatencyHistory::Sample& s,
                    uint32_t pid = 0) {
    links_.OnSample(link_id, host, dev_name, peer_host, s, pid);
  }
  // Settles the spans whose samples are in (or whose wait is over) at `now_ns`. Call after each
  // NIC poll and on the aggregator's tick.
  void Settle(const NicState& nic, int64_t now_ns);
  // The communicator is gone.
  void Forget(const CommKey& comm) { comms_.erase(comm); }

  SlowCauseSnapshot Snapshot() const;
  // For an alert's evidence: the communicator's seconds by cause and its latest settled span
  // (null when it has none).
  nlohmann::json EvidenceFor(const CommKey& comm) const;
  // The communicator's latest settled span, nullptr when none.
  const SlowSpan* LastSettled(const CommKey& comm) const;
  // The network findings at `now_ns`: one alert (SlowNetworkAlert, alerts/slow_network_alert.h)
  // per communicator whose latest settled span was slowed by the network (cause kNetwork) and
  // ended within `recent_ns`, in the order of their ids. The caller fires them and resolves the
  // earlier ones (IsSlowNetworkAlert) not returned.
  std::vector<Alert> NetworkAlerts(int64_t now_ns, int64_t recent_ns, const std::string& host,
                                   const std::string& runbook_base) const;
  // A scratch vector for the caller to fill a WindowObservation's ranks without allocating.
  std::vector<WindowRank>& scratch() { return scratch_; }
  // Spans still waiting for their samples (all communicators).
  size_t unsettled() const { return unsettled_; }
  uint64_t evicted() const { return evicted_; }
  const SlowCauseParams& params() const { return params_; }

  // Estimated bytes one communicator's state may reach (the aggregator's per-uid budget).
  static int64_t BytesPerComm(const SlowCauseParams& p);

 private:
  struct Comm {
    std::vector<WindowUsual> usual;
    std::deque<SlowSpan> spans;  // oldest first
    std::array<double, kSlowCauseKinds> excess_s{};
    std::array<uint64_t, kSlowCauseKinds> windows{};
    int64_t last_window_ns = 0;
    std::vector<uint32_t> pids;  // its local ranks' processes (known ones, at most kMaxPids)
  };

  Comm* CommFor(const WindowObservation& w);
  void SettleSpan(Comm* c, SlowSpan* span, const NicState* nic);
  void AddSpan(Comm* c, SlowSpan span, const NicState* nic);

  SlowCauseParams params_;
  absl::flat_hash_map<CommKey, Comm> comms_;
  LinkLatencyHistory links_;
  size_t unsettled_ = 0;
  uint64_t evicted_ = 0;
  std::vector<WindowRank> scratch_;
  NicPollCache nic_cache_;
};

}  // namespace sentinel::collector
