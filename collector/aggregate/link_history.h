// The net-plugin links' cumulative counters over time (send ends on this node), for a link's mean
// completion latency over a span of slow windows (slow_cause.h) against its own earlier mean or
// the other links' over the same span.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "collector/aggregate/slow_cause_types.h"
#include "collector/base/ring.h"

namespace sentinel::collector {

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

}  // namespace sentinel::collector
