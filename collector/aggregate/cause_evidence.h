// The evidence of why one late rank is late, gathered from what sentineld holds (late_cause.h
// judges it): the rank's lateness, its process's CUPTI windows against its local peers', its
// /proc and cgroup figures and its GPU's NVML samples (collector/evidence/), and the slow-cause
// analysis' network finding. Every figure is per collective, over the late span against the span
// of the same length before it (the usual); a source that gives nothing says why.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/container/flat_hash_map.h"

#include "collector/aggregate/late_cause.h"

namespace sentinel::collector {

struct State;
struct CommState;
struct RankState;
struct Config;
class EvidencePoller;

// The late span and the figures of the lateness to explain, on the node's monotonic clock.
struct LateSpan {
  int64_t from_ns = 0;  // the late run's first collective
  int64_t to_ns = 0;    // now
  double late_ms = -1;  // lateness per collective (beyond its usual when late_usual_ms < 0)
  double late_usual_ms = -1;
  double step_ms = -1;  // the compute segment per collective, usual
};
// The usual span is this long at least (10 polls of the evidence at its default period).
inline constexpr int64_t kMinUsualSpanNs = 10LL * 1000000000;

// The span of a rank whose late run began at collective `since_seq` (its history's arrival).
LateSpan LateSpanSince(const RankState& rs, uint64_t since_seq, double late_ms,
                       double late_usual_ms, double step_ms, int64_t now_ns);

// Everything the node holds about the rank's process over the span. `evidence` null: the host and
// NVML figures are missing, with that reason.
CauseEvidence GatherCauseEvidence(const State& state, const CommState& comm, const RankState& rs,
                                  const LateSpan& span, const EvidencePoller* evidence);

// The judgement's bars as sentineld is configured: a lateness under half the straggler's smallest
// relative slowdown (its detector's reference) is not judged.
LateCauseParams CauseParamsFrom(const Config& config);

// The last verdict per late rank, judged again at most once per `kCauseRejudgeNs`: the job-wide
// straggler alerts are rebuilt every tick, and one judgement reads dozens of poll windows.
// Entries not asked for in a minute go. Bounded by the late ranks of the node.
inline constexpr int64_t kCauseRejudgeNs = 1000000000;
class CauseCache {
 public:
  struct Key {
    uint32_t uid = 0;
    uint64_t comm_hash = 0;
    int32_t rank = 0;
    bool remote = false;  // judged from the wait evidence (peers on other nodes)
    bool operator==(const Key& o) const {
      return uid == o.uid && comm_hash == o.comm_hash && rank == o.rank && remote == o.remote;
    }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.uid, k.comm_hash, k.rank, k.remote);
    }
  };
  // The cached verdict when fresh (and for the same late run), else `judge()`'s, stored.
  template <typename Judge>
  const CauseVerdict& Get(const Key& key, uint64_t since_seq, int64_t now_ns, Judge judge) {
    Entry& e = entries_[key];
    if (e.at_ns == 0 || e.since_seq != since_seq || now_ns - e.at_ns >= kCauseRejudgeNs) {
      e.verdict = judge();
      e.at_ns = now_ns;
      e.since_seq = since_seq;
    }
    e.asked_ns = now_ns;
    if (entries_.size() > kMaxEntries) Trim(now_ns);
    return e.verdict;
  }
  size_t size() const { return entries_.size(); }

 private:
  static constexpr size_t kMaxEntries = 4096;
  struct Entry {
    int64_t at_ns = 0;
    int64_t asked_ns = 0;
    uint64_t since_seq = 0;
    CauseVerdict verdict;
  };
  void Trim(int64_t now_ns);
  absl::flat_hash_map<Key, Entry> entries_;
};

// The verdict as the alert's evidence: {"cause", "detail", "explained_share", "figures",
// "support", "what_to_do", "also", "unknown_reason", "not_judged"}.
nlohmann::json CauseJson(const CauseVerdict& verdict);

}  // namespace sentinel::collector
