// In-flight hang detection: see hang_detector.h.
#include "collector/aggregate/hang_detector.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "collector/aggregate/hang_mismatch.h"
#include "collector/aggregate/op_signature.h"

namespace sentinel::collector {

const char* HangRoleName(HangRole role) {
  switch (role) {
    case HangRole::kWaiting:
      return "waiting";
    case HangRole::kNeverLaunched:
      return "never_launched";
    case HangRole::kLaunchedKernelNotStarted:
      return "launched_kernel_not_started";
    case HangRole::kGone:
      return "gone";
    case HangRole::kPassed:
      return "passed";
    case HangRole::kBusyOutsideNccl:
      return "busy_outside_nccl";
    case HangRole::kWaitingElsewhere:
      return "waiting_elsewhere";
    case HangRole::kPausedOutsideNccl:
      return "paused_outside_nccl";
    case HangRole::kMismatched:
      return "mismatched";
  }
  return "unknown";
}

std::string ProcessText(char proc_state, double cpu_share, double io_bytes_per_s) {
  std::vector<std::string> parts;
  if (proc_state != '?')
    parts.push_back(absl::StrCat("process state ", std::string(1, proc_state)));
  if (cpu_share >= 0) parts.push_back(absl::StrFormat("%.2f CPUs", cpu_share));
  if (io_bytes_per_s >= 0)
    parts.push_back(absl::StrFormat("%.1f MB/s of I/O", io_bytes_per_s / 1e6));
  if (parts.empty()) return "";
  return absl::StrCat(" ", absl::StrJoin(parts, ", "),
                      cpu_share >= 0 || io_bytes_per_s >= 0 ? " lately" : "");
}

namespace {

// The function and NCCL seq of collective `ordinal` as most of the ranks stuck inside it issued
// it (a mismatched rank is the odd one out, whatever order the ranks come in); a tie goes to the
// lowest rank's. Unchanged when no rank is stuck there.
void MostIssuedAt(const std::vector<InFlightView>& ranks, uint64_t ordinal, uint8_t* func,
                  uint64_t* seq) {
  struct Issued {
    uint8_t func;
    uint64_t seq;
    int ranks;
    int lowest_rank;
  };
  std::vector<Issued> issued;
  for (const InFlightView& r : ranks) {
    if (!r.has_state || !r.connected || r.ended || r.completed + 1 != ordinal ||
        r.enqueued < ordinal || r.oldest_since_ns <= 0) {
      continue;
    }
    auto it = std::find_if(issued.begin(), issued.end(), [&](const Issued& i) {
      return i.func == r.oldest_func && i.seq == r.oldest_seq;
    });
    if (it == issued.end()) {
      issued.push_back({r.oldest_func, r.oldest_seq, 1, r.rank});
    } else {
      ++it->ranks;
      it->lowest_rank = std::min(it->lowest_rank, r.rank);
    }
  }
  const Issued* most = nullptr;
  for (const Issued& i : issued) {
    if (most == nullptr || i.ranks > most->ranks ||
        (i.ranks == most->ranks && i.lowest_rank < most->lowest_rank)) {
      most = &i;
    }
  }
  if (most == nullptr) return;
  *func = most->func;
  *seq = most->seq;
}

}  // namespace

HangVerdict EvaluateHang(const std::vector<InFlightView>& ranks, int32_t nranks, int64_t now_ns,
                         const HangParams& params) {
  HangVerdict v;
  auto gone = [&](const InFlightView& r) {
    return !r.connected || (r.has_state && now_ns - r.last_update_ns > params.silent_ns);
  };
  // Stuck: a connected rank whose oldest incomplete collective is older than the timeout (a
  // stuck rank that also went silent stays stuck: silence does not clear a hang).
  const InFlightView* longest = nullptr;
  for (const InFlightView& r : ranks) {
    if (!r.has_state || r.ended || !r.connected || r.oldest_since_ns <= 0) continue;
    if (r.enqueued <= r.completed) continue;
    const int64_t age = now_ns - r.oldest_since_ns;
    if (age < params.timeout_ns) continue;
    if (r.completed + 1 > v.ordinal) v.ordinal = r.completed + 1;
    if (longest == nullptr || r.oldest_since_ns < longest->oldest_since_ns) longest = &r;
  }
  if (longest == nullptr) return v;
  v.hung = true;
  v.waiting_ns = now_ns - longest->oldest_since_ns;
  MostIssuedAt(ranks, v.ordinal, &v.func, &v.seq);
  const uint64_t t = v.ordinal;
  int64_t latest_passed_ns = INT64_MIN;   // the newest state of a rank that completed T
  int64_t oldest_waiting_ns = INT64_MAX;  // the oldest state of a rank still inside T
  for (const InFlightView& r : ranks) {
    if (r.ended) continue;
    HangRank hr;
    hr.rank = r.rank;
    hr.enqueued = r.enqueued;
    hr.gpu_started = r.gpu_started;
    hr.completed = r.completed;
    const bool reached = r.has_state && r.enqueued >= t && r.gpu_started >= t;
    if (r.completed >= t) {
      hr.role = HangRole::kPassed;
    } else if (!r.connected || (gone(r) && !reached) || (r.proc_state == 'Z' && !reached)) {
      hr.role = HangRole::kGone;
    } else if (r.has_state && r.enqueued < t && r.inside_elsewhere_since_ns > 0 &&
               r.inside_elsewhere_since_ns <= now_ns &&
               now_ns - r.inside_elsewhere_since_ns >= params.elsewhere_ns) {
      // Blocked in a collective that waits for other nodes: it cannot reach T until that one
      // completes, so it waits too.
      hr.role = HangRole::kWaitingElsewhere;
      hr.elsewhere_comm = r.elsewhere_comm;
      hr.elsewhere_ordinal = r.elsewhere_ordinal;
      hr.elsewhere_ns = now_ns - r.inside_elsewhere_since_ns;
    } else if (r.has_state && r.enqueued < t && r.progress_elsewhere_ns > 0 &&
               now_ns - r.progress_elsewhere_ns <= params.busy_window_ns) {
      hr.role = HangRole::kBusyOutsideNccl;
      v.any_busy = true;
    } else if (r.has_state && r.enqueued < t && r.outside_nccl && WorksOutsideNccl(r)) {
      hr.role = HangRole::kPausedOutsideNccl;
      hr.proc_state = r.proc_state;
      hr.cpu_share = r.cpu_share;
      hr.io_bytes_per_s = r.io_bytes_per_s;
    } else if (!r.has_state || r.enqueued < t) {
      hr.role = HangRole::kNeverLaunched;
    } else if (r.gpu_started < t) {
      hr.role = HangRole::kLaunchedKernelNotStarted;
    } else {
      hr.role = HangRole::kWaiting;
      // Its own time in T: known when T is its oldest incomplete collective.
      if (r.completed + 1 == t && r.oldest_since_ns > 0 && r.oldest_since_ns <= now_ns) {
        hr.waiting_ns = now_ns - r.oldest_since_ns;
      }
    }
    if (hr.role == HangRole::kPassed)
      latest_passed_ns = std::max(latest_passed_ns, r.last_update_ns);
    if (hr.role == HangRole::kWaiting)
      oldest_waiting_ns = std::min(oldest_waiting_ns, r.last_update_ns);
    if (IsCulprit(hr.role)) v.culprits.push_back(r.rank);
    if (hr.role == HangRole::kWaiting) v.waiting.push_back(r.rank);
    if (hr.role == HangRole::kWaitingElsewhere) v.waiting_elsewhere.push_back(r.rank);
    v.ranks.push_back(hr);
  }
  std::sort(v.ranks.begin(), v.ranks.end(),
            [](const HangRank& a, const HangRank& b) { return a.rank < b.rank; });
  std::sort(v.culprits.begin(), v.culprits.end());
  {
    // Stuck culprits first, then the ones alive outside NCCL (busy, then paused).
    std::vector<int> busy;
    std::vector<int> paused;
    std::vector<int> stuck;
    for (const HangRank& r : v.ranks) {
      if (r.role == HangRole::kBusyOutsideNccl) {
        busy.push_back(r.rank);
      } else if (r.role == HangRole::kPausedOutsideNccl) {
        paused.push_back(r.rank);
      } else if (IsCulprit(r.role)) {
        stuck.push_back(r.rank);
      }
    }
    stuck.insert(stuck.end(), busy.begin(), busy.end());
    stuck.insert(stuck.end(), paused.begin(), paused.end());
    v.culprits = std::move(stuck);
  }
  // Paused: every culprit alive outside NCCL (some paused, the rest busy), and not for long yet.
  bool any_paused = false;
  bool only_alive = !v.culprits.empty();
  for (const HangRank& r : v.ranks) {
    if (r.role == HangRole::kPausedOutsideNccl) any_paused = true;
    if (IsCulprit(r.role) && r.role != HangRole::kPausedOutsideNccl &&
        r.role != HangRole::kBusyOutsideNccl) {
      only_alive = false;
    }
  }
  v.paused = any_paused && only_alive && v.waiting_ns < params.paused_timeout_ns;
  std::sort(v.waiting.begin(), v.waiting.end());
  std::sort(v.waiting_elsewhere.begin(), v.waiting_elsewhere.end());
  v.outside_node = v.culprits.empty() &&
                   (static_cast<int32_t>(ranks.size()) < nranks || !v.waiting_elsewhere.empty());
  if (v.culprits.empty() && !v.outside_node) {
    // Every local rank inside T and none behind (a device or network fault) holds only once the
    // last of them has been inside for a while, and only on states newer than any rank's report
    // of having completed T: a rank that arrived a moment ago was what the others waited for (a
    // pause just ended), and a rank already past T means T completed and the others' states
    // are older than that (they follow within a second).
    const int64_t settle = std::min(params.timeout_ns, params.silent_ns);
    for (const HangRank& r : v.ranks) {
      if (r.role == HangRole::kWaiting && r.waiting_ns < settle) v.hung = false;
    }
    if (oldest_waiting_ns < latest_passed_ns) v.hung = false;
  }
  return v;
}

OpSignature InFlightSignature(const InFlightView& v) {
  SentinelWireInFlight in{};
  in.enqueued = v.enqueued;
  in.completed = v.completed;
  in.oldest_func = v.oldest_func;
  in.flags = v.has_signature ? kSentinelInFlightSignature : 0;
  in.oldest_bytes = v.oldest_bytes;
  in.oldest_root = v.oldest_root;
  in.oldest_datatype = v.oldest_datatype;
  return SignatureFromInFlight(in);
}

std::vector<RankOps> StuckRankOps(const std::vector<InFlightView>& ranks, uint64_t ordinal) {
  std::vector<RankOps> ops;
  for (const InFlightView& r : ranks) {
    if (!r.has_state || r.ended || r.completed + 1 != ordinal || r.enqueued < ordinal) {
      continue;  // not inside it with it as its oldest: nothing of it to compare
    }
    RankOps o;
    o.rank = r.rank;
    o.issued = true;
    o.at_stuck = InFlightSignature(r);
    ops.push_back(std::move(o));
  }
  return ops;
}

void ApplyMismatch(uint64_t comm_hash, const std::vector<InFlightView>& ranks,
                   HangVerdict* verdict) {
  HangVerdict& v = *verdict;
  if (!v.hung || v.ordinal == 0) return;
  const std::vector<RankOps> ops = StuckRankOps(ranks, v.ordinal);
  if (ops.size() < 2) return;
  const MismatchVerdict m = CompareAtPosition(comm_hash, v.ordinal, ops);
  if (!m.at_stuck.disagree) return;
  v.mismatch = m.text;
  std::vector<int32_t> blamed;
  for (const int g : m.at_stuck.minority) {
    const SignatureGroup& group = m.at_stuck.groups[static_cast<size_t>(g)];
    blamed.insert(blamed.end(), group.ranks.begin(), group.ranks.end());
  }
  for (HangRank& r : v.ranks) {
    if (std::find(blamed.begin(), blamed.end(), r.rank) == blamed.end()) continue;
    r.role = HangRole::kMismatched;
    if (std::find(v.culprits.begin(), v.culprits.end(), r.rank) == v.culprits.end()) {
      v.culprits.push_back(r.rank);
    }
  }
  std::sort(v.culprits.begin(), v.culprits.end());
  v.outside_node = false;  // the local ranks' own disagreement holds it, wherever the rest are
  v.paused = false;
}

}  // namespace sentinel::collector
