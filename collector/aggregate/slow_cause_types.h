// The plain data of the slow-cause judgement (slow_cause.h): its parameters, the windows the
// aggregator hands it, the spans of slow windows it settles and the snapshot /metrics and
// /v1/telemetry read. The thresholds' formulas: collector/README.md, "Late rank or network".
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace sentinel::collector {

struct SlowCauseParams {
  // A window is slow when its duration exceeds the usual by more than this share of the usual...
  double min_excess_share = 0.2;
  // ... and by more than this many robust standard deviations (1.4826 x MAD) of its own windows.
  double spread_factor = 4.0;
  int min_history = 16;  // windows of that (function, size bucket) learned before any is judged
  int history = 64;      // kept per (function, size bucket): the usual is their median
  // k: a NIC rate counter moved when its rise over its usual rate is above k of its scaled spread
  // (nic_moves.h), or when it stands k spreads above the node's other ports.
  double counter_spread_factor = 3.0;
  // A rise must last two consecutive polls unless it is above this many spreads: one poll's rise
  // of k spreads is chance when many ports are judged for many spans.
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
  uint32_t uid = 0;         // the communicator's owner (CommKey)
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
  uint32_t uid = 0;  // the communicator's owner
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
    uint32_t uid = 0;                                 // its owner
    std::array<double, kSlowCauseKinds> excess_s{};   // settled spans' seconds by cause
    std::array<uint64_t, kSlowCauseKinds> windows{};  // slow windows by their span's cause
    bool has_last = false;
    SlowSpan last;  // the latest settled span
  };
  std::vector<Comm> comms;       // by (uid, hash)
  std::vector<SlowSpan> recent;  // settled spans, newest first (bounded)
  uint64_t evicted = 0;
};

}  // namespace sentinel::collector
