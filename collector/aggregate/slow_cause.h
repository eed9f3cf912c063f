// Why a collective is slow: for each communicator's joined collective (a window: from the
// earliest local arrival to the latest local end), the excess over the communicator's own usual
// duration for that function and size bucket, split into
//   - waiting for late ranks: the last arrival's lateness beyond the usual arrival skew (which
//     ranks, how much), and
//   - slower transfer: the rest, the time after the last rank arrived beyond its usual,
// and, when the transfer part dominates, the NIC ports and net-plugin links whose counters moved
// in that window ("network"), joined on the node's CLOCK_MONOTONIC.
//
// Every threshold is relative: a share of the usual duration and a multiple of the
// communicator's own spread (median absolute deviation) for the window; a rate counter "moved"
// when its rate over the window stands above its own usual rate by several of its own robust
// standard deviations (NIC counters are noisy: a multiple of a short median is not evidence), in
// two consecutive polls unless far above (one poll's rise is chance, many ports and spans over),
// and, when sentineld cannot tell which ports the communicator uses, also above the node's other
// ports by as many; or, for a port slowed before its own history could tell its usual, above the
// node's other ports in two consecutive polls (errors and link-down: any growth); a link when its
// mean completion latency over the window is a multiple of its own earlier mean or of the other
// links' mean over the same window.
//
// Which ports and links count: none for a communicator whose ranks are all on this node (its
// transfers do not leave the node); for one with ranks elsewhere, the ports of the net-plugin
// connections its local processes opened when those are known (WindowRank::pid, the links'
// pid), else every port, held to the stand-out test above. After the last local arrival a
// communicator with ranks elsewhere may still be waiting for a late rank on another node: this
// node cannot tell that from a slower transfer, so without a port or link that moved the span is
// "transfer" (its verdict says: a rank on another node or the network), never "network".
//
// Counter samples are periodic and coarse (NIC polls every few seconds): consecutive slow windows
// of a communicator are gathered into a span, and a span is settled (its NICs and links named,
// its cause fixed, its seconds counted) once a NIC poll and a link report later than its end came
// in, or after SlowCauseParams::settle_max_ns without them.
//
// Memory is bounded: per communicator kMaxKeys (function, size bucket) histories of
// SlowCauseParams::history windows and kMaxSpans spans; at most kMaxComms communicators and
// kMaxLinks links (the least recently active go, counted in evicted()).
//
// Not thread-safe: the Aggregator owns one in its State and calls it under its lock.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "collector/base/ring.h"
#include "collector/nic/nic_counters.h"

namespace sentinel::collector {

struct Alert;

struct SlowCauseParams {
  // A window is slow when its duration exceeds the usual by more than this share of the usual...
  double min_excess_share = 0.2;
  // ... and by more than this many robust standard deviations (1.4826 x MAD) of its own windows.
  double spread_factor = 4.0;
  int min_history = 16;  // windows of that (function, size bucket) learned before any is judged
  int history = 64;      // kept per (function, size bucket): the usual is their median
  // A NIC rate counter (port_xmit_wait, congestion notifications) moved when its rate over the
  // overlapping polls exceeds its median rate over its other kept polls (less those in which it
  // stood this many spreads above the node's other ports, while they are a minority: a port slowed
  // soon after polling began) by this many of their robust standard deviations (the larger of
  // 1.4826 x MAD and 1.2533 x their mean absolute deviation from the median; 0 for a flat counter,
  // where any rise counts; at least the node's usual noise and its ports' median spread, widened by
  // sqrt(1 + pi / 2n) for a usual that is the median of only n polls), or, for a port among the
  // others until lately, when it exceeds their median rate by as many of their spread (at least
  // the node's usual noise) over the span and in two consecutive polls,
  // and, when the communicator's ports are not known, that excess (in those deviations) also
  // exceeds the median excess of the node's other ports with that counter by as many.
  double counter_spread_factor = 3.0;
  // That excess must last: two consecutive polls, from the one just before the span to its last,
  // each above the usual by as many deviations; one poll is enough only when the span's excess is
  // above this many. Noisy counters give a rise of three deviations on one poll by chance when
  // many ports are judged for many spans; a slower link stays slower.
  double counter_lone_poll_factor = 6.0;
  int counter_min_polls = 8;      // other polls needed for a usual rate and its spread
  int counter_usual_polls = 120;  // the most recent other polls the usual is taken over
  // A link moved when its mean latency over the window exceeds this multiple of its own earlier
  // mean, or of the median of the other links' means over the same window.
  double link_latency_factor = 2.0;
  uint64_t link_min_requests = 4;  // requests in a stretch for its mean to count
  // Slow windows closer than this to the span's last one join it ...
  int64_t coalesce_gap_ns = 1000000000;
  // ... while the span is shorter than this.
  int64_t span_max_ns = 10LL * 1000000000;
  // A span waits at most this long after its end for the samples covering it.
  int64_t settle_max_ns = 30LL * 1000000000;
  // Windows of a (function, size bucket) slow for this long in a row are the new usual: its
  // history is learned again.
  int64_t relearn_after_ns = 300LL * 1000000000;
};

enum class SlowCauseKind : uint8_t { kLateRank = 0, kNetwork = 1, kTransfer = 2 };
inline constexpr int kSlowCauseKinds = 3;
// "late_rank", "network", "transfer" (the `cause` label: bounded).
const char* SlowCauseName(SlowCauseKind kind);

// One local rank's arrival in a joined collective (node clock).
struct WindowRank {
  int32_t rank = 0;
  int64_t arrival_ns = 0;
  uint32_t pid = 0;  // its process (0: unknown): the net-plugin links it opened are its NICs
};

// One joined collective of a communicator, as the aggregator completes it. Every local rank
// arrived and has a GPU duration (max_end_ns is the latest arrival + duration).
struct WindowObservation {
  uint64_t comm_hash = 0;
  int32_t nranks = 0;       // job-wide
  int32_t local_ranks = 0;  // ranks on this node (nranks > local_ranks: some are elsewhere)
  uint8_t func = 0;
  int bucket = 0;  // SizeBucket(bytes)
  uint64_t seq = 0;
  int64_t min_arrival_ns = 0;
  int64_t max_arrival_ns = 0;
  int64_t max_end_ns = 0;
  const WindowRank* ranks = nullptr;
  size_t nranks_seen = 0;
};

// A NIC port whose counter moved over a span.
struct NicMove {
  std::string device;
  int port = 0;
  std::string counter;      // NicCounterName, or "state" (the port is not ACTIVE)
  double delta = 0;         // growth attributed to the span (overlap share of each poll)
  double rate_per_s = 0;    // over the polls overlapping the span
  double usual_per_s = -1;  // median over its other kept polls (-1: not used, e.g. errors)
  double spread_per_s = 0;  // robust standard deviation of those polls' rates
};

// A net-plugin link (send end on this node) whose latency moved over a span.
struct LinkMove {
  uint64_t link_id = 0;
  std::string host;
  std::string dev_name;
  std::string peer_host;
  double mean_latency_ns = 0;
  double usual_latency_ns = 0;  // what it was compared with
  bool vs_other_links = false;  // usual = the other links' median over the span (else its own)
};

struct LateRank {
  int32_t rank = 0;
  int64_t late_ns = 0;  // summed over the span's windows: its lateness beyond the usual skew
  uint32_t windows = 0;
};

// A run of slow windows of one communicator, (function, size bucket).
struct SlowSpan {
  static constexpr size_t kMaxLateRanks = 8;
  uint64_t comm_hash = 0;
  uint8_t func = 0;
  int bucket = 0;
  uint64_t first_seq = 0;
  uint64_t last_seq = 0;
  uint32_t windows = 0;
  int64_t start_ns = 0;              // the first window's earliest arrival (node clock)
  int64_t end_ns = 0;                // the last window's latest end
  int64_t usual_ns = 0;              // the usual duration of one window
  int64_t duration_ns = 0;           // summed durations of its windows
  int64_t excess_ns = 0;             // summed: late_ns + transfer_ns
  int64_t late_ns = 0;               // waiting for late ranks
  int64_t transfer_ns = 0;           // slower transfer after the last arrival
  bool remote_ranks = false;         // the communicator has ranks on other nodes
  std::vector<LateRank> late_ranks;  // largest first, at most kMaxLateRanks
  bool settled = false;
  SlowCauseKind cause = SlowCauseKind::kTransfer;  // final once settled
  std::vector<NicMove> nics;
  std::vector<LinkMove> links;
};

// For /metrics, /v1/telemetry and alerts: copied under the aggregator's lock.
struct SlowCauseSnapshot {
  struct Comm {
    uint64_t hash = 0;
    std::array<double, kSlowCauseKinds> excess_s{};   // settled spans' seconds by cause
    std::array<uint64_t, kSlowCauseKinds> windows{};  // slow windows by their span's cause
    bool has_last = false;
    SlowSpan last;  // the latest settled span
  };
  std::vector<Comm> comms;       // by hash
  std::vector<SlowSpan> recent;  // settled spans, newest first (bounded)
  uint64_t evicted = 0;
};

// The net-plugin links' cumulative counters over time (send ends), for the latency over a span.
class LinkLatencyHistory {
 public:
  static constexpr size_t kMaxLinks = 512;
  static constexpr size_t kSamplesPerLink = 32;
  struct Sample {
    int64_t now_ns = 0;
    uint64_t requests = 0;
    uint64_t latency_ns_sum = 0;
  };
  struct Link {
    uint64_t link_id = 0;
    uint32_t pid = 0;  // the send end's process (0: unknown)
    std::string host;
    std::string dev_name;
    std::string peer_host;
    Ring<Sample> samples{kSamplesPerLink};
    // True when its send end's process is known and one of `pids`.
    bool SentBy(const std::vector<uint32_t>& pids) const {
      return pid != 0 && std::find(pids.begin(), pids.end(), pid) != pids.end();
    }
  };

  // A report of the link's send end (cumulative counters, plugin's clock = the node's).
  // `pid`: the send end's process (0: unknown).
  void OnSample(uint64_t link_id, const std::string& host, const std::string& dev_name,
                const std::string& peer_host, const Sample& s, uint32_t pid = 0);
  // The links whose latency moved over [start_ns, end_ns]; only those of `pids` when any link is
  // known to be theirs (null or none known: every link).
  std::vector<LinkMove> Moves(int64_t start_ns, int64_t end_ns, const SlowCauseParams& p,
                              const std::vector<uint32_t>* pids = nullptr) const;
  // The device names (a merged "mlx5_0+mlx5_1" split) of the links opened by `pids`, sorted,
  // without repeats; empty when none is known.
  std::vector<std::string> DevicesOf(const std::vector<uint32_t>& pids) const;
  int64_t latest_ns() const { return latest_ns_; }
  bool empty() const { return links_.empty(); }
  uint64_t evicted() const { return evicted_; }

 private:
  absl::flat_hash_map<uint64_t, Link> links_;
  int64_t latest_ns_ = INT64_MIN;
  uint64_t evicted_ = 0;
};

// The NIC ports whose counters moved over [start_ns, end_ns] (their kept poll history).
// `devices`: the devices the communicator's transfers use; when one of them is a polled port,
// only their ports count, judged against their own history. Otherwise (null, empty, or none
// polled) every port counts, and a rate counter must also stand out from the other ports'. A rate
// counter's rise must last two consecutive polls (the one before the span counts) unless it is
// above SlowCauseParams::counter_lone_poll_factor deviations.
// What NicMovesIn works out from the ports' polls alone (the node's usual noise; whether each poll
// of each port stood above the node's other ports): the same for every span judged until the next
// poll, so a caller that judges many keeps it between calls (linear, not ports² x polls, each).
struct NicPollCache {
  const NicState* nic = nullptr;
  uint64_t polls = 0;      // NicState::polls when filled
  uint64_t signature = 0;  // of the ports' history sizes and newest polls
  double k = 0;
  int usual_polls = 0;
  std::array<double, kNicCounterCount> noise{};
  // [port x kNicCounterCount + counter][interval]: 0 not worked out yet, 1 above its peers, 2 not.
  std::vector<std::vector<uint8_t>> above;
};

std::vector<NicMove> NicMovesIn(const NicState& nic, int64_t start_ns, int64_t end_ns,
                                const SlowCauseParams& p,
                                const std::vector<std::string>* devices = nullptr,
                                NicPollCache* cache = nullptr);

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
  void Forget(uint64_t comm_hash) { comms_.erase(comm_hash); }

  SlowCauseSnapshot Snapshot() const;
  // For an alert's evidence: the communicator's seconds by cause and its latest settled span
  // (null when it has none).
  nlohmann::json EvidenceFor(uint64_t comm_hash) const;
  // The communicator's latest settled span, nullptr when none.
  const SlowSpan* LastSettled(uint64_t comm_hash) const;
  // The network findings at `now_ns`: one alert per communicator whose latest settled span was
  // slowed by the network (cause kNetwork) and ended within `recent_ns` (kind link_degraded, id
  // kSlowNetworkAlertPrefix + comm label, no rank: the NIC and link named, the waiting for late
  // ranks quoted). The caller fires them and resolves earlier ids of that prefix not returned.
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
  struct Usual {
    uint8_t func = 0;
    int bucket = 0;
    Ring<int64_t> skew;
    Ring<int64_t> transfer;
    Ring<int64_t> total;
    int64_t skew0 = 0;
    int64_t transfer0 = 0;
    int64_t spread = 0;  // 1.4826 x MAD of total
    int pushes_since_cache = 1 << 30;
    double slow_fraction = 0;  // decayed share of slow windows
    int64_t mostly_slow_since = INT64_MIN;
    int64_t last_used_ns = 0;
  };
  struct Comm {
    std::vector<Usual> usual;
    std::deque<SlowSpan> spans;  // oldest first
    std::array<double, kSlowCauseKinds> excess_s{};
    std::array<uint64_t, kSlowCauseKinds> windows{};
    int64_t last_window_ns = 0;
    std::vector<uint32_t> pids;  // its local ranks' processes (known ones, at most kMaxPids)
  };

  Usual* UsualFor(Comm* c, uint8_t func, int bucket, int64_t now_ns);
  void SettleSpan(Comm* c, SlowSpan* span, const NicState* nic);
  void AddSpan(Comm* c, SlowSpan span, const NicState* nic);

  SlowCauseParams params_;
  absl::flat_hash_map<uint64_t, Comm> comms_;
  LinkLatencyHistory links_;
  size_t unsettled_ = 0;
  uint64_t evicted_ = 0;
  std::vector<WindowRank> scratch_;
  NicPollCache nic_cache_;
};
inline constexpr const char* kSlowNetworkAlertPrefix = "link_degraded-slow-";

// A span as JSON (the /v1/telemetry "slow_windows" entries, alerts' evidence).
nlohmann::json SlowSpanJson(const SlowSpan& s);
// One line for people: "late rank 5 (12.3 ms)" or "network (mlx5_0 port 1: port_xmit_wait
// +48213)" or "transfer (no counter moved; or a rank on another node)" or, for a communicator
// whose ranks are all on this node, "transfer (inside the node: no NIC)".
std::string SlowSpanVerdict(const SlowSpan& s);

}  // namespace sentinel::collector
